// Placement policies: which worker a task goes to when several fit.
//
// A policy keeps its own ordered index of the candidate workers (live, not
// drained) keyed by their load, so choosing costs a walk from the preferred
// end that stops at the first worker that fits, not a scan and sort of all
// workers. The scheduler tells the policy when a worker joins the candidate
// set, leaves it, or its load changes.
//
//   spread       least loaded first: fewest running tasks, then lowest CPU
//                utilisation, then worker slot (the default); GPU shares go
//                to the most-used GPU that fits, so whole GPUs stay free.
//   pack         fullest first: fewest free cores, then fewest free whole
//                GPUs, then slot; shares go to the most-used GPU that fits,
//                keeping whole machines and whole GPUs free.
//   round-robin  the next worker after the previous choice, in join order.
//
// Thread safety: not synchronised; owned by the scheduler's thread.
#ifndef DROVER_CORE_PLACEMENT_H_
#define DROVER_CORE_PLACEMENT_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string_view>

#include "common/status.h"

namespace drover::core {

enum class PolicyKind : uint8_t { kSpread = 0, kPack = 1, kRoundRobin = 2 };

// "spread", "pack", "round-robin".
std::string_view PolicyName(PolicyKind kind);
// Parses the names above; errors list them.
Result<PolicyKind> ParsePolicy(std::string_view text);

// Sentinel for "no worker".
inline constexpr uint32_t kNoWorker = std::numeric_limits<uint32_t>::max();

// What a policy knows about one worker. `slot` is the scheduler's dense
// index of the worker (join order).
struct WorkerLoad {
  uint32_t slot = 0;
  uint32_t running_tasks = 0;
  uint32_t cpu_percent = 0;
  uint32_t free_cores = 0;
  uint32_t free_whole_gpus = 0;
};

class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  PlacementPolicy() = default;
  PlacementPolicy(const PlacementPolicy&) = delete;
  PlacementPolicy& operator=(const PlacementPolicy&) = delete;

  virtual PolicyKind kind() const = 0;

  // The worker becomes a candidate (joined or undrained). Adding a slot that
  // is already present updates it.
  virtual void Add(const WorkerLoad& load) = 0;
  // The worker stops being a candidate (lost or drained). No-op if absent.
  virtual void Remove(uint32_t slot) = 0;
  // The worker's load changed. No-op if absent.
  virtual void Update(const WorkerLoad& load) = 0;

  // Walks the candidates in preference order and returns the first slot for
  // which `fits` returns true, or kNoWorker.
  virtual uint32_t Choose(const std::function<bool(uint32_t slot)>& fits) = 0;

  // Data locality: is candidate `slot` as good a choice as `best` (the one
  // Choose returned) within the policy's tolerance, so that a task may go
  // there instead because its inputs are there? spread: it runs at most
  // one task more; pack: it has as many free whole GPUs (no whole GPU is
  // broken for locality); round-robin: always. Both must be present.
  virtual bool Comparable(uint32_t slot, uint32_t best) const = 0;

  // Within one worker: should a GPU share go to the most-used GPU that still
  // fits (true, pack) or the least-used one (false)?
  virtual bool PreferFullGpus() const = 0;
};

std::unique_ptr<PlacementPolicy> MakePolicy(PolicyKind kind);

}  // namespace drover::core

#endif  // DROVER_CORE_PLACEMENT_H_
