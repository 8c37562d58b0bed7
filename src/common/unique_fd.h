// UniqueFd: the one owner of a file descriptor. It closes the descriptor
// when it is destroyed, reset or assigned another, so that an early return
// or a moved-from owner can neither leak one nor close it twice. Move-only;
// -1 is "none".
//
// A descriptor watched by a reactor (epoll) must be unwatched before its
// owner closes it: the owner does not know about watches.
//
// Thread safety: as for an int; one owner, one thread at a time.
#ifndef DROVER_COMMON_UNIQUE_FD_H_
#define DROVER_COMMON_UNIQUE_FD_H_

#include <unistd.h>

#include <utility>

namespace drover {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.Release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) Reset(other.Release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { Reset(); }

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

  // Gives the descriptor up without closing it.
  int Release() { return std::exchange(fd_, -1); }
  // Closes the descriptor held (if any) and holds `fd` instead. close(2) is
  // not retried on EINTR: on Linux the descriptor is gone either way.
  void Reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace drover

#endif  // DROVER_COMMON_UNIQUE_FD_H_
