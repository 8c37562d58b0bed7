#include "net/local_socket.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace drover::net {
namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

// Fills `addr` for `path`; false when the path does not fit.
bool MakeAddress(const std::string& path, sockaddr_un* addr) {
  if (path.empty() || path.size() > MaxLocalSocketPath()) return false;
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  std::memcpy(addr->sun_path, path.data(), path.size());
  return true;
}

}  // namespace

size_t MaxLocalSocketPath() { return sizeof(sockaddr_un::sun_path) - 1; }

bool LocalSocketAccepts(const std::string& path) {
  sockaddr_un addr;
  if (!MakeAddress(path, &addr)) return false;
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool accepted = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return accepted;
}

Result<LocalSocketListener> LocalSocketListener::Claim(const std::string& path) {
  sockaddr_un addr;
  if (!MakeAddress(path, &addr)) {
    return InvalidArgument("local socket path " + path + " is " + std::to_string(path.size()) +
                           " bytes long; a Unix socket path may have at most " +
                           std::to_string(MaxLocalSocketPath()));
  }
  if (LocalSocketAccepts(path)) {
    return FailedPrecondition("another server is answering on " + path +
                              ": it runs on the same state directory; stop it first, or give "
                              "this one another --state-dir");
  }
  LocalSocketListener l;
  l.path_ = path;
  const std::string lock_path = path + ".lock";
  l.lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (l.lock_fd_ < 0) {
    return Unavailable("cannot open " + lock_path + ": " + ErrnoText(errno));
  }
  if (::flock(l.lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      return FailedPrecondition("another server holds " + lock_path +
                                ": it is starting on the same state directory; stop it first, or "
                                "give this one another --state-dir");
    }
    return Unavailable("cannot lock " + lock_path + ": " + ErrnoText(err));
  }
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return FailedPrecondition(path + " exists and is not a socket; remove it or give the "
                                       "server another --state-dir");
    }
    // Nothing answers there (checked above) and no live server holds the
    // lock: the socket of a server that died.
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return Unavailable("cannot remove the stale socket " + path + ": " + ErrnoText(errno));
    }
  }
  l.fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (l.fd_ < 0) return Unavailable("cannot make a Unix socket for " + path + ": " + ErrnoText(errno));
  if (::bind(l.fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Unavailable("cannot bind " + path + ": " + ErrnoText(errno));
  }
  if (::lstat(path.c_str(), &st) != 0) {
    const int err = errno;
    ::unlink(path.c_str());
    return Unavailable("cannot stat " + path + ": " + ErrnoText(err));
  }
  l.dev_ = st.st_dev;
  l.ino_ = st.st_ino;
  l.removed_ = false;  // from here on, ours to remove
  // The mode bind gave follows the umask; the directory is private anyway,
  // and the socket is made owner-only before it listens.
  if (::chmod(path.c_str(), 0600) != 0) {
    return Unavailable("cannot make " + path + " owner-only: " + ErrnoText(errno));
  }
  if (::listen(l.fd_, SOMAXCONN) != 0) {
    return Unavailable("cannot listen on " + path + ": " + ErrnoText(errno));
  }
  return l;
}

LocalSocketListener::LocalSocketListener(LocalSocketListener&& other) noexcept {
  *this = std::move(other);
}

LocalSocketListener& LocalSocketListener::operator=(LocalSocketListener&& other) noexcept {
  if (this == &other) return *this;
  Reset();
  path_ = std::move(other.path_);
  fd_ = std::exchange(other.fd_, -1);
  lock_fd_ = std::exchange(other.lock_fd_, -1);
  dev_ = other.dev_;
  ino_ = other.ino_;
  removed_ = std::exchange(other.removed_, true);
  return *this;
}

LocalSocketListener::~LocalSocketListener() { Reset(); }

void LocalSocketListener::Reset() {
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  Remove();
  // Closing the descriptor drops the lock.
  if (lock_fd_ >= 0) ::close(std::exchange(lock_fd_, -1));
}

int LocalSocketListener::ReleaseFd() { return std::exchange(fd_, -1); }

void LocalSocketListener::Remove() {
  if (removed_) return;
  removed_ = true;
  struct stat st;
  if (::lstat(path_.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_) {
    ::unlink(path_.c_str());
  }
}

}  // namespace drover::net
