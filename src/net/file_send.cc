// FileSend (file_send.h): a file response's body read from disk in pieces.

#include "net/file_send.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace drover::net::internal {

FileSend::~FileSend() {
  if (fd_ >= 0) ::close(fd_);
}

std::string FileSend::Open(const std::string& path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  std::string why = fd_ < 0 ? std::strerror(errno) : "";
  struct stat info {};
  if (why.empty() && (::fstat(fd_, &info) != 0 || !S_ISREG(info.st_mode))) {
    why = "not a regular file";
  }
  if (!why.empty()) return why;
  size_ = static_cast<uint64_t>(info.st_size);
  buffer_.resize(static_cast<size_t>(std::min<uint64_t>(size_, 1 << 20)) + 1);
  return "";
}

bool FileSend::ReadNext(std::string_view* piece, std::string* why) {
  const size_t want = static_cast<size_t>(std::min<uint64_t>(buffer_.size() - 1, size_ - sent_));
  const ssize_t n = ::pread(fd_, buffer_.data(), want, static_cast<off_t>(sent_));
  if (n <= 0) {
    *why = n < 0 ? std::strerror(errno) : "it got shorter";
    return false;
  }
  *piece = std::string_view(buffer_.data(), static_cast<size_t>(n));
  return true;
}

}  // namespace drover::net::internal
