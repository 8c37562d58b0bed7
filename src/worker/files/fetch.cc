#include "worker/files/fetch.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <optional>

#include "common/unique_fd.h"
#include "net/sha256.h"
#include "worker/files/file_util.h"

namespace drover::worker {

using net::IsSha256Hex;
using net::Sha256;
using net::Sha256OfFile;
namespace {

// How one download ended.
struct Attempt {
  // Set when the download must stop everything (local disk full or broken);
  // the caller returns it.
  std::optional<Status> fatal;
  // Set when this source failed and the next may be tried.
  std::optional<std::string> failure;
  bool mismatch = false;  // the failure: it sent other bytes
  uint64_t bytes = 0;
};

// Downloads from `source` into the new file `part`; never commits.
Attempt Download(const Source& source, size_t index, const std::string& sha256, uint64_t size,
                 const std::string& part) {
  Attempt a;
  UniqueFd fd(::open(part.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid()) {
    a.fatal = ErrnoStatus(errno, "cannot create " + part);
    return a;
  }
  Sha256 hash;
  constexpr size_t kWriteBytes = 1 << 20;
  std::string pending;
  pending.reserve(kWriteBytes + (256 << 10));
  uint64_t written = 0;
  bool oversize = false;
  std::optional<Status> write_error;
  ChunkSink sink = [&](std::string_view chunk) -> Status {
    if (oversize || write_error) return Status(StatusCode::kAborted, "download already stopped");
    if (chunk.size() > size - a.bytes) {
      oversize = true;
      return InvalidArgument("more than the " + std::to_string(size) + " bytes expected");
    }
    // Gathered into 1 MiB writes: a download arrives in pieces of a TLS
    // record or less.
    pending.append(chunk);
    if (pending.size() >= kWriteBytes) {
      Status s = WriteAll(fd.fd(), pending, part);
      if (!s.ok()) {
        write_error = s;
        return s;
      }
      // Its writeback starts now, while the rest arrives: the fdatasync
      // at the end waits for the last pieces only. (Advice: where it is
      // refused, that fdatasync does it all.)
      ::sync_file_range(fd.fd(), static_cast<off_t>(written), static_cast<off_t>(pending.size()),
                        SYNC_FILE_RANGE_WRITE);
      written += pending.size();
      pending.clear();
    }
    hash.Update(chunk);
    a.bytes += chunk.size();
    return Status::Ok();
  };
  Status got = source(sink);
  if (!pending.empty() && !write_error) {
    if (Status s = WriteAll(fd.fd(), pending, part); !s.ok()) write_error = s;
  }

  if (!write_error) {
    // Data must be on disk before the rename makes it an entry; a delayed
    // allocation failure shows up here or at close.
    if (::fdatasync(fd.fd()) != 0 && errno != EINVAL) {
      write_error = ErrnoStatus(errno, "cannot write " + part);
    } else if (::close(fd.Release()) != 0) {
      write_error = ErrnoStatus(errno, "cannot write " + part);
    }
  }
  const std::string from = "source " + std::to_string(index);
  if (write_error) {
    a.fatal = *write_error;
  } else if (oversize) {
    a.mismatch = true;
    a.failure = "sha256 mismatch from " + from + ": sent more than " + std::to_string(size) +
                " bytes, want " + ShortSha(sha256);
  } else if (!got.ok()) {
    a.failure = from + ": " + got.ToString();
  } else if (a.bytes != size) {
    a.failure = "size mismatch from " + from + ": got " + std::to_string(a.bytes) +
                " bytes, want " + std::to_string(size);
  } else if (std::string digest = hash.HexDigest(); digest != sha256) {
    a.mismatch = true;
    a.failure =
        "sha256 mismatch from " + from + ": got " + ShortSha(digest) + ", want " + ShortSha(sha256);
  }
  return a;
}

}  // namespace

Result<FetchReport> FetchIntoCache(FileCache& cache, const std::string& sha256, uint64_t size,
                                   const std::vector<Source>& sources,
                                   std::vector<size_t>* mismatched) {
  if (!IsSha256Hex(sha256)) return InvalidArgument("not a SHA-256: \"" + sha256 + "\"");
  FetchReport report;
  if (cache.Has(sha256)) {
    report.already_cached = true;
    return report;
  }
  for (size_t i = 0; i < sources.size(); ++i) {
    ASSIGN_OR_RETURN(std::string part, cache.BeginFetch(sha256, size));
    Attempt a = Download(sources[i], i, sha256, size, part);
    if (a.fatal) {
      cache.AbortFetch(part);
      spdlog::warn("fetch {}: {}", ShortSha(sha256), a.fatal->ToString());
      return *a.fatal;
    }
    if (a.failure) {
      if (mismatched != nullptr && a.mismatch) mismatched->push_back(i);
      cache.AbortFetch(part);
      spdlog::warn("fetch {}: {}", ShortSha(sha256), *a.failure);
      report.failures.push_back(std::move(*a.failure));
      continue;
    }
    // CommitFetch removes the temporary file itself when it fails.
    RETURN_IF_ERROR(cache.CommitFetch(part, sha256, size));
    report.source_used = i;
    report.bytes = a.bytes;
    return report;
  }
  std::string msg = "cannot fetch " + ShortSha(sha256) + " (" + std::to_string(size) +
                    " bytes) from any of " + std::to_string(sources.size()) + " sources";
  for (const std::string& f : report.failures) msg += "; " + f;
  return Unavailable(std::move(msg));
}

}  // namespace drover::worker
