#include "net/access_file.h"

#include <charconv>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "net/private_file.h"
#include "net/tls_identity.h"

namespace drover::net {

Status WriteAccessFile(const std::string& path, const AccessInfo& info) {
  nlohmann::json j = {{"address", info.address},
                      {"token", info.token},
                      {"fingerprint", info.fingerprint},
                      {"tls", info.tls}};
  if (!info.socket.empty()) j["socket"] = info.socket;
  return WritePrivateFile(path, j.dump(2) + "\n");
}

Result<AccessInfo> ReadAccessFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument(path + ": not valid JSON");
  if (!j.is_object()) return InvalidArgument(path + ": expected a JSON object");
  auto get_string = [&](const char* key, std::string* out) -> Status {
    auto it = j.find(key);
    if (it == j.end()) return InvalidArgument(path + ": missing field \"" + key + "\"");
    if (!it->is_string()) return InvalidArgument(path + ": field \"" + key + "\" must be a string");
    *out = it->get<std::string>();
    return Status::Ok();
  };
  AccessInfo info;
  RETURN_IF_ERROR(get_string("address", &info.address));
  RETURN_IF_ERROR(get_string("token", &info.token));
  RETURN_IF_ERROR(get_string("fingerprint", &info.fingerprint));
  auto tls = j.find("tls");
  if (tls == j.end()) return InvalidArgument(path + ": missing field \"tls\"");
  if (!tls->is_boolean()) return InvalidArgument(path + ": field \"tls\" must be true or false");
  info.tls = tls->get<bool>();
  if (j.contains("socket")) {
    RETURN_IF_ERROR(get_string("socket", &info.socket));
    if (!info.socket.starts_with('/')) {
      return InvalidArgument(path + ": field \"socket\" must be an absolute path, not \"" +
                             info.socket + "\"");
    }
  }
  if (info.token.empty()) return InvalidArgument(path + ": field \"token\" is empty");
  if (Result<std::vector<HostPort>> hp = SplitServerList(info.address); !hp.ok()) {
    return hp.status().WithContext(path + ": field \"address\"");
  }
  if (info.tls) {
    Result<std::string> fp = NormalizeFingerprint(info.fingerprint);
    if (!fp.ok()) return fp.status().WithContext(path + ": field \"fingerprint\"");
    info.fingerprint = *fp;
  }
  return info;
}

Result<std::string> DefaultAccessFilePath() {
  const char* xdg = std::getenv("XDG_STATE_HOME");
  if (xdg != nullptr && *xdg != '\0') return std::string(xdg) + "/drover/access.json";
  const char* home = std::getenv("HOME");
  if (home != nullptr && *home != '\0') return std::string(home) + "/.local/state/drover/access.json";
  return FailedPrecondition(
      "cannot find the access file: neither XDG_STATE_HOME nor HOME is set; pass --access or "
      "set DROVER_ACCESS");
}

Result<std::string> ResolveAccessFilePath(const std::string& explicit_path) {
  if (!explicit_path.empty()) return explicit_path;
  const char* env = std::getenv("DROVER_ACCESS");
  if (env != nullptr && *env != '\0') return std::string(env);
  return DefaultAccessFilePath();
}

Result<HostPort> SplitHostPort(const std::string& address) {
  HostPort hp;
  std::string port_text;
  if (!address.empty() && address.front() == '[') {
    size_t close = address.find(']');
    if (close == std::string::npos || close + 1 >= address.size() || address[close + 1] != ':') {
      return InvalidArgument("address \"" + address + "\" must look like [::1]:7210");
    }
    hp.host = address.substr(1, close - 1);
    port_text = address.substr(close + 2);
  } else {
    size_t colon = address.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return InvalidArgument("address \"" + address + "\" must look like host:port");
    }
    hp.host = address.substr(0, colon);
    port_text = address.substr(colon + 1);
  }
  unsigned value = 0;
  auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
  if (ec != std::errc() || ptr != port_text.data() + port_text.size() || value == 0 ||
      value > 65535) {
    return InvalidArgument("address \"" + address + "\" has an invalid port \"" + port_text + "\"");
  }
  hp.port = static_cast<uint16_t>(value);
  return hp;
}

Result<std::vector<HostPort>> SplitServerList(const std::string& list) {
  std::vector<HostPort> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    std::string entry = list.substr(start, comma - start);
    const size_t first = entry.find_first_not_of(' ');
    const size_t last = entry.find_last_not_of(' ');
    entry = first == std::string::npos ? "" : entry.substr(first, last - first + 1);
    if (entry.empty()) {
      return InvalidArgument("server list \"" + list + "\" has an empty entry");
    }
    ASSIGN_OR_RETURN(HostPort hp, SplitHostPort(entry));
    out.push_back(std::move(hp));
    start = comma + 1;
  }
  return out;
}

}  // namespace drover::net
