// Small helpers shared by the files of WorkerState (worker_state.h); internal
// to src/worker/state.
#ifndef DROVER_WORKER_STATE_WORKER_STATE_TEXT_H_
#define DROVER_WORKER_STATE_WORKER_STATE_TEXT_H_

#include <cstdint>
#include <string>
#include <utility>

#include "common/ids.h"
#include "worker/state/worker_state.h"

namespace drover::worker::internal {

// "12.3#2".
inline std::string AttemptName(TaskId task, uint32_t attempt) {
  return task.ToString() + "#" + std::to_string(attempt);
}

inline void Log(WorkerOutbox& out, LogLevel level, std::string text) {
  out.push_back(LogLine{level, std::move(text)});
}

}  // namespace drover::worker::internal

#endif  // DROVER_WORKER_STATE_WORKER_STATE_TEXT_H_
