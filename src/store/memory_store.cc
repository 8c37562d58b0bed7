#include "store/memory_store.h"

#include <algorithm>
#include <utility>

namespace drover::store {
namespace {

// The journal of a MemoryStore interleaves three kinds of record, told apart
// by their first byte:
//   'R' payload                                  a server record
//   'C' ttl_us:u64 owner:str count:u32 key:str*  keys claimed by owner
//   'F' count:u32 key:str*                       keys freed (released/expired)
//   'S' count:u32 (ttl_us:u64 owner:str key:str)*  the whole lease table:
//                                                  drop all, then hold these
// where str is a u32 length and the bytes; integers are little-endian.
constexpr char kRecordTag = 'R';
constexpr char kClaimTag = 'C';
constexpr char kFreeTag = 'F';
constexpr char kTableTag = 'S';

void PutU32(uint32_t v, std::string* out) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
void PutU64(uint64_t v, std::string* out) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
void PutStr(std::string_view s, std::string* out) {
  PutU32(static_cast<uint32_t>(s.size()), out);
  out->append(s);
}

// Reads the fields above with bounds checks; ok() turns false on overrun.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  uint64_t Fixed(int bytes) {
    if (data_.size() < static_cast<size_t>(bytes)) return Fail();
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<unsigned char>(data_[i])} << (8 * i);
    data_.remove_prefix(static_cast<size_t>(bytes));
    return v;
  }
  std::string Str() {
    uint64_t n = Fixed(4);
    if (!ok_ || data_.size() < n) return Fail(), std::string();
    std::string s(data_.substr(0, n));
    data_.remove_prefix(n);
    return s;
  }
  bool ok() const { return ok_; }
  bool done() const { return data_.empty(); }

 private:
  uint64_t Fail() {
    ok_ = false;
    data_ = {};
    return 0;
  }
  std::string_view data_;
  bool ok_ = true;
};

std::string EncodeClaim(const std::vector<LeaseKey>& keys, const Owner& owner, Duration ttl) {
  std::string out(1, kClaimTag);
  PutU64(static_cast<uint64_t>(ttl.count()), &out);
  PutStr(owner, &out);
  PutU32(static_cast<uint32_t>(keys.size()), &out);
  for (const auto& key : keys) PutStr(key, &out);
  return out;
}

std::string EncodeFree(const std::vector<LeaseKey>& keys) {
  std::string out(1, kFreeTag);
  PutU32(static_cast<uint32_t>(keys.size()), &out);
  for (const auto& key : keys) PutStr(key, &out);
  return out;
}

template <typename Map>
std::string EncodeTable(const Map& leases) {
  std::string out(1, kTableTag);
  PutU32(static_cast<uint32_t>(leases.size()), &out);
  for (const auto& [key, held] : leases) {
    PutU64(static_cast<uint64_t>(held.ttl.count()), &out);
    PutStr(held.owner, &out);
    PutStr(key, &out);
  }
  return out;
}

Status ValidateRequest(const std::vector<LeaseKey>& keys, const Owner& owner,
                       std::optional<Duration> ttl) {
  if (keys.empty()) return InvalidArgument("no lease keys given");
  for (const auto& key : keys) {
    if (key.empty()) return InvalidArgument("empty lease key");
  }
  if (owner.empty()) return InvalidArgument("empty lease owner");
  if (ttl && *ttl <= Duration::zero()) {
    return InvalidArgument("lease TTL must be positive, got " + std::to_string(ttl->count()) +
                           "us");
  }
  return Status::Ok();
}

void SortUnique(std::vector<LeaseKey>* keys) {
  std::sort(keys->begin(), keys->end());
  keys->erase(std::unique(keys->begin(), keys->end()), keys->end());
}

// std::push_heap builds a max-heap; invert for the earliest deadline on top.
struct LaterFirst {
  template <typename D>
  bool operator()(const D& a, const D& b) const {
    return a.at > b.at;
  }
};

}  // namespace

MemoryStore::MemoryStore(Clock& clock) : MemoryStore(clock, nullptr, Recovered{}) {}

MemoryStore::MemoryStore(Clock& clock, std::unique_ptr<store::Journal> journal, Recovered recovered)
    : clock_(clock), journal_(std::move(journal)), recovered_(std::move(recovered)) {}

MemoryStore::~MemoryStore() {
  *alive_ = false;
  // In background mode the last batches may still be in flight or buffered:
  // a clean stop makes them durable.
  if (journal_ && wake_) (void)journal_->Sync();
}

void MemoryStore::SyncInBackground(std::function<void(std::function<void()>)> post) {
  if (!journal_) return;
  std::weak_ptr<bool> alive = alive_;
  wake_ = [this, alive, post = std::move(post)] {
    // On the helper thread: only hand the reaping to the owner's thread.
    post([this, alive] {
      if (!alive.expired() && *alive.lock()) journal_->ReapIfDone();
    });
  };
}

Result<std::unique_ptr<MemoryStore>> MemoryStore::Open(Clock& clock, Env& env,
                                                       const std::string& dir) {
  JournalReplay replay;
  ASSIGN_OR_RETURN(auto journal, Journal::Open(env, JoinPath(dir, "journal"), &replay));
  Recovered recovered;
  recovered.discarded_bytes = replay.discarded_bytes;
  std::unique_ptr<MemoryStore> store(new MemoryStore(clock, std::move(journal), Recovered{}));
  const Time now = clock.Now();
  recovered.records.reserve(replay.records.size());
  for (size_t i = 0; i < replay.records.size(); ++i) {
    std::string& record = replay.records[i];
    if (!record.empty() && record[0] == kRecordTag) {
      // Moved, and its tag dropped in place: a million records are not
      // allocated and copied a second time (bench/README.md, B6 restart).
      record.erase(0, 1);
      recovered.records.push_back(std::move(record));
      continue;
    }
    Status s = store->ReplayRecord(record, now);
    if (!s.ok()) {
      return s.WithContext(JoinPath(dir, "journal") + ": record " + std::to_string(i + 1));
    }
  }
  store->recovered_ = std::move(recovered);
  return store;
}

Status MemoryStore::ReplayRecord(std::string_view record, Time now) {
  if (record.empty()) return FailedPrecondition("empty journal record");
  Reader in(record.substr(1));
  if (record[0] == kClaimTag) {
    Duration ttl(static_cast<int64_t>(in.Fixed(8)));
    Owner owner = in.Str();
    uint64_t count = in.Fixed(4);
    for (uint64_t k = 0; k < count && in.ok(); ++k) {
      LeaseKey key = in.Str();
      if (!in.ok()) break;
      Held& held = leases_[key];
      held = Held{owner, now + ttl, ttl, next_serial_++};
      PushDeadline(key, held);
    }
  } else if (record[0] == kTableTag) {
    leases_.clear();
    heap_.clear();
    uint64_t count = in.Fixed(4);
    for (uint64_t k = 0; k < count && in.ok(); ++k) {
      Duration ttl(static_cast<int64_t>(in.Fixed(8)));
      Owner owner = in.Str();
      LeaseKey key = in.Str();
      if (!in.ok()) break;
      Held& held = leases_[key];
      held = Held{std::move(owner), now + ttl, ttl, next_serial_++};
      PushDeadline(key, held);
    }
  } else if (record[0] == kFreeTag) {
    uint64_t count = in.Fixed(4);
    for (uint64_t k = 0; k < count && in.ok(); ++k) {
      LeaseKey key = in.Str();
      if (in.ok()) leases_.erase(key);
    }
  } else {
    return FailedPrecondition("unknown journal record kind " +
                              std::to_string(static_cast<unsigned char>(record[0])) +
                              " (written by a newer drover?)");
  }
  if (!in.ok() || !in.done()) return FailedPrecondition("malformed lease record in the journal");
  return Status::Ok();
}

void MemoryStore::Subscribe(FreeListener listener, DoneCallback subscribed) {
  listener_ = std::move(listener);
  subscribed(Status::Ok());
}

void MemoryStore::Claim(std::vector<LeaseKey> keys, Owner owner, Duration ttl,
                        Callback<ClaimOutcome> done) {
  if (Status s = ValidateRequest(keys, owner, ttl); !s.ok()) return done(s);
  const Time now = clock_.Now();
  ExpireDue(now);
  SortUnique(&keys);
  ClaimOutcome outcome;
  for (const auto& key : keys) {
    auto it = leases_.find(key);
    if (it != leases_.end() && it->second.owner != owner) {
      outcome.conflict_key = key;
      outcome.conflict_owner = it->second.owner;
      return done(std::move(outcome));
    }
  }
  outcome.claimed = true;
  outcome.expires_at = now + ttl;
  for (const auto& key : keys) {
    auto [it, inserted] = leases_.try_emplace(key);
    Held& held = it->second;
    if (inserted) held.serial = next_serial_++;
    held.owner = owner;
    held.ttl = ttl;
    if (inserted || held.expires_at != outcome.expires_at) {
      held.expires_at = outcome.expires_at;
      PushDeadline(key, held);
    }
  }
  JournalLeaseChange(EncodeClaim(keys, owner, ttl));
  done(std::move(outcome));
}

void MemoryStore::Renew(std::vector<LeaseKey> keys, Owner owner, Duration ttl,
                        Callback<RenewOutcome> done) {
  if (Status s = ValidateRequest(keys, owner, ttl); !s.ok()) return done(s);
  const Time now = clock_.Now();
  ExpireDue(now);
  SortUnique(&keys);
  RenewOutcome outcome;
  outcome.expires_at = now + ttl;
  std::vector<LeaseKey> ttl_changed;
  for (const auto& key : keys) {
    auto it = leases_.find(key);
    if (it == leases_.end() || it->second.owner != owner) {
      outcome.lost.push_back(key);
      continue;
    }
    Held& held = it->second;
    if (held.ttl != ttl) ttl_changed.push_back(key);
    held.ttl = ttl;
    if (held.expires_at != outcome.expires_at) {
      held.expires_at = outcome.expires_at;
      PushDeadline(key, held);
    }
  }
  // A restart restores a lease for its journaled TTL, so keep that current.
  if (!ttl_changed.empty()) JournalLeaseChange(EncodeClaim(ttl_changed, owner, ttl));
  done(std::move(outcome));
}

void MemoryStore::Release(std::vector<LeaseKey> keys, Owner owner, Callback<ReleaseOutcome> done) {
  if (Status s = ValidateRequest(keys, owner, std::nullopt); !s.ok()) return done(s);
  ExpireDue(clock_.Now());
  SortUnique(&keys);
  ReleaseOutcome outcome;
  std::vector<LeaseKey> released;
  std::vector<FreeEvent> events;
  for (auto& key : keys) {
    auto it = leases_.find(key);
    if (it == leases_.end() || it->second.owner != owner) {
      outcome.not_held.push_back(std::move(key));
      continue;
    }
    leases_.erase(it);
    events.push_back(FreeEvent{key, FreeReason::kReleased, owner});
    released.push_back(std::move(key));
  }
  if (!released.empty()) JournalLeaseChange(EncodeFree(released));
  done(std::move(outcome));
  Deliver(events);
}

void MemoryStore::ListLeases(Callback<std::vector<Lease>> done) {
  ExpireDue(clock_.Now());
  std::vector<Lease> out;
  out.reserve(leases_.size());
  for (const auto& [key, held] : leases_) {
    out.push_back(Lease{key, held.owner, held.expires_at, held.ttl});
  }
  std::sort(out.begin(), out.end(), [](const Lease& a, const Lease& b) { return a.key < b.key; });
  done(std::move(out));
}

void MemoryStore::ExpireDue(Time now) {
  std::vector<FreeEvent> events;
  std::vector<LeaseKey> expired;
  while (!heap_.empty() && heap_.front().at <= now) {
    std::pop_heap(heap_.begin(), heap_.end(), LaterFirst{});
    Deadline d = std::move(heap_.back());
    heap_.pop_back();
    if (!IsLive(d)) continue;
    auto held = leases_.find(d.key);
    Owner owner = held != leases_.end() ? std::move(held->second.owner) : Owner();
    leases_.erase(d.key);
    expired.push_back(d.key);
    events.push_back(FreeEvent{std::move(d.key), FreeReason::kExpired, std::move(owner)});
  }
  if (events.empty()) return;
  // Not strictly needed (a restart restores expired leases for one more TTL,
  // which is safe), but it lets a restart free them at once.
  JournalLeaseChange(EncodeFree(expired));
  Deliver(events);
}

std::optional<Time> MemoryStore::NextExpiry() {
  while (!heap_.empty() && !IsLive(heap_.front())) {
    std::pop_heap(heap_.begin(), heap_.end(), LaterFirst{});
    heap_.pop_back();
  }
  if (heap_.empty()) return std::nullopt;
  return heap_.front().at;
}

void MemoryStore::PushDeadline(const LeaseKey& key, const Held& held) {
  heap_.push_back(Deadline{held.expires_at, held.serial, key});
  std::push_heap(heap_.begin(), heap_.end(), LaterFirst{});
  PruneHeap();
}

bool MemoryStore::IsLive(const Deadline& d) const {
  auto it = leases_.find(d.key);
  return it != leases_.end() && it->second.serial == d.serial && it->second.expires_at == d.at;
}

void MemoryStore::PruneHeap() {
  // Released and renewed leases leave stale deadlines behind; rebuild when
  // they outnumber the live ones so memory stays proportional to leases.
  if (heap_.size() < 64 || heap_.size() < 2 * leases_.size() + 64) return;
  heap_.clear();
  for (const auto& [key, held] : leases_)
    heap_.push_back(Deadline{held.expires_at, held.serial, key});
  std::make_heap(heap_.begin(), heap_.end(), LaterFirst{});
}

void MemoryStore::JournalLeaseChange(std::string record) {
  if (!journal_) return;
  // A lost lease record would let a restart forget a claim (or revive a
  // freed key); remember to journal the whole table at the next Flush().
  journal_->Append(record, [this](Status s) {
    if (!s.ok()) lease_journal_lost_ = true;
  });
}

void MemoryStore::Deliver(const std::vector<FreeEvent>& events) {
  for (const auto& event : events) {
    if (listener_) listener_(event);
  }
}

void MemoryStore::TakeRecovered(Callback<Recovered> done) {
  if (!recovered_) return done(FailedPrecondition("recovered records were already taken"));
  Recovered out = std::move(*recovered_);
  recovered_.reset();
  done(std::move(out));
}

void MemoryStore::Append(std::string record, DoneCallback done) {
  if (!journal_) {
    unjournaled_.push_back(std::move(done));
    return;
  }
  record.insert(record.begin(), kRecordTag);
  journal_->Append(record, std::move(done));
}

void MemoryStore::Flush() {
  if (!journal_) {
    std::vector<DoneCallback> callbacks = std::move(unjournaled_);
    unjournaled_.clear();
    for (auto& done : callbacks) done(Status::Ok());
    return;
  }
  if (lease_journal_lost_ && journal_->broken().ok()) {
    lease_journal_lost_ = false;
    JournalLeaseChange(EncodeTable(leases_));
  }
  // Failures reach the appenders through their callbacks.
  if (wake_) {
    journal_->SyncInBackground(wake_);
    return;
  }
  (void)journal_->Sync();
}

void MemoryStore::Compact(std::vector<std::string> snapshot, DoneCallback done) {
  if (!journal_) {
    Flush();
    return done(Status::Ok());
  }
  // The core's records, each framed behind its tag, then the leases held.
  std::vector<std::string> records = std::move(snapshot);
  const size_t tagged = records.size();
  ExpireDue(clock_.Now());
  records.reserve(tagged + leases_.size());
  for (const auto& [key, held] : leases_)
    records.push_back(EncodeClaim({key}, held.owner, held.ttl));
  if (wake_) {
    // Off the owner's loop; what is appended meanwhile follows it.
    journal_->CompactInBackground(std::move(records), std::string(1, kRecordTag), tagged, wake_,
                                  std::move(done));
    return;
  }
  for (size_t i = 0; i < tagged; ++i) records[i].insert(records[i].begin(), kRecordTag);
  done(journal_->Compact(std::move(records)));
}

uint64_t MemoryStore::LogBytes() const { return journal_ ? journal_->durable_bytes() : 0; }

}  // namespace drover::store
