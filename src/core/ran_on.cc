#include "core/ran_on.h"

#include <cstring>

namespace drover::core {
namespace {

void Append(std::string& key, const void* data, size_t n) {
  key.append(static_cast<const char*>(data), n);
}

}  // namespace

uint32_t RanOn::Intern(std::span<const uint32_t> cores, std::span<const GpuGrant> gpus) {
  if (cores.empty() && gpus.empty()) return kNone;
  std::string key;
  key.reserve(4 + cores.size() * 4 + gpus.size() * 20);
  const uint32_t ncores = static_cast<uint32_t>(cores.size());
  Append(key, &ncores, sizeof ncores);
  Append(key, cores.data(), cores.size_bytes());
  for (const GpuGrant& g : gpus) {
    Append(key, &g.index, sizeof g.index);
    Append(key, &g.share, sizeof g.share);
    Append(key, &g.mem_bytes, sizeof g.mem_bytes);
  }
  if (auto it = index_.find(key); it != index_.end()) return it->second;
  if (entries_.size() >= kMaxEntries) return kNone;
  const uint32_t index = static_cast<uint32_t>(entries_.size());
  entries_.push_back(Entry{{cores.begin(), cores.end()}, {gpus.begin(), gpus.end()}});
  index_.emplace(std::move(key), index);
  return index;
}

}  // namespace drover::core
