// The result cache's functions over State (result_cache.h).
#ifndef DROVER_CORE_RESULT_CACHE_OPS_H_
#define DROVER_CORE_RESULT_CACHE_OPS_H_

#include <cstdint>

#include "core/scheduler_state.h"

namespace drover::core {

// `r` is ready to be queued for its first attempt: with `cache` on its
// group, its key is computed (kept in its Extra) and, on a usable entry,
// it succeeds at once from that entry. True when it did.
bool TryResultCache(State& s, TaskRef r);
// `r` succeeded by running: its key, if it has one, now names it (unless
// another task already holds the key).
void NoteCacheable(State& s, TaskRef r);
// Job slot `slot` is being forgotten: its entries go.
void ForgetCached(State& s, uint32_t slot);
// The copy of task `source`'s outputs on `holder` is corrupt (a fetch of
// a task reused from it said so): with no other copy its entry goes, and
// a task with its key runs.
void DropCorruptSource(State& s, TaskId source, WorkerId holder);
// ForgetCacheEntries (events.h).
Status OnForgetCacheEntries(State& s, const ForgetCacheEntries& e);
// FinishRestore: the keys of the restored successes that ran, and each
// job's count of hits.
void RestoreResultCache(State& s);

}  // namespace drover::core

#endif  // DROVER_CORE_RESULT_CACHE_OPS_H_
