// The server's local socket: a Unix-domain socket in the server's private
// state directory (`<state dir>/api.sock`) that clients on the same machine
// reach without TCP and TLS. It carries the same HTTP + WebSocket API as the
// TCP port, and every request still needs the cluster token: the socket
// removes TLS, not authentication. Its protection is the file system: the
// socket is made mode 0600 in a directory that is 0700, both the server
// user's.
//
// This file is plain POSIX (no Asio): LocalSocketListener claims the path and
// listens; net::Server adopts it (Server::ServeLocalSocket) and accepts on it.
//
// Thread safety: plain values and functions; a LocalSocketListener belongs
// to one thread at a time.
#ifndef DROVER_NET_LOCAL_SOCKET_H_
#define DROVER_NET_LOCAL_SOCKET_H_

#include <sys/types.h>

#include <cstddef>
#include <string>

#include "common/status.h"

namespace drover::net {

// The file name of the local socket in a server's state directory.
inline constexpr char kLocalSocketName[] = "api.sock";

// The longest socket path the OS takes (sun_path less its terminating NUL).
size_t MaxLocalSocketPath();

class LocalSocketListener {
 public:
  // Claims `path` and listens on it (mode 0600). In order:
  //   1. a server that accepts a connection on `path` is never disturbed:
  //      kFailedPrecondition "another server is answering on PATH ...";
  //   2. `PATH.lock` is locked (flock, held as long as this object) so two
  //      servers starting at once cannot both claim the path; a lock held
  //      by another process is kFailedPrecondition naming it;
  //   3. a socket left at `path` by a server that died is removed; any
  //      other kind of file there is kFailedPrecondition (never removed);
  //   4. bind, chmod 0600, listen.
  // A path longer than MaxLocalSocketPath() is kInvalidArgument naming it
  // and the limit; OS errors are kUnavailable naming the path and the call.
  static Result<LocalSocketListener> Claim(const std::string& path);

  LocalSocketListener(LocalSocketListener&& other) noexcept;
  LocalSocketListener& operator=(LocalSocketListener&& other) noexcept;
  LocalSocketListener(const LocalSocketListener&) = delete;
  LocalSocketListener& operator=(const LocalSocketListener&) = delete;
  // Closes the socket if still held, removes the path (Remove) and drops
  // the lock.
  ~LocalSocketListener();

  const std::string& path() const { return path_; }

  // The listening descriptor (close-on-exec, non-blocking), or -1 once
  // released.
  int fd() const { return fd_; }

  // Hands the listening descriptor to the caller, who closes it from then
  // on. The path and the lock stay with this object.
  int ReleaseFd();

  // Removes the socket file if it is still the one this object made (same
  // device and inode; a later server's socket is left alone). Idempotent.
  void Remove();

 private:
  LocalSocketListener() = default;
  void Reset();

  std::string path_;
  int fd_ = -1;
  int lock_fd_ = -1;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  bool removed_ = true;
};

// True when something accepts a connection on the socket at `path` now;
// false when the path is missing, too long, not a socket, or refused. The
// connection is closed at once. Costs one connect (tens of microseconds).
bool LocalSocketAccepts(const std::string& path);

}  // namespace drover::net

#endif  // DROVER_NET_LOCAL_SOCKET_H_
