#include "store/redis_journal.h"

#include <memory>

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
  queued_.emplace_back(std::move(record), std::move(done));
}

void RedisJournal::Flush(RedisConnection* conn) {
  auto batch = std::move(queued_);
  queued_.clear();
  for (auto& [record, done] : batch) {
    if (conn == nullptr) {
      done(NotConnected());
      continue;
    }
    conn->Command({"XADD", key_, "*", kField, record}, [done = std::move(done)](Result<RedisReply> r) {
      if (!r.ok()) return done(r.status());
      if (r->is_error()) return done(StatusFromErrorReply(*r, "XADD to the journal"));
      done(Status::Ok());
    });
  }
}

void RedisJournal::Compact(RedisConnection* conn, std::vector<std::string> snapshot,
                           Store::DoneCallback done) {
  Flush(conn);
  if (conn == nullptr) return done(NotConnected());
  uint64_t bytes = 0;
  for (const auto& record : snapshot) bytes += record.size();
  // MULTI's and the queued commands' replies only matter through EXEC's: a
  // command refused while queueing makes EXEC fail with EXECABORT.
  auto ignore = [](Result<RedisReply>) {};
  conn->Command({"MULTI"}, ignore);
  conn->Command({"DEL", key_}, ignore);
  for (auto& record : snapshot) conn->Command({"XADD", key_, "*", kField, std::move(record)}, ignore);
  conn->Command({"EXEC"}, [this, bytes, done = std::move(done)](Result<RedisReply> r) {
    if (!r.ok()) return done(r.status());
    if (r->is_error()) return done(StatusFromErrorReply(*r, "the journal compaction"));
    if (r->type != RedisReply::Type::kArray) return done(Internal("EXEC of the compaction: aborted"));
    for (const auto& e : r->elements) {
      if (e.is_error()) return done(StatusFromErrorReply(e, "a step of the journal compaction"));
    }
    bytes_ = bytes;
    done(Status::Ok());
  });
}

}  // namespace drover::store
