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

// How a program that ran to its end ended, for callers that judge the exit
// themselves (a health check): its wait status and what it wrote. The
// errors are RunProgram's, but for a non-zero exit or a signal, which are
// this answer.
struct ProgramRun {
  int status = 0;  // as waitpid gives it
  std::string out;
  std::string err;
  bool ok() const;  // exited with 0
  // "exited with code 1" or "was killed by signal 9".
  std::string How() const;
  // The first line of its output: stdout first, else stderr ("" if none).
  std::string FirstLine() const;
};
Result<ProgramRun> RunProgramToEnd(const std::vector<std::string>& argv, Duration timeout);

}  // namespace drover

#endif  // DROVER_COMMON_RUN_PROGRAM_H_
