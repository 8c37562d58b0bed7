#include "store/redis_journal.h"

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "store/redis_scripts.h"

namespace drover::store {
namespace {

constexpr char kField[] = "r";
constexpr int kPageSize = 1000;

Status NotConnected() { return Unavailable("redis store is not connected"); }

}  // namespace

struct RedisJournal::Recovery {
  Recovered recovered;
  uint64_t bytes = 0;
  Store::Callback<Recovered> done;
};

void RedisJournal::TakeRecovered(RedisConnection* conn, Store::Callback<Recovered> done) {
  if (recovered_taken_ || recovery_running_) {
    return done(FailedPrecondition("the recovered records were already taken"));
  }
  if (conn == nullptr) return done(NotConnected());
  recovery_running_ = true;
  auto recovery = std::make_shared<Recovery>();
  recovery->done = std::move(done);
  ReadPage(*conn, std::move(recovery), "-");
}

void RedisJournal::ReadPage(RedisConnection& conn, std::shared_ptr<Recovery> recovery,
                            std::string start) {
  conn.Command(
      {"XRANGE", key_, start, "+", "COUNT", std::to_string(kPageSize)},
      [this, &conn, recovery](Result<RedisReply> r) {
        auto fail = [this, &recovery](Status s) {
          recovery_running_ = false;
          recovery->done(std::move(s));
        };
        if (!r.ok()) return fail(r.status());
        if (r->is_error()) return fail(StatusFromErrorReply(*r, "XRANGE of the journal"));
        if (r->type != RedisReply::Type::kArray) return fail(Internal("XRANGE: not an array"));
        std::string last_id;
        for (const auto& entry : r->elements) {
          if (entry.type != RedisReply::Type::kArray || entry.elements.size() != 2 ||
              entry.elements[1].type != RedisReply::Type::kArray) {
            return fail(Internal("XRANGE: malformed stream entry"));
          }
          last_id = entry.elements[0].str;
          // "<ms>-<seq>": the next id of ours must be above it.
          next_seq_ =
              std::max<uint64_t>(next_seq_, std::strtoull(last_id.c_str(), nullptr, 10) + 1);
          const auto& fields = entry.elements[1].elements;
          bool found = false;
          for (size_t i = 0; i + 1 < fields.size(); i += 2) {
            if (fields[i].str == kField) {
              recovery->bytes += fields[i + 1].str.size();
              recovery->recovered.records.push_back(fields[i + 1].str);
              found = true;
              break;
            }
          }
          if (!found) {
            return fail(DataLoss("journal entry " + last_id + " has no record field \"r\""));
          }
        }
        if (r->elements.size() == static_cast<size_t>(kPageSize)) {
          return ReadPage(conn, recovery, "(" + last_id);
        }
        recovery_running_ = false;
        recovered_taken_ = true;
        bytes_ += recovery->bytes;
        recovery->done(std::move(recovery->recovered));
      });
}

void RedisJournal::Append(std::string record, Store::DoneCallback done) {
  bytes_ += record.size();
  unstored_.emplace(next_seq_++, Entry{std::move(record), std::move(done)});
}

void RedisJournal::Flush(RedisConnection* conn) {
  if (conn == nullptr) return;
  for (auto& [seq, entry] : unstored_) {
    if (!entry.in_flight) Send(*conn, seq, entry);
  }
}

void RedisJournal::Send(RedisConnection& conn, uint64_t seq, Entry& entry) {
  entry.in_flight = true;
  // The reply may come from inside Command() (a dead connection), so the
  // callback finds the entry by id rather than holding a reference.
  auto on_reply = [this, seq](Result<RedisReply> r) {
    auto it = unstored_.find(seq);
    if (it == unstored_.end()) return;
    Entry& e = it->second;
    e.in_flight = false;
    if (!r.ok()) {
      // Lost with the connection: it may or may not be stored; send it
      // again at the next Flush with a connection.
      e.resend = true;
      return;
    }
    Status result;
    if (r->is_error()) {
      const bool stored_before = e.resend && r->str.find("equal or smaller") != std::string::npos;
      if (r->str.starts_with("NOTLEADER")) {
        result = FailedPrecondition("not the leader: journal append refused (" + r->str + ")");
      } else if (!stored_before) {
        result = StatusFromErrorReply(*r, "XADD to the journal");
        if (result.code() == StatusCode::kUnavailable) {
          e.resend = true;  // LOADING and the like: not stored, try again
          return;
        }
      }
    }
    Store::DoneCallback done = std::move(e.done);
    unstored_.erase(it);
    done(std::move(result));
  };
  if (fence_owner_.empty()) {
    conn.Command({"XADD", key_, Id(seq), kField, entry.record}, std::move(on_reply));
  } else {
    RunScript(conn, AppendFencedScript(), {fence_key_, key_},
              {Id(seq), kField, entry.record, fence_owner_}, std::move(on_reply));
  }
}

void RedisJournal::FailAll(const Status& why) {
  auto all = std::move(unstored_);
  unstored_.clear();
  for (auto& [seq, entry] : all) entry.done(why);
}

void RedisJournal::Compact(RedisConnection* conn, std::vector<std::string> snapshot,
                           Store::DoneCallback done) {
  Flush(conn);
  if (conn == nullptr) return done(NotConnected());
  uint64_t bytes = 0;
  for (const auto& record : snapshot) bytes += record.size();
  if (!fence_owner_.empty()) {
    // A leader's compaction checks leadership in the same atomic step, as
    // its appends do: a leader paused past its lease cannot wipe the stream
    // its successor appends to.
    std::vector<std::string> args = {fence_owner_, kField};
    args.reserve(2 + 2 * snapshot.size());
    for (auto& record : snapshot) {
      args.push_back(Id(next_seq_++));
      args.push_back(std::move(record));
    }
    RunScript(*conn, CompactFencedScript(), {fence_key_, key_}, args,
              [this, bytes, done = std::move(done)](Result<RedisReply> r) {
                if (!r.ok()) return done(r.status());
                if (r->is_error() && r->str.starts_with("NOTLEADER")) {
                  return done(
                      FailedPrecondition("not the leader: journal compaction refused (" + r->str + ")"));
                }
                if (r->is_error()) return done(StatusFromErrorReply(*r, "the journal compaction"));
                bytes_ = bytes;
                done(Status::Ok());
              });
    return;
  }
  // MULTI's and the queued commands' replies only matter through EXEC's: a
  // command refused while queueing makes EXEC fail with EXECABORT.
  auto ignore = [](Result<RedisReply>) {};
  conn->Command({"MULTI"}, ignore);
  conn->Command({"DEL", key_}, ignore);
  // The snapshot continues the ids, so that a resend of an older record is
  // still refused as already stored.
  for (auto& record : snapshot) {
    conn->Command({"XADD", key_, Id(next_seq_++), kField, std::move(record)}, ignore);
  }
  conn->Command({"EXEC"}, [this, bytes, done = std::move(done)](Result<RedisReply> r) {
    if (!r.ok()) return done(r.status());
    if (r->is_error()) return done(StatusFromErrorReply(*r, "the journal compaction"));
    if (r->type != RedisReply::Type::kArray)
      return done(Internal("EXEC of the compaction: aborted"));
    for (const auto& e : r->elements) {
      if (e.is_error()) return done(StatusFromErrorReply(e, "a step of the journal compaction"));
    }
    bytes_ = bytes;
    done(Status::Ok());
  });
}

}  // namespace drover::store
