// FilePlane's checkpoints: a task's checkpoint directory saved to the
// server's file store, and restored from it for a later attempt
// (file_plane.h).
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "net/http_client.h"
#include "net/http_types.h"
#include "worker/agent/file_plane_impl.h"
#include "worker/files/fetch.h"
#include "worker/files/file_cache.h"
#include "worker/files/file_util.h"
#include "worker/files/output_scan.h"

namespace drover::worker {

namespace {

// What one save round found (on its thread).
struct SaveRound {
  std::vector<core::OutputFile> files;
  bool uploaded = false;  // a file had to be sent
  std::string skipped;    // non-empty: this round counts for nothing (why)
};

Result<SaveRound> SaveOnThread(const net::ClientOptions& server, const std::string& dir,
                               const std::atomic<bool>& stopping) {
  SaveRound round;
  timespec began{};
  ::clock_gettime(CLOCK_REALTIME, &began);  // reads the system clock: files' mtimes
  OutputLimits limits;
  limits.max_files = core::kMaxOutputFiles;
  ASSIGN_OR_RETURN(std::vector<OutputEntry> entries, ScanOutputs(dir, limits));
  if (entries.empty()) {
    round.skipped = "empty";
    return round;
  }
  for (OutputEntry& e : entries) {
    if (stopping) return Unavailable("the worker is stopping");
    if (std::string problem = core::OutputNameProblem(e.name); !problem.empty()) {
      return InvalidArgument("checkpoint file " + e.name + ": its name " + problem);
    }
    const std::string target = "/api/v1/files/" + e.sha256;
    net::HttpClient http(server);
    net::ClientRequest head;
    head.method = "HEAD";
    head.target = target;
    ASSIGN_OR_RETURN(net::Response known, http.Send(head));
    if (known.status == 404) {
      net::ClientRequest put;
      put.method = "PUT";
      put.target = target;
      put.content_type = "application/octet-stream";
      ASSIGN_OR_RETURN(net::Response stored, http.Upload(put, dir + "/" + e.name));
      if (stored.status == 400) {
        // The server hashed other bytes than the listing did.
        round.skipped = e.name + " changed while it was saved";
        return round;
      }
      RETURN_IF_ERROR(net::StatusFromResponse(stored).WithContext("uploading " + e.name));
      round.uploaded = true;
    } else if (known.status != 200) {
      return Unavailable("the server answered HEAD " + target + " with " +
                         std::to_string(known.status));
    }
    round.files.push_back(core::OutputFile{std::move(e.name), e.size, std::move(e.sha256)});
  }
  // A file written since the listing began (a new inode renamed into
  // place, or bytes changed in place) makes the set inconsistent: skipped.
  for (const core::OutputFile& f : round.files) {
    struct stat st {};
    const std::string path = dir + "/" + f.name;
    if (::stat(path.c_str(), &st) != 0 || static_cast<uint64_t>(st.st_size) != f.size ||
        st.st_mtim.tv_sec > began.tv_sec ||
        (st.st_mtim.tv_sec == began.tv_sec && st.st_mtim.tv_nsec >= began.tv_nsec)) {
      round.skipped = f.name + " changed while it was saved";
      return round;
    }
  }
  return round;
}

}  // namespace

void FilePlane::SetServer(net::ClientOptions server) { impl_->store_server = std::move(server); }

void FilePlane::SaveCheckpoint(TaskId task, uint32_t attempt, const std::string& dir, bool final,
                               SaveDone done) {
  Impl::Saving& s = impl_->saving[task];
  if (s.running) {
    if (!final) return done(std::optional<std::vector<core::OutputFile>>());
    // After the running round (which may have read the directory before the
    // task's last write).
    std::weak_ptr<Impl> weak = impl_;
    s.final_next = [weak, task, attempt, dir, done = std::move(done)]() mutable {
      if (auto self = weak.lock()) self->RunSave(task, attempt, dir, std::move(done));
    };
    return;
  }
  impl_->RunSave(task, attempt, dir, std::move(done));
}

void FilePlane::Impl::RunSave(TaskId task, uint32_t attempt, const std::string& dir,
                              SaveDone done) {
  if (!store_server) return done(Unavailable("not attached to a server"));
  saving[task].running = true;
  const net::ClientOptions to = *store_server;
  std::atomic<bool>* stop = &stopping;
  OnThread<Result<SaveRound>>(
      [to, dir, stop]() { return SaveOnThread(to, dir, *stop); },
      [this, task, attempt, done = std::move(done)](Result<SaveRound> round) {
        Saving& s = saving[task];
        s.running = false;
        Result<std::optional<std::vector<core::OutputFile>>> answer =
            std::optional<std::vector<core::OutputFile>>();
        if (!round.ok()) {
          answer = round.status();
        } else if (!round->skipped.empty()) {
          if (round->skipped != "empty") {
            spdlog::info("checkpoint of {}#{}: round skipped: {}", task.ToString(), attempt,
                         round->skipped);
          }
        } else if (round->uploaded || s.reported_attempt != attempt || s.reported != round->files) {
          s.reported_attempt = attempt;
          s.reported = round->files;
          answer = std::optional(std::move(round->files));
        }
        std::function<void()> next = std::move(s.final_next);
        s.final_next = nullptr;
        done(std::move(answer));
        if (next) next();
      });
}

void FilePlane::ForgetCheckpoint(TaskId task) {
  auto it = impl_->saving.find(task);
  if (it != impl_->saving.end() && !it->second.running && !it->second.final_next) {
    impl_->saving.erase(it);
  }
}

void FilePlane::RestoreCheckpoint(const std::vector<core::OutputFile>& files,
                                  const std::string& dir,
                                  std::optional<std::pair<uid_t, gid_t>> owner,
                                  std::function<void(Status)> done) {
  if (!impl_->store_server) return done(Unavailable("not attached to a server"));
  const net::ClientOptions server = *impl_->store_server;
  FileCache* cache = impl_->cache.get();
  Impl* self = impl_.get();
  impl_->OnThread<Status>(
      [server, files, dir, owner, cache, self]() -> Status {
        // The task's directories as the executor makes them: the job's
        // passable (0711), the checkpoint directory private.
        RETURN_IF_ERROR(MakeDirs(ParentDir(dir), 0711));
        RETURN_IF_ERROR(MakeDirs(dir, 0700));
        // What an older attempt left here is not the latest state: replaced
        // (the agent keeps it only when this worker saved the latest).
        std::error_code ec;
        for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
          std::filesystem::remove_all(entry.path(), ec);
          if (ec) return Internal("cannot empty " + dir + ": " + ec.message());
        }
        if (ec) return Internal("cannot list " + dir + ": " + ec.message());
        auto chown_to_owner = [&](const std::string& path) {
          if (owner && ::lchown(path.c_str(), owner->first, owner->second) != 0) {
            spdlog::warn("checkpoint: cannot hand {} to the task's user: {}", path,
                         std::strerror(errno));
          }
        };
        chown_to_owner(dir);
        for (const core::OutputFile& f : files) {
          if (self->stopping) return Unavailable("the worker is stopping");
          if (!cache->Has(f.sha256)) {
            // A file the server no longer holds (its job forgotten, a lost
            // disk) cannot come back: say so apart from a failed transfer.
            net::HttpClient http(server);
            net::ClientRequest head;
            head.method = "HEAD";
            head.target = "/api/v1/files/" + f.sha256;
            ASSIGN_OR_RETURN(net::Response known, http.Send(head));
            if (known.status == 404) {
              return NotFound("checkpoint file " + f.name + ": the server no longer has it");
            }
          }
          cache->Pin(f.sha256);
          const Source from_server = ServerFileSource(server, f.sha256);
          Result<FetchReport> fetched = FetchIntoCache(*cache, f.sha256, f.size, {from_server});
          Status copied = fetched.status();
          if (copied.ok()) {
            const std::string dest = dir + "/" + f.name;
            // Subdirectories as the task made them (names are checked:
            // relative, no "..").
            std::string sub = ParentDir(dest);
            copied = MakeDirs(sub, 0700);
            for (; copied.ok() && sub.size() > dir.size(); sub = ParentDir(sub))
              chown_to_owner(sub);
            if (copied.ok()) copied = CopyFile(cache->PathOf(f.sha256), dest, 0600);
            if (copied.ok()) chown_to_owner(dest);
          }
          cache->Unpin(f.sha256);
          if (!copied.ok()) return copied.WithContext("checkpoint file " + f.name);
        }
        return Status::Ok();
      },
      std::move(done));
}

}  // namespace drover::worker
