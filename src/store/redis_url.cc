#include "store/redis_url.h"

#include <charconv>
#include <optional>

namespace drover::store {
namespace {

constexpr std::string_view kScheme = "redis://";

// Parses a whole decimal number in [min, max]; nullopt otherwise.
std::optional<int> ParseInt(std::string_view s, int min, int max) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  int value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size() || value < min || value > max) {
    return std::nullopt;
  }
  return value;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::string> PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;
    int hi = HexValue(s[i + 1]);
    int lo = HexValue(s[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

}  // namespace

std::string RedisUrl::Endpoint() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return h + ":" + std::to_string(port);
}

std::string RedisUrl::Redacted() const {
  std::string auth;
  if (!user.empty() || !password.empty()) {
    auth = user + (password.empty() ? "" : ":***") + "@";
  }
  return std::string(kScheme) + auth + Endpoint() + "/" + std::to_string(db);
}

Result<RedisUrl> ParseRedisUrl(std::string_view url) {
  auto fail = [url](const std::string& why) -> Status {
    return InvalidArgument("redis URL \"" + std::string(url) + "\": " + why);
  };
  if (url.starts_with("rediss://")) {
    return fail("TLS (rediss://) is not supported; use redis:// on a trusted network");
  }
  if (url.starts_with("unix:") || url.starts_with("redis+unix:")) {
    return fail("unix sockets are not supported; use redis://host:port/db");
  }
  if (!url.starts_with(kScheme)) {
    return fail("must start with redis:// (redis://[:password@]host:port/db)");
  }
  std::string_view rest = url.substr(kScheme.size());
  if (rest.find_first_of("?#") != std::string_view::npos) {
    return fail("query parameters and fragments are not supported");
  }

  RedisUrl out;
  // Split the path (the database number) off first: a password may hold '/'
  // only percent-encoded, so the first '/' after the '@' ends the authority.
  const size_t at = rest.rfind('@');
  const size_t slash = rest.find('/', at == std::string_view::npos ? 0 : at);
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    std::string_view path = rest.substr(slash + 1);
    if (!path.empty()) {
      auto db = ParseInt(path, 0, 1 << 20);
      if (!db) return fail("database \"" + std::string(path) + "\" is not a number >= 0");
      out.db = *db;
    }
  }

  if (at != std::string_view::npos) {
    std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    const size_t colon = userinfo.find(':');
    if (colon == std::string_view::npos) {
      return fail("credentials must be \":password@\" or \"user:password@\"");
    }
    auto user = PercentDecode(userinfo.substr(0, colon));
    auto password = PercentDecode(userinfo.substr(colon + 1));
    if (!user || !password) return fail("bad percent-encoding in the credentials");
    if (password->empty()) return fail("empty password after ':'");
    out.user = std::move(*user);
    out.password = std::move(*password);
  }

  std::string_view port_text;
  if (authority.starts_with("[")) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return fail("unclosed '[' in the host");
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return fail("expected ':port' after the bracketed host");
      port_text = after.substr(1);
      if (port_text.empty()) return fail("empty port after ':'");
    }
  } else {
    const size_t colon = authority.find(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) return fail("empty port after ':'");
    }
  }
  if (out.host.empty()) return fail("no host");
  if (!port_text.empty()) {
    auto port = ParseInt(port_text, 1, 65535);
    if (!port) return fail("port \"" + std::string(port_text) + "\" is not in 1..65535");
    out.port = *port;
  }
  return out;
}

}  // namespace drover::store
