#include "store/redis_scripts.h"

#include <openssl/evp.h>

#include <memory>

namespace drover::store {
namespace {

std::string Sha1Hex(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha1(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 15]);
  }
  return out;
}

RedisScript Make(std::string name, std::string body) {
  std::string sha = Sha1Hex(body);
  return RedisScript{std::move(name), std::move(body), std::move(sha)};
}

// All-or-nothing: check every key first, write only if none is held by
// another owner. A key past its expiry counts as free (Redis expires it on
// access, which also publishes its "expired" event).
constexpr char kClaim[] = R"lua(
local owner = ARGV[1]
for i, key in ipairs(KEYS) do
  local holder = redis.call('HGET', key, 'owner')
  if holder and holder ~= owner then return {0, i, holder} end
end
for _, key in ipairs(KEYS) do
  redis.call('HSET', key, 'owner', owner, 'ttl', ARGV[2])
  redis.call('PEXPIRE', key, ARGV[2])
end
return {1}
)lua";

constexpr char kRenew[] = R"lua(
local lost = {}
for i, key in ipairs(KEYS) do
  if redis.call('HGET', key, 'owner') == ARGV[1] then
    redis.call('HSET', key, 'ttl', ARGV[2])
    redis.call('PEXPIRE', key, ARGV[2])
  else
    table.insert(lost, i)
  end
end
return lost
)lua";

// Compare-and-set of one key's owner: ARGV[1] (the old owner) hands the key
// to ARGV[2] for ARGV[3] ms. 1 when it did, 0 when ARGV[1] does not hold it.
constexpr char kTakeOver[] = R"lua(
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'owner', ARGV[2], 'ttl', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
)lua";

// Compare-and-delete: only the owner's keys go (each DEL publishes "del").
constexpr char kRelease[] = R"lua(
local not_held = {}
for i, key in ipairs(KEYS) do
  if redis.call('HGET', key, 'owner') == ARGV[1] then
    redis.call('DEL', key)
  else
    table.insert(not_held, i)
  end
end
return not_held
)lua";

// The claim of a leader: KEYS[1] is the leader key, which must be held by
// ARGV[3], checked in the same atomic step as the claim itself (fencing: a
// leader that lost its lease while paused cannot claim anything after).
constexpr char kClaimFenced[] = R"lua(
local leader = redis.call('HGET', KEYS[1], 'owner')
if leader ~= ARGV[3] then
  return redis.error_reply('NOTLEADER the leader is ' .. tostring(leader))
end
local owner = ARGV[1]
for i = 2, #KEYS do
  local holder = redis.call('HGET', KEYS[i], 'owner')
  if holder and holder ~= owner then return {0, i - 1, holder} end
end
for i = 2, #KEYS do
  redis.call('HSET', KEYS[i], 'owner', owner, 'ttl', ARGV[2])
  redis.call('PEXPIRE', KEYS[i], ARGV[2])
end
return {1}
)lua";

// A journal append of a leader: KEYS = leader key, stream; ARGV = entry id,
// field, record, leader.
constexpr char kAppendFenced[] = R"lua(
local leader = redis.call('HGET', KEYS[1], 'owner')
if leader ~= ARGV[4] then
  return redis.error_reply('NOTLEADER the leader is ' .. tostring(leader))
end
return redis.call('XADD', KEYS[2], ARGV[1], ARGV[2], ARGV[3])
)lua";

// Compaction, fenced: the stream is replaced by the snapshot only while the
// leader key is `leader` — a deposed leader's late compaction changes
// nothing. ARGV = leader, field, id1, record1, id2, record2, ...
constexpr char kCompactFenced[] = R"lua(
local leader = redis.call('HGET', KEYS[1], 'owner')
if leader ~= ARGV[1] then
  return redis.error_reply('NOTLEADER the leader is ' .. tostring(leader))
end
redis.call('DEL', KEYS[2])
for i = 3, #ARGV, 2 do
  redis.call('XADD', KEYS[2], ARGV[i], ARGV[2], ARGV[i + 1])
end
return (#ARGV - 2) / 2
)lua";

// One SCAN page; only hashes with an owner and an expiry are leases.
constexpr char kList[] = R"lua(
local page = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[2], 'COUNT', ARGV[3])
local out = {page[1]}
for _, key in ipairs(page[2]) do
  if redis.call('TYPE', key)['ok'] == 'hash' then
    local fields = redis.call('HMGET', key, 'owner', 'ttl')
    local pttl = redis.call('PTTL', key)
    if fields[1] and fields[2] and pttl > 0 then
      table.insert(out, key)
      table.insert(out, fields[1])
      table.insert(out, fields[2])
      table.insert(out, pttl)
    end
  end
end
return out
)lua";

}  // namespace

const RedisScript& ClaimScript() {
  static const RedisScript* script = new RedisScript(Make("claim", kClaim));
  return *script;
}
const RedisScript& RenewScript() {
  static const RedisScript* script = new RedisScript(Make("renew", kRenew));
  return *script;
}
const RedisScript& ReleaseScript() {
  static const RedisScript* script = new RedisScript(Make("release", kRelease));
  return *script;
}
const RedisScript& ListScript() {
  static const RedisScript* script = new RedisScript(Make("list", kList));
  return *script;
}

const RedisScript& TakeOverScript() {
  static const RedisScript* script = new RedisScript(Make("take_over", kTakeOver));
  return *script;
}

const RedisScript& ClaimFencedScript() {
  static const RedisScript* script = new RedisScript(Make("claim_fenced", kClaimFenced));
  return *script;
}
const RedisScript& AppendFencedScript() {
  static const RedisScript* script = new RedisScript(Make("append_fenced", kAppendFenced));
  return *script;
}

const RedisScript& CompactFencedScript() {
  static const RedisScript* script = new RedisScript(Make("compact_fenced", kCompactFenced));
  return *script;
}

std::vector<const RedisScript*> AllScripts() {
  return {&ClaimScript(),       &RenewScript(),        &ReleaseScript(),      &ListScript(),
          &ClaimFencedScript(), &AppendFencedScript(), &CompactFencedScript(),
          &TakeOverScript()};
}

void RunScript(RedisConnection& conn, const RedisScript& script, const std::vector<std::string>& keys,
               const std::vector<std::string>& args, RedisConnection::ReplyCallback done) {
  std::vector<std::string> argv = {"EVALSHA", script.sha1, std::to_string(keys.size())};
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  // The connection outlives its callbacks' invocation (it completes them
  // before it goes), so the fallback may use it from the callback.
  conn.Command(argv, [&conn, &script, argv, done = std::move(done)](Result<RedisReply> r) mutable {
    if (r.ok() && r->is_error() && r->str.starts_with("NOSCRIPT")) {
      argv[0] = "EVAL";
      argv[1] = script.body;
      conn.Command(argv, std::move(done));
      return;
    }
    done(std::move(r));
  });
}

}  // namespace drover::store
