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

#include <functional>
#include <map>
#include <string>
#include <string_view>

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

  // Sends `request` as Send() does (same connection, TLS pinning and token)
  // and streams the body of a 2xx answer to `sink`, chunk by chunk (at most
  // 256 KiB each, in order), never holding the whole body in memory and with
  // no max_response_bytes limit. options.timeout applies to each step (the
  // connection, the handshake, the request, each read), not to the whole
  // transfer: only a server that makes no progress for that long fails it,
  // with kDeadlineExceeded. If `sink` returns an error the transfer stops
  // and that error is returned. The Response carries status and headers;
  // its body is empty. A non-2xx answer does not reach `sink`: its body (up
  // to 64 KiB, the rest left unread) is returned in Response::body, so
  // StatusFromResponse works on it. Other failures as for Send(). A body cut
  // short by the server (fewer bytes than its Content-Length) is
  // kUnavailable, after `sink` has seen what arrived.
  Result<Response> Download(const ClientRequest& request,
                            const std::function<Status(std::string_view chunk)>& sink);

  // Sends `request` (its method and target, headers and content type; its
  // body is ignored) with the regular file at `path` as the body, streamed
  // from disk in 1 MiB pieces with Content-Length its size (taken when the
  // upload starts), never held in memory whole. options.timeout applies to
  // each step, as for Download. Returns the answer as Send() does (check
  // Response::status); an answer the server gives before the whole body
  // went through (413, 507: it closes then) is returned too. Fails with
  // kUnavailable when `path` cannot be opened or shrinks meanwhile,
  // kInvalidArgument when it is not a regular file, else as Send().
  Result<Response> Upload(const ClientRequest& request, const std::string& path);

  Result<Response> Get(const std::string& target);
  Result<Response> Post(const std::string& target, std::string body);

 private:
  ClientOptions options_;
};

}  // namespace drover::net

#endif  // DROVER_NET_HTTP_CLIENT_H_
