// The result cache (docs/design.md, "Result cache"): a task group with
// `cache` has each task's key computed when it becomes ready, and a key an
// earlier success of the same user had makes the task succeed at once,
// with that success's result and outputs (held where they are), without
// running.
//
// The key is the SHA-256 of, in order: the job's user (or its group, when
// the group shares its cache: UserPolicy::cache_sharing_groups); the command with
// {index} expanded; the environment; the uploaded input files' names and
// SHA-256; the `code` files' paths and SHA-256 (hashed by the client);
// and for each dependency whose result or selected outputs it receives,
// the producer's group and index in it (an --after task: its place among
// those that give it something), its result, and each selected output's
// name, size and SHA-256. Resources, the worker, and the job and task ids
// are not in it, so an edited job file submitted again reuses what did not
// change.
//
// An entry is the task that ran (not a copy of its outcome): it is used
// while that task's job is kept, the task still succeeded, its outputs'
// holder (or a replica) is attached, and, once its job ended, for the
// server's --cache-keep (`keep_outputs`) after, when the workers release
// them, while the entries hold no more than `max_bytes` (the oldest go)
// them (a job that holds entries keeps its outputs that long; Job::
// cache_entries counts them). Entries are not journaled: a restore computes the keys of the
// restored successes again. A forgotten job takes its entries with it.
//
// Internal to src/core: the state lives in State; the functions are in
// result_cache_ops.h.
#ifndef DROVER_CORE_RESULT_CACHE_H_
#define DROVER_CORE_RESULT_CACHE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/ids.h"
#include "common/time.h"

namespace drover::core {

struct ResultCacheConfig {
  // The SHA-256 of bytes as hex (the shell's; the core computes none of
  // its own). Null: no cache, every task runs.
  std::function<std::string(std::string_view)> digest;
  // How long a job that holds entries keeps its outputs after it ended
  // (the server's --cache-keep, at least its --keep-outputs): an entry
  // with outputs is not used past that.
  Duration keep_outputs = Seconds(24 * 3600);
  // The most bytes of outputs entries may hold (the server's
  // --cache-max-size); past it the oldest entries go, down to 90% of it,
  // and their jobs' outputs are kept as any others. 0: no cap.
  uint64_t max_bytes = 0;
};

struct ResultCache {
  struct Entry {
    TaskId task;         // the task that ran
    uint64_t bytes = 0;  // of its outputs
    int64_t at_us = 0;   // when it ended
  };
  std::unordered_map<std::string, Entry> entries;  // key -> its entry
  uint64_t bytes = 0;                              // of all entries
  uint64_t hits = 0;
};

}  // namespace drover::core

#endif  // DROVER_CORE_RESULT_CACHE_H_
