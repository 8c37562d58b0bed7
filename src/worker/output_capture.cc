#include "worker/output_capture.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/quantity.h"

namespace drover::worker {

Result<std::unique_ptr<OutputCapture>> OutputCapture::Create(const std::string& path,
                                                             uint64_t cap_bytes, mode_t mode) {
  int file = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (file < 0) return Unavailable("cannot create " + path + ": " + strerror(errno));
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    int err = errno;
    close(file);
    return Unavailable(std::string("cannot create an output pipe: ") + strerror(err));
  }
  fcntl(p[0], F_SETFL, O_NONBLOCK);
  return std::unique_ptr<OutputCapture>(new OutputCapture(p[0], p[1], file, cap_bytes));
}

OutputCapture::~OutputCapture() {
  CloseWriteEnd();
  close(read_fd_);
  close(file_fd_);
}

void OutputCapture::CloseWriteEnd() {
  if (write_fd_ >= 0) close(write_fd_);
  write_fd_ = -1;
}

void OutputCapture::MarkTruncated() {
  if (truncated_) return;
  truncated_ = true;
  std::string line = "\n[drover: output truncated at " + FormatBytes(cap_) + "]\n";
  if (write(file_fd_, line.data(), line.size()) < 0 && write_error_.empty()) {
    write_error_ = strerror(errno);
  }
}

bool OutputCapture::Drain() {
  char discard[64 * 1024];
  for (;;) {
    if (!truncated_ && written_ < cap_) {
      size_t room = static_cast<size_t>(std::min<uint64_t>(cap_ - written_, 1 << 20));
      ssize_t n = splice(read_fd_, nullptr, file_fd_, nullptr, room, SPLICE_F_NONBLOCK);
      if (n > 0) {
        seen_ += n;
        written_ += n;
        continue;
      }
      if (n == 0) return true;
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return false;
      // The file refused the bytes (disk full, quota): keep the task
      // running and discard from here on.
      write_error_ = strerror(errno);
      MarkTruncated();
      continue;
    }
    // Past the cap: the marker goes in only once there is a byte beyond it.
    ssize_t n = read(read_fd_, discard, sizeof discard);
    if (n > 0) {
      MarkTruncated();
      seen_ += n;
      continue;
    }
    if (n == 0) return true;
    if (errno == EINTR) continue;
    return false;
  }
}

}  // namespace drover::worker
