// Plain request and response values shared by the HTTP server, its handlers
// and the blocking client. No Boost types appear here so that the server
// shell, the CLI and tests can use them without compiling Beast.
//
// Thread safety: plain values.
#ifndef DROVER_NET_HTTP_TYPES_H_
#define DROVER_NET_HTTP_TYPES_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "net/identity.h"

namespace drover::net {

// An incoming request as a handler sees it.
struct Request {
  std::string method;  // "GET", "POST", ... (upper case)
  std::string target;  // as sent: "/api/v1/jobs?state=running"
  std::string path;    // decoded path without the query: "/api/v1/jobs"
  std::map<std::string, std::string> path_params;  // {"id": "12"} for "/jobs/{id}"
  std::map<std::string, std::string> query;        // decoded query parameters
  std::map<std::string, std::string> headers;      // names in lower case
  std::string body;
  std::string remote;  // peer "ip:port", for logs
  // Server only: who sent it (ServerOptions::authenticate); null for a
  // request to a public path without a token.
  std::shared_ptr<const Identity> identity;
};

// An outgoing (server) or received (client) response.
struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::map<std::string, std::string> headers;  // extra headers; names as given
  // Server only. When non-empty, the server sends the contents of this
  // regular file as the body, streamed from disk (never read into memory
  // whole), with Content-Length its size; `body` is then ignored. If the
  // file cannot be opened, or is not a regular file, the client gets
  // ErrorResponse(404, kNotFound, ...) instead (the path is logged, not
  // sent). The handler's content_type and headers go with the file.
  std::string file_path;
};

// Answers one request. A handler may call it at once or later (after an
// asynchronous store write, say); it must be called at most once. It is safe
// to call from any thread. If every copy is dropped without a call, the
// server answers 500 so the client is not left waiting.
using Responder = std::function<void(Response)>;
using Handler = std::function<void(const Request&, Responder)>;

// {"error":{"code":"<StatusCodeName>","message":"..."}} with the matching
// HTTP status (HttpStatusFor).
Response ErrorResponse(const Status& status);
Response ErrorResponse(int http_status, StatusCode code, std::string message);

// A 200 response with a JSON body already serialised by the caller.
Response JsonResponse(std::string json_body, int http_status = 200);
// A 200 response with a plain-text body ("text/plain; charset=utf-8").
Response TextResponse(std::string body, int http_status = 200);

// invalid_argument 400, unauthenticated 401, permission_denied 403,
// not_found 404, already_exists / aborted 409, failed_precondition 412,
// resource_exhausted 429, unavailable 503, deadline_exceeded 504, else 500.
int HttpStatusFor(StatusCode code);

// For clients: OK for a 2xx response; otherwise the Status carried in an
// error body, or one made from the HTTP status when the body is not ours.
Status StatusFromResponse(const Response& response);

// `bytes` made safe to show in a log line or in an error message: printable
// ASCII and valid UTF-8 stay as they are; control characters, DEL and bytes
// that are not UTF-8 become "\xNN", a backslash "\\". At most `max_bytes`
// of the input are shown, then "...". For anything a peer sent.
std::string Printable(std::string_view bytes, size_t max_bytes = 200);

// True when `text` is valid UTF-8 without control characters (below 0x20,
// and DEL): what a decoded path or query parameter may hold.
bool IsCleanText(std::string_view text);

// Percent-decoding ("%20" and '+' in queries) and query splitting.
std::string PercentDecode(std::string_view text, bool plus_is_space);
// `text` as a path segment or query value: every byte but A-Z a-z 0-9 - . _ ~
// as %XX.
std::string PercentEncode(std::string_view text);
std::map<std::string, std::string> ParseQuery(std::string_view query);

}  // namespace drover::net

#endif  // DROVER_NET_HTTP_TYPES_H_
