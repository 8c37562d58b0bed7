#include "core/worker_state.h"

#include <algorithm>
#include <functional>

namespace drover::core {

WorkerState::WorkerState(WorkerId id, WorkerResources resources)
    : id_(id), resources_(std::move(resources)) {
  free_cores_ = resources_.cpu_cores;
  std::sort(free_cores_.begin(), free_cores_.end(), std::greater<>());
  free_mem_ = resources_.mem_bytes;
  gpus_.resize(resources_.gpus.size());
  free_whole_gpus_ = static_cast<uint32_t>(gpus_.size());
  free_counters_ = resources_.counters;
}

bool WorkerState::GpuMatches(size_t i, const ResourceRequest& r) const {
  const GpuDevice& d = resources_.gpus[i];
  return d.memory_bytes >= r.gpu_mem_bytes && GpuModelAccepted(r.gpu_types, d.model);
}

bool WorkerState::LabelsMatch(const ResourceRequest& r) const {
  for (const auto& [key, value] : r.labels) {
    auto it = resources_.labels.find(key);
    if (it == resources_.labels.end() || it->second != value) return false;
  }
  return true;
}

bool WorkerState::CanEverFit(const ResourceRequest& r) const {
  if (resources_.cpu_cores.size() < r.CoreCount() || resources_.mem_bytes < r.mem_bytes) {
    return false;
  }
  if (!LabelsMatch(r)) return false;
  if (r.private_network && !resources_.private_network) return false;
  if (r.container && !ContainerFits(r)) return false;
  for (const auto& [name, amount] : r.counters) {
    auto it = resources_.counters.find(name);
    if (it == resources_.counters.end() || it->second < amount) return false;
  }
  if (r.gpus == 0) return true;
  uint32_t matching = 0;
  for (size_t i = 0; i < gpus_.size(); ++i) matching += GpuMatches(i, r) ? 1 : 0;
  return matching >= r.GpuCount();
}

bool WorkerState::CountersFit(const ResourceRequest& r) const {
  for (const auto& [name, amount] : r.counters) {
    auto it = free_counters_.find(name);
    if (it == free_counters_.end() || it->second < amount) return false;
  }
  return true;
}

int WorkerState::PickShareGpu(const ResourceRequest& r, bool prefer_full) const {
  int best = -1;
  for (size_t i = 0; i < gpus_.size(); ++i) {
    const Gpu& g = gpus_[i];
    if (g.out || g.whole || g.share_used + r.gpus > kWholeGpu || !GpuMatches(i, r)) continue;
    if (g.mem_used + r.gpu_mem_bytes > resources_.gpus[i].memory_bytes) continue;
    if (best < 0 || (prefer_full ? g.share_used > gpus_[best].share_used
                                 : g.share_used < gpus_[best].share_used)) {
      best = static_cast<int>(i);
    }
  }
  return best;
}

uint32_t WorkerState::MatchingFreeWholeGpus(const ResourceRequest& r) const {
  uint32_t n = 0;
  for (size_t i = 0; i < gpus_.size(); ++i) {
    if (!gpus_[i].out && !gpus_[i].whole && gpus_[i].share_used == 0 && GpuMatches(i, r)) ++n;
  }
  return n;
}

int64_t WorkerState::PickShareCore(const ResourceRequest& r) const {
  int64_t best = -1;
  int64_t best_used = -1;
  for (const auto& [core, used] : shared_cores_) {
    if (used + r.cpus_milli <= 1000 && used > best_used) {
      best = core;
      best_used = used;
    }
  }
  return best;
}

bool WorkerState::CoresFit(const ResourceRequest& r) const {
  if (r.IsCoreShare()) return !free_cores_.empty() || PickShareCore(r) >= 0;
  return free_cores_.size() >= r.CoreCount();
}

uint32_t WorkerState::Shortfall(const ResourceRequest& r) const {
  uint32_t dims = 0;
  if (!CoresFit(r)) dims |= kDimCores;
  if (free_mem_ < r.mem_bytes) dims |= kDimMem;
  if (r.gpus > 0) {
    bool gpus_ok = r.IsGpuShare() ? PickShareGpu(r, false) >= 0
                                  : MatchingFreeWholeGpus(r) >= r.GpuCount();
    if (!gpus_ok) dims |= kDimGpus;
  }
  if (!CountersFit(r)) dims |= kDimCounters;
  return dims;
}

bool WorkerState::Fits(const ResourceRequest& r, bool prefer_full_gpus) const {
  (void)prefer_full_gpus;  // which GPU, not whether one fits
  if (!CoresFit(r) || free_mem_ < r.mem_bytes) return false;
  if (!r.labels.empty() && !LabelsMatch(r)) return false;
  if (r.private_network && !resources_.private_network) return false;
  if (r.container && !ContainerFits(r)) return false;
  if (!DiskFits(r)) return false;
  if (r.gpus > 0) {
    if (r.IsGpuShare()) {
      if (PickShareGpu(r, false) < 0) return false;
    } else if (free_whole_gpus_ < r.GpuCount() || MatchingFreeWholeGpus(r) < r.GpuCount()) {
      return false;
    }
  }
  return CountersFit(r);
}

bool WorkerState::Allocate(const ResourceRequest& r, bool prefer_full_gpus, Allocation& out) {
  if (!Fits(r, prefer_full_gpus)) return false;
  out.cores.clear();
  out.gpus.clear();
  if (r.IsCoreShare()) {
    int64_t core = PickShareCore(r);
    if (core < 0) {
      core = free_cores_.back();
      free_cores_.pop_back();
    }
    shared_cores_[static_cast<uint32_t>(core)] += r.cpus_milli;
    out.cores.push_back(static_cast<uint32_t>(core));
  } else {
    const uint32_t ncores = r.CoreCount();
    out.cores.reserve(ncores);
    for (uint32_t i = 0; i < ncores; ++i) {
      out.cores.push_back(free_cores_.back());
      free_cores_.pop_back();
    }
  }
  free_mem_ -= r.mem_bytes;
  out.mem_bytes = r.mem_bytes;
  if (r.IsGpuShare()) {
    int i = PickShareGpu(r, prefer_full_gpus);
    Gpu& g = gpus_[i];
    if (g.share_used == 0) --free_whole_gpus_;
    g.share_used += r.gpus;
    g.mem_used += r.gpu_mem_bytes;
    out.gpus.push_back(GpuGrant{resources_.gpus[i].index, r.gpus, r.gpu_mem_bytes});
  } else if (r.gpus > 0) {
    uint32_t need = r.GpuCount();
    for (size_t i = 0; i < gpus_.size() && need > 0; ++i) {
      Gpu& g = gpus_[i];
      if (g.out || g.whole || g.share_used != 0 || !GpuMatches(i, r)) continue;
      g.whole = true;
      g.share_used = kWholeGpu;
      g.mem_used = resources_.gpus[i].memory_bytes;
      --free_whole_gpus_;
      --need;
      out.gpus.push_back(GpuGrant{resources_.gpus[i].index, kWholeGpu, g.mem_used});
    }
  }
  for (const auto& [name, amount] : r.counters) free_counters_[name] -= amount;
  return true;
}

bool WorkerState::AllocateExact(const ResourceRequest& r, const Allocation& a) {
  const bool share = r.IsCoreShare() && a.cores.size() == 1;
  for (uint32_t core : a.cores) {
    if (share) {
      auto it = shared_cores_.find(core);
      if (it != shared_cores_.end() && it->second + r.cpus_milli <= 1000) continue;
    }
    if (std::find(free_cores_.begin(), free_cores_.end(), core) == free_cores_.end()) return false;
  }
  if (free_mem_ < a.mem_bytes || !CountersFit(r)) return false;
  for (const GpuGrant& grant : a.gpus) {
    auto it = std::find_if(resources_.gpus.begin(), resources_.gpus.end(),
                           [&](const GpuDevice& d) { return d.index == grant.index; });
    if (it == resources_.gpus.end()) return false;
    const Gpu& g = gpus_[it - resources_.gpus.begin()];
    if (g.whole || g.share_used + grant.share > kWholeGpu ||
        g.mem_used + grant.mem_bytes > it->memory_bytes) {
      return false;
    }
  }
  for (uint32_t core : a.cores) {
    if (share) {
      auto [it, added] = shared_cores_.try_emplace(core, 0);
      it->second += r.cpus_milli;
      if (!added) continue;
    }
    free_cores_.erase(std::find(free_cores_.begin(), free_cores_.end(), core));
  }
  free_mem_ -= a.mem_bytes;
  for (const GpuGrant& grant : a.gpus) {
    size_t i = std::find_if(resources_.gpus.begin(), resources_.gpus.end(),
                            [&](const GpuDevice& d) { return d.index == grant.index; }) -
               resources_.gpus.begin();
    Gpu& g = gpus_[i];
    if (g.share_used == 0 && !g.out) --free_whole_gpus_;
    g.share_used += grant.share;
    g.mem_used += grant.mem_bytes;
    g.whole = grant.share >= kWholeGpu;
  }
  for (const auto& [name, amount] : r.counters) free_counters_[name] -= amount;
  return true;
}

void WorkerState::Free(const ResourceRequest& r, const Allocation& a) {
  for (uint32_t core : a.cores) {
    if (r.IsCoreShare()) {
      auto it = shared_cores_.find(core);
      if (it != shared_cores_.end()) {
        it->second -= r.cpus_milli;
        if (it->second > 0) continue;  // other shares still use it
        shared_cores_.erase(it);
      }
    }
    free_cores_.insert(
        std::upper_bound(free_cores_.begin(), free_cores_.end(), core, std::greater<>()), core);
  }
  free_mem_ += a.mem_bytes;
  for (const GpuGrant& grant : a.gpus) {
    for (size_t i = 0; i < gpus_.size(); ++i) {
      if (resources_.gpus[i].index != grant.index) continue;
      Gpu& g = gpus_[i];
      g.share_used -= grant.share;
      g.mem_used -= grant.mem_bytes;
      g.whole = false;
      if (g.share_used == 0 && !g.out) ++free_whole_gpus_;
      break;
    }
  }
  for (const auto& [name, amount] : r.counters) free_counters_[name] += amount;
}

std::vector<uint32_t> WorkerState::free_cores() const {
  return std::vector<uint32_t>(free_cores_.rbegin(), free_cores_.rend());
}

int64_t WorkerState::gpu_free_share(size_t i) const {
  return gpus_[i].out ? 0 : kWholeGpu - gpus_[i].share_used;
}

void WorkerState::SetGpuOut(uint32_t index, bool out) {
  for (size_t i = 0; i < gpus_.size(); ++i) {
    if (resources_.gpus[i].index != index) continue;
    Gpu& g = gpus_[i];
    if (g.out == out) return;
    if (g.share_used == 0 && !g.whole) {
      if (out) {
        --free_whole_gpus_;
      } else {
        ++free_whole_gpus_;
      }
    }
    g.out = out;
    return;
  }
}
uint64_t WorkerState::gpu_free_mem(size_t i) const {
  return resources_.gpus[i].memory_bytes - gpus_[i].mem_used;
}

}  // namespace drover::core
