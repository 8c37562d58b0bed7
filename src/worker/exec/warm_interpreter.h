// Warm interpreters: long-lived Python processes that run successive
// function calls, each inside its own task's room (docs/design.md, "Python
// functions"). The Executor keeps them (executor_warm.cc); this file holds
// what they are and how the worker talks to one.
//
// A task asks for one with DROVER_WARM=1 in its environment; its command is
// the interpreter (argv[0]) on the function runner (the Python client's
// `python -c RUNNER`). The first such task starts the interpreter like any
// task, in its cage, with DROVER_WARM_SERVE=1 and one end of a SOCK_SEQPACKET
// socket pair as its stdin; the runner then serves calls over it instead of
// running one:
//
//   call   (worker -> interpreter) one message: the task's working directory,
//          then its whole environment, NUL-separated, and last
//          DROVER_REPLY_RESULT=1 (which the call does not see); with
//          SCM_RIGHTS the write ends of the task's stdout and stderr pipes.
//   reply  (interpreter -> worker) "exit CODE CPU_US MAXRSS_KIB LAST" or
//          "signal SIG CPU_US MAXRSS_KIB LAST": how the call ended (a
//          `fresh` call's forked child may die by a signal), the CPU time
//          and peak resident size the interpreter measured for it, and 1
//          when it will exit now (DROVER_MAX_CALLS reached); then, after a
//          newline, the call's result (up to 64 KiB; a larger one, and a
//          `fresh` call's, is in $DROVER_RESULT as for any task). A runner
//          from before this ignores the request and writes the file, which
//          the worker then reads.
//
// An interpreter serves one account, one program and runner, one GPU set
// (CUDA fixes its devices at initialisation), one preload list
// (DROVER_PRELOAD) and one DROVER_MAX_CALLS: WarmKey. Without cgroups its
// rlimits are fixed at its start too, so they are part of the key there.
//
// Threading: the executor's.
#ifndef DROVER_WORKER_EXEC_WARM_INTERPRETER_H_
#define DROVER_WORKER_EXEC_WARM_INTERPRETER_H_

#include <sched.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "common/unique_fd.h"
#include "worker/exec/executor.h"

namespace drover::worker {

// One warm interpreter: its process, and the worker's end of its socket.
struct WarmInterpreter {
  std::string key;
  pid_t pid = -1;
  UniqueFd pidfd;   // watched while idle; the task's while it runs a call
  UniqueFd socket;  // the worker's end: calls out, replies in
  uint64_t calls = 0;
  bool retiring = false;  // killed or exiting: never given another call
  Stopwatch idle_since;
  // The cage it waits in between calls: its last call's, where it was the
  // only process left (cgroup v1), refitted for its next call; null when
  // it waits in the executor's warm cage and is moved for each call.
  std::unique_ptr<TaskCage> cage;
  std::vector<int> cores;  // its last call's: an idle one on a call's cores is taken first
};

// How one call ended, as the interpreter reports it.
struct WarmReply {
  int exit_code = -1;  // when the call returned an exit code
  int signal = 0;      // when a `fresh` call's child died by a signal
  Duration cpu{0};
  uint64_t peak_memory = 0;  // bytes
  bool last = false;         // the interpreter exits now
  // The call's result text, when the interpreter sent it with the reply
  // (asked by kReplyResult in the call's environment) instead of writing
  // $DROVER_RESULT: one file fewer per call.
  std::optional<std::string> result;
};

// The largest reply read: a status line and a result of up to 64 KiB.
inline constexpr size_t kMaxReplyBytes = 128 << 10;

// Set in a call's environment (not the task's: the runner takes it out),
// it asks the interpreter to send the call's result with its reply.
inline constexpr const char* kReplyResult = "DROVER_REPLY_RESULT=1";

// Whether `spec` asks for a warm interpreter (DROVER_WARM=1).
bool WantsWarm(const TaskSpec& spec);

// What an interpreter for `spec` must share with it (see above). `uid` is
// the account the task runs as; `limits`: the rlimits are in the key.
std::string WarmKey(const TaskSpec& spec, const std::string& exe, uid_t uid, bool limits);

// A SOCK_SEQPACKET pair, both ends close-on-exec: [0] the worker's
// (non-blocking), [1] the interpreter's stdin (the spawn dups it).
Result<std::pair<UniqueFd, UniqueFd>> MakeWarmSocket();

// Sends one call: `cwd`, `environment` ("K=V" each), and the two write
// ends; with `reply_result` also kReplyResult. Fails when the interpreter
// is gone or the message is too large.
Status SendCall(int socket, const std::string& cwd, const std::vector<std::string>& environment,
                int stdout_fd, int stderr_fd, bool reply_result = false);

// Reads a reply. Unavailable: none is there yet; Aborted: the socket closed
// (the interpreter died); InvalidArgument: a reply that does not parse.
Result<WarmReply> ReadReply(int socket);

// Pins every thread of `pid` to `cpus`. Best effort for threads that end
// meanwhile; fails when none could be pinned.
Status PinThreads(pid_t pid, const cpu_set_t& cpus);

}  // namespace drover::worker

#endif  // DROVER_WORKER_EXEC_WARM_INTERPRETER_H_
