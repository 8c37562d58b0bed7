#include "worker/exec/output_capture.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/quantity.h"

namespace drover::worker {

Result<std::unique_ptr<OutputCapture>> OutputCapture::Create(const std::string& path,
                                                             uint64_t cap_bytes, mode_t mode) {
  UniqueFd file(open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode));
  if (!file.valid()) return Unavailable("cannot create " + path + ": " + strerror(errno));
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    return Unavailable(std::string("cannot create an output pipe: ") + strerror(errno));
  }
  fcntl(p[0], F_SETFL, O_NONBLOCK);
  return std::unique_ptr<OutputCapture>(
      new OutputCapture(UniqueFd(p[0]), UniqueFd(p[1]), std::move(file), cap_bytes));
}

Result<std::unique_ptr<OutputCapture>> OutputCapture::CreateDeferred(
    const std::string& path, uint64_t cap_bytes, mode_t mode,
    std::optional<std::pair<uid_t, gid_t>> owner) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    return Unavailable(std::string("cannot create an output pipe: ") + strerror(errno));
  }
  fcntl(p[0], F_SETFL, O_NONBLOCK);
  std::unique_ptr<OutputCapture> c(
      new OutputCapture(UniqueFd(p[0]), UniqueFd(p[1]), UniqueFd(), cap_bytes));
  c->path_ = path;
  c->mode_ = mode;
  c->owner_ = owner;
  return c;
}

Status OutputCapture::OpenFile() {
  if (file_fd_.valid()) return Status::Ok();
  if (!write_error_.empty()) return Unavailable(write_error_);
  UniqueFd fd(open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode_));
  if (!fd.valid()) {
    write_error_ = "cannot create " + path_ + ": " + strerror(errno);
    return Unavailable(write_error_);
  }
  if (owner_ && fchown(fd.fd(), owner_->first, owner_->second) != 0) {
    write_error_ = "cannot hand " + path_ + " to the task user: " + strerror(errno);
    fd.Reset();
    unlink(path_.c_str());
    return Unavailable(write_error_);
  }
  file_fd_ = std::move(fd);
  return Status::Ok();
}

bool OutputCapture::DrainBeforeFile() {
  // One byte tells end of stream (0) from empty (EAGAIN) from data; a
  // silent task costs this one read and no file.
  char first;
  for (;;) {
    ssize_t n = read(read_fd_.fd(), &first, 1);
    if (n == 0) {
      eof_ = true;
      return true;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;  // EAGAIN: nothing yet
    break;
  }
  seen_ = 1;
  if (!OpenFile().ok() || cap_ == 0) {
    // No file: discard like past the cap. A cap of 0 keeps only the marker.
    if (file_fd_.valid()) MarkTruncated();
    truncated_ = true;
    return false;
  }
  if (write(file_fd_.fd(), &first, 1) == 1) {
    written_ = 1;
  } else {
    write_error_ = strerror(errno);
    MarkTruncated();
  }
  return false;
}

void OutputCapture::CloseWriteEnd() { write_fd_.Reset(); }

void OutputCapture::MarkTruncated() {
  if (truncated_) return;
  truncated_ = true;
  if (!file_fd_.valid()) return;  // no file to mark (it could not be made)
  std::string line = "\n[drover: output truncated at " + FormatBytes(cap_) + "]\n";
  if (write(file_fd_.fd(), line.data(), line.size()) < 0 && write_error_.empty()) {
    write_error_ = strerror(errno);
  }
}

bool OutputCapture::Drain() {
  if (eof_) return true;
  if (!file_fd_.valid() && !truncated_) {
    if (DrainBeforeFile()) return true;
    if (!file_fd_.valid() && !truncated_) return false;
  }
  char discard[64 * 1024];
  for (;;) {
    if (!truncated_ && written_ < cap_) {
      size_t room = static_cast<size_t>(std::min<uint64_t>(cap_ - written_, 1 << 20));
      ssize_t n = splice(read_fd_.fd(), nullptr, file_fd_.fd(), nullptr, room, SPLICE_F_NONBLOCK);
      if (n > 0) {
        seen_ += n;
        written_ += n;
        continue;
      }
      if (n == 0) return eof_ = true;
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return false;
      // The file refused the bytes (disk full, quota): keep the task
      // running and discard from here on.
      write_error_ = strerror(errno);
      MarkTruncated();
      continue;
    }
    // Past the cap: the marker goes in only once there is a byte beyond it.
    ssize_t n = read(read_fd_.fd(), discard, sizeof discard);
    if (n > 0) {
      MarkTruncated();
      seen_ += n;
      continue;
    }
    if (n == 0) return eof_ = true;
    if (errno == EINTR) continue;
    return false;
  }
}

}  // namespace drover::worker
