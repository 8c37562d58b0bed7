// RedisUrl: where a RedisStore connects, parsed from
// `redis://[[user]:password@]host[:port][/db]` (DESIGN.md section 6).
//
// The port defaults to 6379 and the database to 0. An IPv6 host is written
// in brackets (`redis://[::1]:6379/0`). A password may be percent-encoded
// (`%40` for '@'); with a user name it authenticates as that ACL user
// (`AUTH user password`), without one as the default user (`AUTH password`).
// TLS (`rediss://`), unix sockets and query parameters are not supported and
// are refused with an error that says so.
//
// Thread safety: plain values and a pure function.
#ifndef DROVER_STORE_REDIS_URL_H_
#define DROVER_STORE_REDIS_URL_H_

#include <string>
#include <string_view>

#include "common/status.h"

namespace drover::store {

struct RedisUrl {
  std::string host;      // a name or an address; IPv6 without brackets
  int port = 6379;
  std::string user;      // empty: the default user
  std::string password;  // empty: no AUTH
  int db = 0;

  // The URL again, with the password replaced by "***" (for logs and
  // error messages).
  std::string Redacted() const;
  // "host:port", or "[v6]:port", for error messages.
  std::string Endpoint() const;
};

// Parses `url`; kInvalidArgument names the part that is wrong, e.g.
// `redis URL "redis://h:99999/0": port 99999 is not in 1..65535`.
Result<RedisUrl> ParseRedisUrl(std::string_view url);

}  // namespace drover::store

#endif  // DROVER_STORE_REDIS_URL_H_
