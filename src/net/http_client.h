// HttpClient: a blocking HTTP(S) client for the CLI. Each Send() opens a
// connection, checks the server's pinned certificate fingerprint (TLS), sends
// `Authorization: Bearer <token>`, reads the response and closes. One
// connection per request keeps it simple; CLI commands make few requests.
//
// Thread safety: a HttpClient may be used by one thread at a time; separate
// instances are independent. It runs its own private io_context, never an
// EventLoop, so do not call it from a loop callback (it would block the loop).
#ifndef DROVER_NET_HTTP_CLIENT_H_
#define DROVER_NET_HTTP_CLIENT_H_

#include <map>
#include <string>

#include "common/status.h"
#include "net/client_options.h"
#include "net/http_types.h"

namespace drover::net {

struct ClientRequest {
  std::string method = "GET";
  std::string target;  // "/api/v1/jobs?state=running", already encoded
  std::string body;
  std::string content_type = "application/json";
  std::map<std::string, std::string> headers;
};

class HttpClient {
 public:
  explicit HttpClient(ClientOptions options);

  // Any HTTP status is a successful transfer: check Response::status, or
  // use StatusFromResponse. Fails with kUnavailable if the server cannot be
  // reached or the connection drops, kDeadlineExceeded after
  // options.timeout, kFailedPrecondition when the certificate does not match
  // the pinned fingerprint (naming both) or TLS is on without a fingerprint,
  // kResourceExhausted for a response over max_response_bytes.
  Result<Response> Send(const ClientRequest& request);

  Result<Response> Get(const std::string& target);
  Result<Response> Post(const std::string& target, std::string body);

 private:
  ClientOptions options_;
};

}  // namespace drover::net

#endif  // DROVER_NET_HTTP_CLIENT_H_
