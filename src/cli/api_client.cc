#include "cli/api_client.h"

#include "net/http_types.h"

namespace drover::cli {

std::string AddressOf(const net::ClientOptions& options) {
  return options.host + ":" + std::to_string(options.port);
}

ApiClient::ApiClient(net::ClientOptions options) : options_(options), http_(std::move(options)) {}

Result<std::string> ApiClient::Send(const std::string& method, const std::string& target,
                                    std::string body) {
  net::ClientRequest request;
  request.method = method;
  request.target = target;
  request.body = std::move(body);
  Result<net::Response> response = http_.Send(request);
  if (!response.ok()) {
    return response.status().WithContext("server " + AddressOf(options_));
  }
  RETURN_IF_ERROR(net::StatusFromResponse(*response));
  return std::move(response->body);
}

Result<nlohmann::json> ApiClient::Get(const std::string& target) {
  ASSIGN_OR_RETURN(std::string body, Send("GET", target, {}));
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Internal("the server's answer to " + target + " is not JSON");
  return j;
}

Result<nlohmann::json> ApiClient::Post(const std::string& target, std::string body) {
  ASSIGN_OR_RETURN(std::string answer, Send("POST", target, std::move(body)));
  nlohmann::json j = nlohmann::json::parse(answer, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Internal("the server's answer to " + target + " is not JSON");
  return j;
}

Result<std::string> ApiClient::GetText(const std::string& target) {
  return Send("GET", target, {});
}

}  // namespace drover::cli
