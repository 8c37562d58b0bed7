// The Lua scripts that make lease operations atomic in Redis (DESIGN.md
// section 4), and how to run one: EVALSHA, falling back to EVAL when the
// server answers NOSCRIPT (its script cache was flushed or it restarted).
//
// A lease is a hash {owner, ttl} (ttl in ms, as last claimed or renewed, so
// ListLeases can report it) with a PX expiry; the key exists exactly while
// the lease is held. Every script takes the full Redis keys as KEYS:
//   claim   ARGV = owner, ttl_ms   -> {1} claimed, or {0, i, owner}: KEYS[i]
//                                     is held by owner; then nothing changed
//   renew   ARGV = owner, ttl_ms   -> {i...}: the KEYS the owner does not hold
//   release ARGV = owner           -> {i...}: the KEYS not deleted (not held)
//   list    ARGV = cursor, pattern, count (no KEYS) -> {next cursor,
//           key, owner, ttl_ms, pttl_ms, key, ...}: one SCAN page of leases
//   claim_fenced  KEYS = leader key, leases...; ARGV = owner, ttl_ms, leader
//           -> as claim (indices count the leases only), or the error
//              "NOTLEADER ..." when the leader key is not held by `leader`
//   append_fenced KEYS = leader key, stream; ARGV = id, field, record,
//           leader -> XADD's reply, or the error "NOTLEADER ..."
//   compact_fenced KEYS = leader key, stream; ARGV = leader, field, id1,
//           record1, id2, record2, ... -> DEL stream and XADD each (the
//           count), or the error "NOTLEADER ..." and nothing changed
//
// Thread safety: the scripts are immutable; RunScript belongs to the
// connection's loop thread.
#ifndef DROVER_STORE_REDIS_SCRIPTS_H_
#define DROVER_STORE_REDIS_SCRIPTS_H_

#include <string>
#include <vector>

#include "store/redis_connection.h"

namespace drover::store {

struct RedisScript {
  std::string name;  // for error messages
  std::string body;
  std::string sha1;  // 40 lower-case hex digits of `body`
};

const RedisScript& ClaimScript();
const RedisScript& RenewScript();
const RedisScript& ReleaseScript();
const RedisScript& ListScript();
const RedisScript& ClaimFencedScript();
const RedisScript& TakeOverScript();
const RedisScript& AppendFencedScript();
const RedisScript& CompactFencedScript();
// All of the above, for SCRIPT LOAD at connect time (so that a NOSCRIPT
// fallback, which reorders a call behind later ones, stays exceptional).
std::vector<const RedisScript*> AllScripts();

// EVALSHA `script` with `keys` and `args`; on NOSCRIPT, EVAL it instead.
// `done` gets the reply as RedisConnection::Command would give it.
void RunScript(RedisConnection& conn, const RedisScript& script, const std::vector<std::string>& keys,
               const std::vector<std::string>& args, RedisConnection::ReplyCallback done);

}  // namespace drover::store

#endif  // DROVER_STORE_REDIS_SCRIPTS_H_
