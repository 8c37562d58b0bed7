#include "worker/files/fetch.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <thread>
#include <vector>

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

// Hashes and writes a download to `fd` in 1 MiB pieces (a download arrives
// in pieces of a TLS record or less). Past the first piece a thread of its
// own hashes and writes while the caller receives the next, up to
// kPieces ahead. A file of kDirectMinBytes or more goes around the page
// cache (O_DIRECT) where the file system takes it: a fetch of a big input
// then neither pushes the machine owner's working set out of memory nor
// pays for page-cache pages of its own, and the sync at the end has little
// left to do. The dependent reads it from the disk.
class PieceWriter {
 public:
  static constexpr uint64_t kDirectMinBytes = 16 << 20;

  PieceWriter(int fd, uint64_t size, const std::string& path)
      : fd_(fd),
        path_(path),
        // A small file takes a buffer of its own size.
        piece_bytes_(static_cast<size_t>(std::min<uint64_t>(kPieceBytes, RoundUp(size)))) {
    if (size >= kDirectMinBytes) direct_ = SetDirect(true);
    current_ = NewBuffer();
  }

  ~PieceWriter() { Stop(); }

  // Takes `bytes`; a write that failed before is returned here.
  Status Append(std::string_view bytes) {
    while (!bytes.empty()) {
      // A full piece goes once more follows, so that a file of one piece
      // is written by the caller, with no thread.
      if (fill_ == piece_bytes_) RETURN_IF_ERROR(Hand());
      size_t n = std::min(bytes.size(), piece_bytes_ - fill_);
      std::memcpy(current_.get() + fill_, bytes.data(), n);
      fill_ += n;
      bytes.remove_prefix(n);
    }
    return Status::Ok();
  }

  // Writes what is left, then makes it durable.
  Status Finish() {
    if (thread_.joinable()) {
      RETURN_IF_ERROR(Hand(/*take_next=*/false));
      Stop();
      std::lock_guard lock(mu_);
      if (error_) return *error_;
    } else {
      RETURN_IF_ERROR(Write({current_.get(), fill_}));
    }
    if (::fdatasync(fd_) != 0 && errno != EINVAL)
      return ErrnoStatus(errno, "cannot write " + path_);
    return Status::Ok();
  }

  std::string HexDigest() { return hash_.HexDigest(); }

 private:
  static constexpr size_t kPieceBytes = 1 << 20;
  static constexpr size_t kAlign = 4096;
  static constexpr size_t kPieces = 4;
  using Buffer = std::unique_ptr<char, decltype(&std::free)>;
  struct Piece {
    Buffer buf;
    size_t fill;
  };

  static uint64_t RoundUp(uint64_t n) {
    return std::max<uint64_t>(1, (n + kAlign - 1) / kAlign) * kAlign;
  }

  Buffer NewBuffer() {
    Buffer b(static_cast<char*>(std::aligned_alloc(kAlign, piece_bytes_)), &std::free);
    if (b == nullptr) throw std::bad_alloc();
    ++buffers_;
    return b;
  }

  // Hands the current piece to the thread and, when `take_next`, takes an
  // empty one.
  Status Hand(bool take_next = true) {
    std::unique_lock lock(mu_);
    if (error_) return *error_;
    if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
    full_.push_back(Piece{std::move(current_), fill_});
    fill_ = 0;
    changed_.notify_all();
    if (!take_next) return Status::Ok();
    if (spare_.empty() && buffers_ < kPieces) {
      current_ = NewBuffer();
      return Status::Ok();
    }
    changed_.wait(lock, [&] { return !spare_.empty() || error_.has_value(); });
    if (error_) return *error_;
    current_ = std::move(spare_.back());
    spare_.pop_back();
    return Status::Ok();
  }

  void Run() {
    std::unique_lock lock(mu_);
    while (true) {
      changed_.wait(lock, [&] { return !full_.empty() || stop_; });
      if (full_.empty()) return;
      Piece p = std::move(full_.front());
      full_.pop_front();
      bool failed = error_.has_value();
      lock.unlock();
      Status s = failed ? Status::Ok() : Write({p.buf.get(), p.fill});
      lock.lock();
      if (!s.ok() && !error_) error_ = s;
      spare_.push_back(std::move(p.buf));
      changed_.notify_all();
    }
  }

  void Stop() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard lock(mu_);
      stop_ = true;
      changed_.notify_all();
    }
    thread_.join();
  }

  // Hashes and writes the next `piece` of the file.
  Status Write(std::string_view piece) {
    const size_t fill = piece.size();
    std::string_view rest = piece;
    hash_.Update(rest);
    // The last piece need not be a whole number of blocks.
    if (direct_ && fill % kAlign != 0) direct_ = !SetDirect(false);
    while (!rest.empty()) {
      ssize_t n = ::write(fd_, rest.data(), rest.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        // A file system that takes O_DIRECT at open may still refuse a
        // write (an alignment it wants bigger, a short write before): the
        // rest goes through the page cache.
        if (errno == EINVAL && direct_ && SetDirect(false)) {
          direct_ = false;
          continue;
        }
        return ErrnoStatus(errno, "cannot write " + path_);
      }
      rest.remove_prefix(static_cast<size_t>(n));
    }
    if (!direct_) {
      // Its writeback starts now, while the rest arrives: the fdatasync
      // at the end waits for the last pieces only. (Advice: where it is
      // refused, that fdatasync does it all.)
      ::sync_file_range(fd_, static_cast<off_t>(written_), static_cast<off_t>(fill),
                        SYNC_FILE_RANGE_WRITE);
    }
    written_ += fill;
    return Status::Ok();
  }

  // Turns O_DIRECT on or off; false where the file system refuses.
  bool SetDirect(bool on) {
    int flags = ::fcntl(fd_, F_GETFL);
    if (flags < 0) return false;
    return ::fcntl(fd_, F_SETFL, on ? flags | O_DIRECT : flags & ~O_DIRECT) == 0;
  }

  const int fd_;
  const std::string& path_;
  const size_t piece_bytes_;
  // The caller's side.
  size_t buffers_ = 0;
  Buffer current_{nullptr, &std::free};
  size_t fill_ = 0;
  // The writing side: the thread once started, else the caller.
  Sha256 hash_;
  uint64_t written_ = 0;
  bool direct_ = false;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<Piece> full_;       // guarded by mu_
  std::vector<Buffer> spare_;    // guarded by mu_
  std::optional<Status> error_;  // guarded by mu_
  bool stop_ = false;            // guarded by mu_
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
  PieceWriter out(fd.fd(), size, part);
  bool oversize = false;
  std::optional<Status> write_error;
  ChunkSink sink = [&](std::string_view chunk) -> Status {
    if (oversize || write_error) return Status(StatusCode::kAborted, "download already stopped");
    if (chunk.size() > size - a.bytes) {
      oversize = true;
      return InvalidArgument("more than the " + std::to_string(size) + " bytes expected");
    }
    if (Status s = out.Append(chunk); !s.ok()) {
      write_error = s;
      return s;
    }
    a.bytes += chunk.size();
    return Status::Ok();
  };
  Status got = source(sink);
  if (!write_error) {
    // Data must be on disk before the rename makes it an entry; a delayed
    // allocation failure shows up here or at close.
    if (Status s = out.Finish(); !s.ok()) {
      write_error = s;
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
  } else if (std::string digest = out.HexDigest(); digest != sha256) {
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
