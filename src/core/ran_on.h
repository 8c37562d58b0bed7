// RanOn: where ended attempts ran, for a task's cores and GPUs after its
// end (TaskInfo::cores/gpus, "keep what it ran on").
//
// Each distinct placement (core ids and GPU grants, the worker aside) is
// kept once and shared by every task that ran on it; a task holds only its
// 32-bit index (Task::ran_on), which fits in the Task's padding, so a
// finished task keeps its placement at no cost of its own. The set of
// distinct placements is bounded by what workers offer; past kMaxEntries
// (a hostile or pathological pool) new placements are not kept and those
// tasks show none.
//
// Invariants: entries never change or go away while the scheduler lives,
// so an index once given stays valid; equal placements get equal indexes.
//
// Thread safety: none; owned by the scheduler's State.
#ifndef DROVER_CORE_RAN_ON_H_
#define DROVER_CORE_RAN_ON_H_

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/resources.h"

namespace drover::core {

class RanOn {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;
  static constexpr size_t kMaxEntries = size_t{1} << 16;

  struct Entry {
    std::vector<uint32_t> cores;
    std::vector<GpuGrant> gpus;
  };

  // The index of this placement, added if new; kNone when nothing ran on
  // anything (no cores, no GPUs) or the set is full.
  uint32_t Intern(std::span<const uint32_t> cores, std::span<const GpuGrant> gpus);
  // The entry behind an index Intern gave; null for kNone.
  const Entry* Get(uint32_t index) const {
    return index < entries_.size() ? &entries_[index] : nullptr;
  }
  size_t size() const { return entries_.size(); }

 private:
  std::vector<Entry> entries_;
  // Hash of the placement -> its entry; a collision takes the next free
  // hash value (Intern compares the entry).
  std::unordered_map<uint64_t, uint32_t> index_;
};

}  // namespace drover::core

#endif  // DROVER_CORE_RAN_ON_H_
