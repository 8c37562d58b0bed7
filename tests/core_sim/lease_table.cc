#include "core_sim/lease_table.h"

namespace drover::core_sim {

bool LeaseTable::CanClaim(const core::ClaimLeases& claim) const {
  for (const core::LeaseKey& key : claim.keys) {
    if (leases_.count(key)) return false;
  }
  return true;
}

bool LeaseTable::Claim(const core::ClaimLeases& claim, Time now) {
  if (!CanClaim(claim)) return false;
  const LeaseOwner owner{claim.task, claim.attempt};
  const int64_t expiry = ToMicros(now) + claim.ttl.count();
  for (const core::LeaseKey& key : claim.keys) {
    leases_.emplace(key, Lease{owner, expiry});
    by_expiry_.emplace(expiry, key);
    ++per_owner_[owner];
  }
  return true;
}

void LeaseTable::Erase(std::map<core::LeaseKey, Lease>::iterator it) {
  by_expiry_.erase({it->second.expiry_us, it->first});
  auto owner = per_owner_.find(it->second.owner);
  if (--owner->second == 0) per_owner_.erase(owner);
  leases_.erase(it);
}

bool LeaseTable::Release(const core::ReleaseLeases& release) {
  const LeaseOwner owner{release.task, release.attempt};
  bool slot_deleted = false;
  for (const core::LeaseKey& key : release.keys) {
    auto it = leases_.find(key);
    if (it == leases_.end() || !(it->second.owner == owner)) continue;  // compare-and-delete
    if (key.kind == core::LeaseKind::kSlot) slot_deleted = true;
    Erase(it);
  }
  return slot_deleted;
}

size_t LeaseTable::Renew(const core::RenewLeases& renew, Time now) {
  const int64_t expiry = ToMicros(now) + renew.ttl.count();
  size_t missing = 0;
  for (const core::LeaseKey& key : renew.keys) {
    auto it = leases_.find(key);
    if (it == leases_.end()) {
      ++missing;
      continue;
    }
    by_expiry_.erase({it->second.expiry_us, key});
    it->second.expiry_us = expiry;
    by_expiry_.emplace(expiry, key);
  }
  return missing;
}

std::optional<Time> LeaseTable::NextExpiry() const {
  if (by_expiry_.empty()) return std::nullopt;
  return TimeFromMicros(by_expiry_.begin()->first);
}

void LeaseTable::ExpireUntil(Time now, std::vector<Freed>& freed) {
  const int64_t now_us = ToMicros(now);
  while (!by_expiry_.empty() && by_expiry_.begin()->first <= now_us) {
    auto it = leases_.find(by_expiry_.begin()->second);
    if (it->first.kind == core::LeaseKind::kSlot) freed.push_back(Freed{it->second.owner, true});
    Erase(it);
  }
}

std::optional<LeaseOwner> LeaseTable::Holder(const core::LeaseKey& key) const {
  auto it = leases_.find(key);
  if (it == leases_.end()) return std::nullopt;
  return it->second.owner;
}

}  // namespace drover::core_sim
