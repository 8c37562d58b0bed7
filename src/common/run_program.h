// RunProgram: starts a program (found in PATH like a shell would), waits
// for it to end within a deadline and returns what it wrote. For short
// helper commands whose output is the answer: nvidia-smi, sbatch, squeue.
//
// The program gets /dev/null as stdin, runs in its own process group (a
// timeout kills whatever it started too) and inherits the environment.
//
// Thread safety: safe from any thread; it blocks the caller until the
// program ends or the deadline passes, so callers on an event loop run it
// on a thread of their own.
#ifndef DROVER_COMMON_RUN_PROGRAM_H_
#define DROVER_COMMON_RUN_PROGRAM_H_

#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"

namespace drover {

// Its standard output when it exits with 0. Errors: NotFound (no such
// program), FailedPrecondition (not executable; or it exited non-zero or
// was killed: "PROGRAM exited with code 1: <first line it wrote>", stdout
// first, else stderr), DeadlineExceeded (killed at the deadline),
// ResourceExhausted (above 1 MiB of output), Internal (a system call).
Result<std::string> RunProgram(const std::vector<std::string>& argv, Duration timeout);

}  // namespace drover

#endif  // DROVER_COMMON_RUN_PROGRAM_H_
