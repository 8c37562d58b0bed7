// The backends behind MakeInputSource (input_source.h), one file each:
// input_evdev.cc and input_logind.cc (file: lives in input_source.cc).
// Their errors are those MakeInputSource documents.
//
// Thread safety: as InputSource.
#ifndef DROVER_WORKER_DESKTOP_INPUT_BACKENDS_H_
#define DROVER_WORKER_DESKTOP_INPUT_BACKENDS_H_

#include <memory>
#include <string>

#include "common/status.h"
#include "worker/desktop/input_source.h"

namespace drover::worker {

// Opens every event* device in `dir`; `clock` paces the look for new ones.
Result<std::unique_ptr<InputSource>> MakeEvdevInputSource(std::string dir, const Clock& clock);

// Asks loginctl once, to fail now rather than at the first LastInput().
// `env.clock` and `env.run_program` must be set.
Result<std::unique_ptr<InputSource>> MakeLogindInputSource(InputSourceEnv env);

}  // namespace drover::worker

#endif  // DROVER_WORKER_DESKTOP_INPUT_BACKENDS_H_
