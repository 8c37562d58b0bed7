// The access file: how a local client finds and authenticates to a server
// without flags. The server writes it into its state directory; clients on
// the same machine read it.
//
//   {"address": "127.0.0.1:7210", "token": "<64 hex>",
//    (or "address": "10.0.0.5:7210,10.0.0.6:7210": several servers of one
//    cluster, a leader and its standbys, tried in order — docs/redis.md)
//    "fingerprint": "<64 hex, empty when tls is false>", "tls": true,
//    "socket": "/home/me/.local/state/drover/server/api.sock"}
//
// "socket" (optional; files written before it existed lack it) is the
// server's local Unix-domain socket (local_socket.h), which a client on the
// same machine may use instead of TCP + TLS (cli::ResolveConnection says
// when).
//
// Where a client looks (first hit wins): an explicit path (--access), then
// $DROVER_ACCESS, then the default path: $XDG_STATE_HOME/drover/access.json,
// or ~/.local/state/drover/access.json when XDG_STATE_HOME is unset.
//
// Thread safety: plain functions; safe from any thread (ResolveAccessFilePath
// reads the environment, so do not call it while another thread setenv()s).
#ifndef DROVER_NET_ACCESS_FILE_H_
#define DROVER_NET_ACCESS_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace drover::net {

struct AccessInfo {
  std::string address;      // "host:port"
  std::string token;        // cluster token
  std::string fingerprint;  // server certificate SHA-256, lower-case hex
  bool tls = true;
  std::string socket;  // the server's local socket; empty when none

  friend bool operator==(const AccessInfo&, const AccessInfo&) = default;
};

// Writes `info` as JSON to `path` with mode 0600 (atomically, creating
// parent directories). Errors as WritePrivateFile.
Status WriteAccessFile(const std::string& path, const AccessInfo& info);

// Reads and validates an access file. Fails with kNotFound if it is missing,
// kInvalidArgument if it is not JSON, lacks a field, has a field of the
// wrong type, or has tls=true without a valid fingerprint. A missing
// "socket" is an empty one; a present one must be an absolute path. Every message
// starts with the file's path.
Result<AccessInfo> ReadAccessFile(const std::string& path);

// The default path described above. Fails with kFailedPrecondition if
// neither XDG_STATE_HOME nor HOME is set.
Result<std::string> DefaultAccessFilePath();

// `explicit_path` if non-empty, else $DROVER_ACCESS if set and non-empty,
// else DefaultAccessFilePath().
Result<std::string> ResolveAccessFilePath(const std::string& explicit_path);

// Splits "host:port" (also "[::1]:port"). Fails with kInvalidArgument.
struct HostPort {
  std::string host;
  uint16_t port = 0;
};
Result<HostPort> SplitHostPort(const std::string& address);

// Splits a comma-separated list of "host:port" (one at least; spaces around
// entries ignored). Fails with kInvalidArgument naming the bad entry.
Result<std::vector<HostPort>> SplitServerList(const std::string& list);

}  // namespace drover::net

#endif  // DROVER_NET_ACCESS_FILE_H_
