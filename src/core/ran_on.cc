#include "core/ran_on.h"

#include <algorithm>

namespace drover::core {
namespace {

uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

}  // namespace

uint32_t RanOn::Intern(std::span<const uint32_t> cores, std::span<const GpuGrant> gpus) {
  if (cores.empty() && gpus.empty()) return kNone;
  uint64_t h = Mix(0, cores.size());
  for (uint32_t c : cores) h = Mix(h, c);
  for (const GpuGrant& g : gpus) {
    h = Mix(h, g.index);
    h = Mix(h, static_cast<uint64_t>(g.share));
    h = Mix(h, g.mem_bytes);
  }
  // Open addressing on the hash: a collision moves on to the next value.
  uint64_t key = h;
  for (auto it = index_.find(key); it != index_.end(); it = index_.find(++key)) {
    const Entry& e = entries_[it->second];
    if (std::equal(e.cores.begin(), e.cores.end(), cores.begin(), cores.end()) &&
        std::equal(e.gpus.begin(), e.gpus.end(), gpus.begin(), gpus.end())) {
      return it->second;
    }
  }
  if (entries_.size() >= kMaxEntries) return kNone;
  const uint32_t index = static_cast<uint32_t>(entries_.size());
  entries_.push_back(Entry{{cores.begin(), cores.end()}, {gpus.begin(), gpus.end()}});
  index_.emplace(key, index);
  return index;
}

}  // namespace drover::core
