#include "net/http_types.h"

#include <nlohmann/json.hpp>

namespace drover::net {
namespace {

StatusCode CodeFromName(std::string_view name) {
  for (int i = 1; i <= static_cast<int>(StatusCode::kInternal); ++i) {
    auto code = static_cast<StatusCode>(i);
    if (StatusCodeName(code) == name) return code;
  }
  return StatusCode::kInternal;
}

StatusCode CodeFromHttp(int http_status) {
  switch (http_status) {
    case 400: return StatusCode::kInvalidArgument;
    case 401: return StatusCode::kUnauthenticated;
    case 403: return StatusCode::kPermissionDenied;
    case 404: return StatusCode::kNotFound;
    case 409: return StatusCode::kAlreadyExists;
    case 412: return StatusCode::kFailedPrecondition;
    case 413:
    case 429: return StatusCode::kResourceExhausted;
    case 502:
    case 503: return StatusCode::kUnavailable;
    case 504: return StatusCode::kDeadlineExceeded;
    default: return StatusCode::kInternal;
  }
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return 200;
    case StatusCode::kInvalidArgument: return 400;
    case StatusCode::kUnauthenticated: return 401;
    case StatusCode::kPermissionDenied: return 403;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kAlreadyExists:
    case StatusCode::kAborted: return 409;
    case StatusCode::kFailedPrecondition: return 412;
    case StatusCode::kResourceExhausted: return 429;
    case StatusCode::kUnavailable: return 503;
    case StatusCode::kDeadlineExceeded: return 504;
    case StatusCode::kDataLoss:
    case StatusCode::kInternal: return 500;
  }
  return 500;
}

Response ErrorResponse(int http_status, StatusCode code, std::string message) {
  nlohmann::json j = {{"error", {{"code", StatusCodeName(code)}, {"message", std::move(message)}}}};
  Response r;
  r.status = http_status;
  r.body = j.dump();
  return r;
}

Response ErrorResponse(const Status& status) {
  return ErrorResponse(HttpStatusFor(status.code()), status.code(), status.message());
}

Response JsonResponse(std::string json_body, int http_status) {
  Response r;
  r.status = http_status;
  r.body = std::move(json_body);
  return r;
}

Response TextResponse(std::string body, int http_status) {
  Response r;
  r.status = http_status;
  r.content_type = "text/plain; charset=utf-8";
  r.body = std::move(body);
  return r;
}

Status StatusFromResponse(const Response& response) {
  if (response.status >= 200 && response.status < 300) return Status::Ok();
  nlohmann::json j = nlohmann::json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    const auto& e = j["error"];
    if (e.contains("code") && e["code"].is_string() && e.contains("message") &&
        e["message"].is_string()) {
      return Status(CodeFromName(e["code"].get<std::string>()), e["message"].get<std::string>());
    }
  }
  std::string msg = "HTTP " + std::to_string(response.status);
  if (!response.body.empty()) msg += ": " + response.body.substr(0, 200);
  return Status(CodeFromHttp(response.status), msg);
}

std::string PercentDecode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '%' && i + 2 < text.size()) {
      int hi = HexValue(text[i + 1]);
      int lo = HexValue(text[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        continue;
      }
    }
    out += (plus_is_space && c == '+') ? ' ' : c;
  }
  return out;
}

std::map<std::string, std::string> ParseQuery(std::string_view query) {
  std::map<std::string, std::string> out;
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view part = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (part.empty()) continue;
    size_t eq = part.find('=');
    std::string key = PercentDecode(part.substr(0, eq), true);
    std::string value = eq == std::string_view::npos ? "" : PercentDecode(part.substr(eq + 1), true);
    out.emplace(std::move(key), std::move(value));
  }
  return out;
}

}  // namespace drover::net
