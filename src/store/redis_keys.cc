#include "store/redis_keys.h"

namespace drover::store {
namespace {
constexpr std::string_view kJournalName = "journal";
}  // namespace

RedisKeys::RedisKeys(std::string prefix, int db)
    : prefix_(std::move(prefix)), db_(db), journal_(prefix_ + std::string(kJournalName)) {}

std::string RedisKeys::ScanPattern() const {
  std::string out;
  for (char c : prefix_) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('*');
  return out;
}

std::string RedisKeys::DelChannel() const {
  return "__keyevent@" + std::to_string(db_) + "__:del";
}

std::string RedisKeys::ExpiredChannel() const {
  return "__keyevent@" + std::to_string(db_) + "__:expired";
}

std::optional<LeaseKey> RedisKeys::LeaseOf(std::string_view redis_key) const {
  if (!redis_key.starts_with(prefix_)) return std::nullopt;
  std::string_view key = redis_key.substr(prefix_.size());
  if (key.empty() || key == kJournalName) return std::nullopt;
  return LeaseKey(key);
}

Status RedisKeys::CheckLeaseKey(const LeaseKey& key) {
  if (key.empty()) return InvalidArgument("empty lease key");
  if (key == kJournalName) {
    return InvalidArgument("lease key \"journal\" is reserved for the record log");
  }
  return Status::Ok();
}

}  // namespace drover::store
