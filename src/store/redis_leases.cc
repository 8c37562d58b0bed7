#include "store/redis_leases.h"

#include <charconv>
#include <unordered_set>

namespace drover::store {
namespace {

Status BadReply(std::string_view what, std::string_view why) {
  return Internal("unexpected reply to " + std::string(what) + ": " + std::string(why));
}

std::optional<int64_t> ToInt(const RedisReply& r) {
  if (r.type == RedisReply::Type::kInteger) return r.integer;
  if (r.type == RedisReply::Type::kString) {
    int64_t v = 0;
    auto [end, ec] = std::from_chars(r.str.data(), r.str.data() + r.str.size(), v);
    if (ec == std::errc() && end == r.str.data() + r.str.size()) return v;
  }
  return std::nullopt;
}

}  // namespace

Result<std::vector<LeaseKey>> NormaliseLeaseRequest(std::vector<LeaseKey> keys,
                                                    const Owner& owner,
                                                    std::optional<Duration> ttl) {
  if (keys.empty()) return InvalidArgument("no lease keys given");
  if (owner.empty()) return InvalidArgument("empty lease owner");
  if (ttl && *ttl <= Duration::zero()) {
    return InvalidArgument("lease TTL must be positive, got " + std::to_string(ttl->count()) +
                           " us");
  }
  std::vector<LeaseKey> out;
  std::unordered_set<LeaseKey> seen;
  for (auto& key : keys) {
    RETURN_IF_ERROR(RedisKeys::CheckLeaseKey(key));
    if (seen.insert(key).second) out.push_back(std::move(key));
  }
  return out;
}

std::string TtlMillisArg(Duration ttl) {
  int64_t ms = (ttl.count() + 999) / 1000;
  return std::to_string(ms < 1 ? 1 : ms);
}

Result<ClaimOutcome> ParseClaimReply(const RedisReply& reply, const std::vector<LeaseKey>& keys,
                                     Time now, Duration ttl) {
  if (reply.is_error()) return StatusFromErrorReply(reply, "claim");
  if (reply.type != RedisReply::Type::kArray || reply.elements.empty()) {
    return BadReply("claim", "not a non-empty array");
  }
  auto claimed = ToInt(reply.elements[0]);
  ClaimOutcome out;
  if (claimed == 1) {
    out.claimed = true;
    out.expires_at = now + ttl;
    return out;
  }
  if (claimed != 0 || reply.elements.size() != 3) return BadReply("claim", "bad conflict");
  auto index = ToInt(reply.elements[1]);
  if (!index || *index < 1 || *index > static_cast<int64_t>(keys.size())) {
    return BadReply("claim", "conflict index out of range");
  }
  out.conflict_key = keys[*index - 1];
  out.conflict_owner = reply.elements[2].str;
  return out;
}

Result<std::vector<LeaseKey>> ParseKeyIndexReply(const RedisReply& reply,
                                                 const std::vector<LeaseKey>& keys,
                                                 std::string_view what) {
  if (reply.is_error()) return StatusFromErrorReply(reply, what);
  if (reply.type != RedisReply::Type::kArray) return BadReply(what, "not an array");
  std::vector<LeaseKey> out;
  for (const auto& e : reply.elements) {
    auto index = ToInt(e);
    if (!index || *index < 1 || *index > static_cast<int64_t>(keys.size())) {
      return BadReply(what, "key index out of range");
    }
    out.push_back(keys[*index - 1]);
  }
  return out;
}

Result<LeasePage> ParseListReply(const RedisReply& reply, const RedisKeys& keys, Time now) {
  if (reply.is_error()) return StatusFromErrorReply(reply, "list");
  if (reply.type != RedisReply::Type::kArray || reply.elements.empty() ||
      (reply.elements.size() - 1) % 4 != 0) {
    return BadReply("list", "not a cursor and groups of four");
  }
  LeasePage page;
  page.next_cursor = reply.elements[0].str;
  for (size_t i = 1; i < reply.elements.size(); i += 4) {
    auto key = keys.LeaseOf(reply.elements[i].str);
    auto ttl_ms = ToInt(reply.elements[i + 2]);
    auto pttl_ms = ToInt(reply.elements[i + 3]);
    if (!ttl_ms || !pttl_ms) return BadReply("list", "ttl is not a number");
    if (!key) continue;
    page.leases.push_back(
        Lease{*key, reply.elements[i + 1].str, now + Millis(*pttl_ms), Millis(*ttl_ms)});
  }
  return page;
}

}  // namespace drover::store
