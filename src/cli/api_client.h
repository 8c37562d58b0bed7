// ApiClient: the CLI's view of the REST API (/api/v1, src/server/README.md).
// Every call is one blocking HTTP request through net::HttpClient; answers
// come back as parsed JSON so the commands can print tables or pass the
// JSON through (--json).
//
// Thread safety: one thread at a time per instance; never on an EventLoop
// thread (HttpClient blocks).
#ifndef DROVER_CLI_API_CLIENT_H_
#define DROVER_CLI_API_CLIENT_H_

#include <string>

#include <nlohmann/json.hpp>

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

  const net::ClientOptions& options() const { return options_; }

 private:
  Result<std::string> Send(const std::string& method, const std::string& target,
                           std::string body);

  net::ClientOptions options_;
  net::HttpClient http_;
};

// "HOST:PORT" of `options`, for messages.
std::string AddressOf(const net::ClientOptions& options);

}  // namespace drover::cli

#endif  // DROVER_CLI_API_CLIENT_H_
