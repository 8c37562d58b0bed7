#include "worker/resources/resources_labels.h"

#include <cctype>
#include <charconv>
#include <utility>

#include "worker/resources/resources_host.h"

namespace drover::worker {
namespace {

constexpr size_t kMaxKey = 63;
constexpr size_t kMaxValue = 255;

std::string Quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

Status CheckKey(std::string_view what, std::string_view item, std::string_view key) {
  if (key.empty()) return InvalidArgument(std::string(what) + " " + Quoted(item) + ": empty name");
  if (key.size() > kMaxKey) {
    return InvalidArgument(std::string(what) + " " + Quoted(item) + ": name longer than " +
                           std::to_string(kMaxKey) + " characters");
  }
  if (!std::isalnum(static_cast<unsigned char>(key.front()))) {
    return InvalidArgument(std::string(what) + " " + Quoted(item) +
                           ": name must start with a letter or digit");
  }
  for (char c : key) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.' &&
        c != '/') {
      return InvalidArgument(std::string(what) + " " + Quoted(item) + ": character '" +
                             std::string(1, c) + "' not allowed in a name (letters, digits, _-./)");
    }
  }
  return Status::Ok();
}

// Splits "key=value" at the first '='.
Result<std::pair<std::string_view, std::string_view>> SplitPair(std::string_view what,
                                                                std::string_view item,
                                                                std::string_view example) {
  size_t eq = item.find('=');
  if (eq == std::string_view::npos) {
    return InvalidArgument(std::string(what) + " " + Quoted(item) + ": expected name=value, e.g. " +
                           std::string(example));
  }
  std::string_view key = item.substr(0, eq);
  RETURN_IF_ERROR(CheckKey(what, item, key));
  return std::pair(key, item.substr(eq + 1));
}

Status CheckValue(std::string_view item, std::string_view value) {
  if (value.empty()) return InvalidArgument("label " + Quoted(item) + ": empty value");
  if (value.size() > kMaxValue) {
    return InvalidArgument("label " + Quoted(item) + ": value longer than " +
                           std::to_string(kMaxValue) + " characters");
  }
  for (char c : value) {
    unsigned char u = static_cast<unsigned char>(c);
    if (!std::isgraph(u) || c == ',' || c == '"' || c == '\'') {
      return InvalidArgument(
          "label " + Quoted(item) +
          ": value may not contain spaces, commas, quotes or control characters");
    }
  }
  return Status::Ok();
}

}  // namespace

std::map<std::string, std::string> DefaultLabels() {
  HostPlatform p = ReadPlatform();
  return {{"os", p.os}, {"arch", p.arch}};
}

Status AddLabels(const std::vector<std::string>& items,
                 std::map<std::string, std::string>* labels) {
  std::map<std::string, std::string> given;
  for (const std::string& item : items) {
    ASSIGN_OR_RETURN(auto kv, SplitPair("label", item, "gpu=rtx or zone=lab2"));
    RETURN_IF_ERROR(CheckValue(item, kv.second));
    if (!given.emplace(std::string(kv.first), std::string(kv.second)).second) {
      return InvalidArgument("label " + Quoted(item) + ": \"" + std::string(kv.first) +
                             "\" is given twice");
    }
  }
  for (auto& [key, value] : given) (*labels)[key] = std::move(value);
  return Status::Ok();
}

Result<std::map<std::string, int64_t>> ParseCounters(const std::vector<std::string>& items) {
  std::map<std::string, int64_t> counters;
  for (const std::string& item : items) {
    ASSIGN_OR_RETURN(auto kv, SplitPair("counter", item, "licenses=2"));
    auto [key, text] = kv;
    int64_t count = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), count);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || count < 0) {
      return InvalidArgument("counter " + Quoted(item) + ": count " + Quoted(text) +
                             " is not a whole number >= 0");
    }
    if (!counters.emplace(std::string(key), count).second) {
      return InvalidArgument("counter " + Quoted(item) + ": \"" + std::string(key) +
                             "\" is given twice");
    }
  }
  return counters;
}

}  // namespace drover::worker
