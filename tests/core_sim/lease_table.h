// LeaseTable: the simulation's stand-in for the lease store (DESIGN.md
// section 4), driven by the commands the core emits.
//
// A lease is a key with an owner (task and attempt) and an expiry on the
// simulated clock. Claims are all-or-nothing, releases are compare-and-delete,
// renewals extend keys that still exist, and keys whose expiry has passed are
// removed by ExpireUntil, which reports one `Freed` per task slot key, the
// way the store shell turns keyspace notifications into LeaseFreed events.
//
// It checks nothing about the core by itself; the simulation asks it who
// holds what.
//
// Thread safety: none; owned by one test thread.
#ifndef DROVER_TESTS_CORE_SIM_LEASE_TABLE_H_
#define DROVER_TESTS_CORE_SIM_LEASE_TABLE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "common/ids.h"
#include "common/time.h"
#include "core/commands.h"

namespace drover::core_sim {

struct LeaseOwner {
  TaskId task;
  uint32_t attempt = 0;
  friend auto operator<=>(const LeaseOwner&, const LeaseOwner&) = default;
};

class LeaseTable {
 public:
  // A task's slot key went away; `expired` is false for a release.
  struct Freed {
    LeaseOwner owner;
    bool expired = true;
  };

  // True when no key of the claim is held now.
  bool CanClaim(const core::ClaimLeases& claim) const;
  // Takes every key of the claim for (task, attempt) until now + claim.ttl.
  // Returns false and takes nothing when any key is held.
  bool Claim(const core::ClaimLeases& claim, Time now);
  // Deletes the keys held by (task, attempt); others are left alone. Returns
  // true when the task's slot key was among the deleted ones.
  bool Release(const core::ReleaseLeases& release);
  // Extends every listed key that exists to now + ttl; returns how many of
  // the keys did not exist.
  size_t Renew(const core::RenewLeases& renew, Time now);

  // The earliest expiry of any held key, if any key is held.
  std::optional<Time> NextExpiry() const;
  // Removes every key whose expiry is at or before `now`; appends one Freed
  // per expired slot key.
  void ExpireUntil(Time now, std::vector<Freed>& freed);

  // Whether any key is held by this task attempt.
  bool HoldsAny(const LeaseOwner& owner) const { return per_owner_.count(owner) != 0; }
  std::optional<LeaseOwner> Holder(const core::LeaseKey& key) const;
  size_t size() const { return leases_.size(); }

 private:
  struct Lease {
    LeaseOwner owner;
    int64_t expiry_us = 0;
  };
  void Erase(std::map<core::LeaseKey, Lease>::iterator it);

  std::map<core::LeaseKey, Lease> leases_;
  std::set<std::pair<int64_t, core::LeaseKey>> by_expiry_;
  std::map<LeaseOwner, uint32_t> per_owner_;  // keys held per owner
};

}  // namespace drover::core_sim

#endif  // DROVER_TESTS_CORE_SIM_LEASE_TABLE_H_
