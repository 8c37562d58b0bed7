#include "core/placement.h"

#include <algorithm>
#include <array>
#include <set>
#include <vector>

namespace drover::core {

std::string_view PolicyName(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::kSpread:
      return "spread";
    case PolicyKind::kPack:
      return "pack";
    case PolicyKind::kRoundRobin:
      return "round-robin";
  }
  return "unknown";
}

Result<PolicyKind> ParsePolicy(std::string_view text) {
  for (PolicyKind k : {PolicyKind::kSpread, PolicyKind::kPack, PolicyKind::kRoundRobin}) {
    if (text == PolicyName(k)) return k;
  }
  return InvalidArgument("placement policy \"" + std::string(text) +
                         "\": expected spread, pack or round-robin");
}

namespace {

// A policy whose preference is an ordering key computed from the load. The
// index is a set of (key, slot); `keys_` remembers each present slot's key
// so Update can skip the set when the key did not change (the common case:
// one task ends and another takes its place on the same worker).
class OrderedPolicy : public PlacementPolicy {
 public:
  using Key = std::array<uint32_t, 3>;

  void Add(const WorkerLoad& load) override {
    Remove(load.slot);
    if (load.slot >= keys_.size()) keys_.resize(load.slot + 1);
    keys_[load.slot] = Entry{MakeKey(load), true};
    index_.insert({keys_[load.slot].key, load.slot});
  }
  void Remove(uint32_t slot) override {
    if (slot >= keys_.size() || !keys_[slot].present) return;
    index_.erase({keys_[slot].key, slot});
    keys_[slot].present = false;
  }
  void Update(const WorkerLoad& load) override {
    if (load.slot >= keys_.size() || !keys_[load.slot].present) return;
    Key key = MakeKey(load);
    if (key == keys_[load.slot].key) return;
    // Re-key the existing node, so a load change allocates nothing.
    auto node = index_.extract({keys_[load.slot].key, load.slot});
    node.value().first = key;
    index_.insert(std::move(node));
    keys_[load.slot].key = key;
  }
  uint32_t Choose(const std::function<bool(uint32_t)>& fits) override {
    for (const auto& [key, slot] : index_) {
      if (fits(slot)) return slot;
    }
    return kNoWorker;
  }
  bool Comparable(uint32_t slot, uint32_t best) const override {
    if (std::max(slot, best) >= keys_.size() || !keys_[slot].present || !keys_[best].present) {
      return false;
    }
    return Near(keys_[slot].key, keys_[best].key);
  }

 protected:
  virtual Key MakeKey(const WorkerLoad& load) const = 0;
  // `key` is within the policy's tolerance of `best`'s.
  virtual bool Near(const Key& key, const Key& best) const = 0;

 private:
  struct Entry {
    Key key{};
    bool present = false;
  };
  std::vector<Entry> keys_;
  std::set<std::pair<Key, uint32_t>> index_;
};

class SpreadPolicy final : public OrderedPolicy {
 public:
  PolicyKind kind() const override { return PolicyKind::kSpread; }
  // Shares pack onto used GPUs, as with pack: spreading them leaves half-used
  // GPUs that no whole-GPU task fits (docs/sim.md, the idle profile).
  bool PreferFullGpus() const override { return true; }

 protected:
  Key MakeKey(const WorkerLoad& l) const override { return {l.running_tasks, l.cpu_percent, 0}; }
  bool Near(const Key& key, const Key& best) const override { return key[0] <= best[0] + 1; }
};

class PackPolicy final : public OrderedPolicy {
 public:
  PolicyKind kind() const override { return PolicyKind::kPack; }
  bool PreferFullGpus() const override { return true; }

 protected:
  Key MakeKey(const WorkerLoad& l) const override { return {l.free_whole_gpus, l.free_cores, 0}; }
  bool Near(const Key& key, const Key& best) const override { return key[0] == best[0]; }
};

class RoundRobinPolicy final : public PlacementPolicy {
 public:
  PolicyKind kind() const override { return PolicyKind::kRoundRobin; }
  bool PreferFullGpus() const override { return false; }
  void Add(const WorkerLoad& load) override { slots_.insert(load.slot); }
  void Remove(uint32_t slot) override { slots_.erase(slot); }
  void Update(const WorkerLoad&) override {}
  bool Comparable(uint32_t slot, uint32_t) const override { return slots_.count(slot) > 0; }
  uint32_t Choose(const std::function<bool(uint32_t)>& fits) override {
    if (slots_.empty()) return kNoWorker;
    // Start after the previous choice and wrap around once.
    auto start = slots_.upper_bound(last_);
    for (auto it = start; it != slots_.end(); ++it) {
      if (fits(*it)) return last_ = *it;
    }
    for (auto it = slots_.begin(); it != start; ++it) {
      if (fits(*it)) return last_ = *it;
    }
    return kNoWorker;
  }

 private:
  std::set<uint32_t> slots_;
  uint32_t last_ = kNoWorker;
};

}  // namespace

std::unique_ptr<PlacementPolicy> MakePolicy(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::kPack:
      return std::make_unique<PackPolicy>();
    case PolicyKind::kRoundRobin:
      return std::make_unique<RoundRobinPolicy>();
    case PolicyKind::kSpread:
      break;
  }
  return std::make_unique<SpreadPolicy>();
}

}  // namespace drover::core
