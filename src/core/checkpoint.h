// Checkpoint: the latest saved $DROVER_CHECKPOINT_DIR of a task, as a
// manifest of files kept in the server's file store (docs/design.md, "Data
// plane"). The worker running an attempt saves the directory while it runs
// and when it ends, uploads the files, then reports the manifest
// (CheckpointSaved); the core keeps the latest one per task, journals it
// (CheckpointRecord) and hands it to the task's next attempt
// (AssignTask::checkpoint), wherever it runs.
//
// Thread safety: plain values.
#ifndef DROVER_CORE_CHECKPOINT_H_
#define DROVER_CORE_CHECKPOINT_H_

#include <cstdint>
#include <vector>

#include "common/ids.h"
#include "common/time.h"
#include "core/model.h"

namespace drover::core {

struct Checkpoint {
  uint32_t attempt = 0;  // the attempt that saved it
  WorkerId worker = 0;   // where that attempt ran
  Time saved_at;         // when the core accepted it
  // Relative names (OutputNameProblem), sizes and SHA-256s; never empty.
  std::vector<OutputFile> files;
  friend bool operator==(const Checkpoint&, const Checkpoint&) = default;
};

}  // namespace drover::core

#endif  // DROVER_CORE_CHECKPOINT_H_
