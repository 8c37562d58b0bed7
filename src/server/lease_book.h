// LeaseBook: what the server shell knows about the leases it holds in the
// store, so that it can speak the store's language (string keys, owner
// strings) on behalf of the core (task ids, attempts).
//
// Owner strings are "task:<job>.<index>#<attempt>@<server id>". The server
// id is persisted in the state directory, so a restarted server owns (and
// can renew and release) the leases its previous run claimed.
//
// The book maps each granted slot key ("lease:3:slot:12.4") to the attempt
// that holds it: the core's RenewLeases names keys, not attempts, and the
// book splits it into one store Renew per owner. A store FreeEvent names
// its holder itself (FreeEvent::owner); the book forgets the key then, and
// a free whose owner is not the attempt the book has (an earlier one's,
// late) is not passed on.
//
// Thread safety: none; the server's event loop owns it.
#ifndef DROVER_SERVER_LEASE_BOOK_H_
#define DROVER_SERVER_LEASE_BOOK_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/ids.h"
#include "core/commands.h"
#include "store/lease.h"

namespace drover::server {

// A task attempt, the unit that owns a lease set.
struct AttemptRef {
  TaskId task;
  uint32_t attempt = 0;
  friend auto operator<=>(const AttemptRef&, const AttemptRef&) = default;
};

class LeaseBook {
 public:
  explicit LeaseBook(std::string server_id) : server_id_(std::move(server_id)) {}

  // "task:12.4#2@<server id>".
  store::Owner OwnerOf(const AttemptRef& attempt) const;
  // Parses an owner string of this format (any server id). nullopt if it is
  // not one.
  static std::optional<AttemptRef> ParseOwner(std::string_view owner);
  // The task of a slot key "lease:W:slot:J.I"; nullopt for other keys.
  static std::optional<TaskId> TaskOfSlotKey(std::string_view key);

  static std::vector<store::LeaseKey> StoreKeys(const std::vector<core::LeaseKey>& keys);

  // Records that `attempt` now holds its lease set, whose slot key is
  // `slot_key` (the claim was granted, or a lease found in the store at
  // startup).
  void Granted(const AttemptRef& attempt, std::string slot_key);
  // Forgets the attempt's entry if `key` is its slot key and returns the
  // attempt; nullopt for keys that are not slot keys we know, and for the
  // slot key of an earlier attempt of the task (its store event may come
  // after the next attempt's grant, another worker's key: it is not that
  // attempt's).
  std::optional<AttemptRef> Freed(std::string_view key);

  // The owner-grouped batches for a RenewLeases command: keys come in task
  // order, each task's slot key first (core::Scheduler's KeysOf). Keys of a
  // task the book does not know are skipped (they are not ours to renew).
  struct RenewBatch {
    store::Owner owner;
    std::vector<store::LeaseKey> keys;
  };
  std::vector<RenewBatch> SplitRenew(const std::vector<core::LeaseKey>& keys) const;

  size_t size() const { return held_.size(); }
  const std::string& server_id() const { return server_id_; }

 private:
  std::string server_id_;
  struct Held {
    uint32_t attempt = 0;
    std::string slot_key;  // "lease:3:slot:12.4"
  };
  std::unordered_map<TaskId, Held> held_;  // task -> the attempt holding its slot
};

}  // namespace drover::server

#endif  // DROVER_SERVER_LEASE_BOOK_H_
