// The quarantine's reactor functions over State (quarantine.h).
#ifndef DROVER_CORE_QUARANTINE_OPS_H_
#define DROVER_CORE_QUARANTINE_OPS_H_

#include <cstdint>

#include "core/scheduler_state.h"

namespace drover::core {

// Notes how an attempt of `r` on worker slot `w` ended (`failure`: the
// task's own failure, not a vacate, preemption or cancel), and judges the
// workers it bears on. True when `w` is quarantined now: its attempt then
// uses no retry.
bool NoteAttemptEnd(State& s, uint32_t w, TaskRef r, bool failure);
// Notes that an attempt of `r` started on worker slot `w`: once it has run
// a short attempt's length without failing, its group does not fail
// quickly there.
void NoteAttemptStart(State& s, uint32_t w, TaskRef r);
// Ends the quarantines whose cool-down is over (OnTick).
void EndQuarantines(State& s);
// Ends `w`'s quarantine now (an admin's undrain).
void LiftQuarantine(State& s, uint32_t w);
// Worker slot `w` joined: it takes up the quarantine its id is in (one a
// restore replayed), or leaves it if the cool-down ended meanwhile.
void ResumeQuarantine(State& s, uint32_t w);
// The quarantine of worker `id` (book entry with until_us and why), or
// null when it is not in one.
const QuarantineBook::PerWorker* QuarantineOf(const State& s, WorkerId id);

// Restore (restore.cc): the attempt a journaled record ends or names,
// noted before the record changes `r`'s task; a task still running at the
// end of the replay, noted by FinishRestore; then the replay of them all,
// in time order, up to now.
void NoteRestoredRecord(State& s, TaskRef r, const TaskRecord& record);
void NoteRestoredRunning(State& s, TaskRef r);
void ReplayRestoredAttempts(State& s);

}  // namespace drover::core

#endif  // DROVER_CORE_QUARANTINE_OPS_H_
