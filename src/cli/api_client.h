// ApiClient: the CLI's view of the REST API (/api/v1, src/server/README.md).
// Every call is one blocking HTTP request through net::HttpClient; answers
// come back as parsed JSON so the commands can print tables or pass the
// JSON through (--json).
//
// Several servers (options.alternates: a leader and its standbys): a call
// goes to the server that answered last, then to the others in order. A
// standby's 307 is followed to the leader it names (up to 3 hops, method
// and body kept). A server that cannot be reached, or a standby that knows
// no leader now (503), sends the call to the next; when every one failed,
// the round is repeated with backoff (100 ms doubling to 2 s) until
// options.timeout. A GET fails over on any kUnavailable; a write only when
// it never reached a server (connect or TLS handshake failed), so that a
// write is never sent twice. With one server nothing is retried.
//
// Thread safety: one thread at a time per instance; never on an EventLoop
// thread (HttpClient blocks).
#ifndef DROVER_CLI_API_CLIENT_H_
#define DROVER_CLI_API_CLIENT_H_

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "common/status.h"
#include "net/client_options.h"
#include "net/http_client.h"

namespace drover::cli {

class ApiClient {
 public:
  explicit ApiClient(net::ClientOptions options);

  // GET/POST `target` ("/api/v1/jobs") and parse the JSON answer. Errors:
  // the server's error (its code and message, with the field when there is
  // one), kUnavailable naming the address when the server cannot be
  // reached, kFailedPrecondition for a certificate that does not match the
  // pinned fingerprint, kInternal for an answer that is not JSON.
  Result<nlohmann::json> Get(const std::string& target);
  Result<nlohmann::json> Post(const std::string& target, std::string body = "{}");

  // GET returning the body as bytes (logs). Errors as Get.
  Result<std::string> GetText(const std::string& target);

  // host:port is the server that answered last.
  const net::ClientOptions& options() const { return options_; }

  // Where to open a WebSocket stream (events, log follow): the leader a
  // standby named in its last answer, else the server that answered last.
  net::ClientOptions StreamOptions() const;

 private:
  Result<std::string> Send(const std::string& method, const std::string& target,
                           std::string body);
  // One server, following redirects; on success it becomes the current one.
  Result<net::Response> SendTo(const net::HostPort& server, const net::ClientRequest& request);

  net::ClientOptions options_;
  std::string leader_;  // "host:port" a standby named; empty otherwise
};

// "HOST:PORT" of `options`, for messages.
std::string AddressOf(const net::ClientOptions& options);

}  // namespace drover::cli

#endif  // DROVER_CLI_API_CLIENT_H_
