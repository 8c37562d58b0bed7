// FilePlane's outputs: a succeeded task's outputs collected into the cache
// and kept for their job until the server releases it, and copies of
// another worker's outputs (replicas) (file_plane.h).
#include <spdlog/spdlog.h>

#include <string>
#include <utility>
#include <vector>

#include "worker/agent/file_plane_impl.h"
#include "worker/files/file_cache.h"
#include "worker/files/output_scan.h"

namespace drover::worker {

OutputCap OutputCapOf(const proto::Assignment& a) {
  if (a.max_output_bytes == 0) return {};
  return OutputCap{a.max_output_bytes,
                   a.max_output_by_task ? "the task's" : "the server's --max-output"};
}

std::vector<JobId> FilePlane::KeptJobs() const { return impl_->cache->KeptJobs(); }

void FilePlane::FetchCopy(JobId job, const std::vector<proto::InputFile>& files,
                          std::function<void(Status)> done) {
  std::vector<std::string> shas;
  for (const proto::InputFile& f : files) shas.push_back(f.file.sha256);
  // Kept first, as a task's own outputs are: nothing evicts what arrives.
  if (Status kept = impl_->cache->Keep(job, shas); !kept.ok()) return done(kept);
  proto::Assignment a;
  a.files = files;
  Fetch(a, std::move(done));
}

void FilePlane::ReleaseOutputs(const std::vector<JobId>& jobs) {
  for (JobId job : jobs) impl_->cache->Unkeep(job);
}

void FilePlane::CollectOutputs(const std::string& dir, JobId job, const OutputCap& assigned,
                               std::function<void(Result<std::vector<core::OutputFile>>)> done) {
  FileCache* c = impl_->cache.get();
  OutputLimits limits;
  limits.max_bytes = assigned.bytes;
  limits.whose = assigned.whose;
  if (const uint64_t own = impl_->options.max_output_bytes;
      own != 0 && (limits.max_bytes == 0 || own < limits.max_bytes)) {
    limits.max_bytes = own;
    limits.whose = "worker --max-output";
  }
  limits.max_files = core::kMaxOutputFiles;
  impl_->OnThread<Result<std::vector<core::OutputFile>>>(
      [c, dir, job, limits]() -> Result<std::vector<core::OutputFile>> {
        ASSIGN_OR_RETURN(std::vector<OutputEntry> entries, ScanOutputs(dir, limits));
        // Kept for the job's dependents before they enter the cache: no
        // fetch can evict them in between (docs/design.md, retention).
        std::vector<std::string> shas;
        for (const OutputEntry& e : entries) shas.push_back(e.sha256);
        if (Status kept = c->Keep(job, shas); !kept.ok()) {
          spdlog::warn("file service: outputs of job {} are kept until the worker stops only: {}",
                       job, kept.ToString());
        }
        std::vector<core::OutputFile> outputs;
        for (OutputEntry& e : entries) {
          if (std::string problem = core::OutputNameProblem(e.name); !problem.empty()) {
            return InvalidArgument("output " + e.name + ": its name " + problem);
          }
          if (Status kept = c->Adopt(dir + "/" + e.name, e.sha256, e.size); !kept.ok()) {
            // Still an output (listed, and in the task's directory), but
            // peers cannot fetch it from here.
            if (kept.code() != StatusCode::kResourceExhausted) {
              return kept.WithContext("keeping output " + e.name);
            }
            spdlog::warn("file service: output {} is not served: {}", e.name, kept.message());
          }
          outputs.push_back(core::OutputFile{std::move(e.name), e.size, std::move(e.sha256)});
        }
        return outputs;
      },
      std::move(done));
}

}  // namespace drover::worker
