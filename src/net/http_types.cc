#include "net/http_types.h"

#include <cctype>
#include <nlohmann/json.hpp>

#include "net/json_text.h"

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

// The length of the valid UTF-8 sequence at the start of `text` (1 to 4),
// or 0 when it does not start with one (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF).
size_t Utf8SequenceLength(std::string_view text) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    n = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    n = 3;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    n = 4;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (text.size() < n || byte(1) < lo || byte(1) > hi) return 0;
  for (size_t i = 2; i < n; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return n;
}

bool IsControl(unsigned char c) { return c < 0x20 || c == 0x7F; }

}  // namespace

std::string Printable(std::string_view bytes, size_t max_bytes) {
  const bool cut = bytes.size() > max_bytes;
  if (cut) bytes = bytes.substr(0, max_bytes);
  std::string out;
  out.reserve(bytes.size());
  static constexpr char kHex[] = "0123456789abcdef";
  size_t i = 0;
  while (i < bytes.size()) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    const size_t n = Utf8SequenceLength(bytes.substr(i));
    if (n == 0 || (n == 1 && IsControl(c))) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
      ++i;
    } else if (c == '\\') {
      out += "\\\\";
      ++i;
    } else {
      out.append(bytes.substr(i, n));
      i += n;
    }
  }
  if (cut) out += "...";
  return out;
}

bool IsCleanText(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const size_t n = Utf8SequenceLength(text.substr(i));
    if (n == 0 || (n == 1 && IsControl(static_cast<unsigned char>(text[i])))) return false;
    i += n;
  }
  return true;
}

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
  r.body = JsonText(j);
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

std::string PercentEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += ch;
    } else {
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
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
