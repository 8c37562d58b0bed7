// CommandCache: where a task's program was found on PATH, remembered for
// the tasks that follow, so that an array of N tasks searches PATH once
// instead of N times.
//
// Finding `sleep` on a PATH of 16 directories costs 16 stat calls that
// fail and one that succeeds, before every task, on the worker's event
// loop while the previous task is starting. The cache keeps each hit for
// (command, PATH) and re-checks it with the usual stat + access before use:
//   - a miss is never remembered: a command installed after a "command not
//     found" is found by the next task;
//   - a remembered program that was removed or lost its execute bit is
//     searched for again (and found elsewhere on PATH, or reported);
//   - a hit is trusted for at most `max_age` (2 s by default): a program
//     installed meanwhile in a directory earlier on PATH than the
//     remembered one takes over after that at the latest (a shell's command
//     hash keeps the old one until `hash -r`).
// A command with a '/' and a PATH with a relative entry ("", ".", "bin")
// are never cached: their meaning depends on the working directory.
//
// Threading: none; the owner's thread (the executor's event loop).
#ifndef DROVER_WORKER_EXEC_COMMAND_CACHE_H_
#define DROVER_WORKER_EXEC_COMMAND_CACHE_H_

#include <chrono>
#include <functional>
#include <string>
#include <unordered_map>

#include "common/status.h"
#include "common/time.h"

namespace drover::worker {

class CommandCache {
 public:
  // `clock` reads the time that hits age by (its Monotonic reading; tests
  // pass a SimulatedClock). It must outlive the cache.
  explicit CommandCache(Duration max_age = Seconds(2), const Clock& clock = SystemClock());

  // ResolveCommand(command, path_env, cwd) (spawn.h), answered from the
  // cache when it holds a fresh hit that is still an executable file.
  // Fails as ResolveCommand does ("command not found: X", "permission
  // denied: X"); a failure forgets what was remembered for the command.
  Result<std::string> Resolve(const std::string& command, const std::string& path_env,
                              const std::string& cwd);

  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::string path;
    Duration found;  // Clock::Monotonic
  };
  Duration max_age_;
  const Clock& clock_;
  std::unordered_map<std::string, Entry> entries_;  // key: command '\0' PATH
};

}  // namespace drover::worker

#endif  // DROVER_WORKER_EXEC_COMMAND_CACHE_H_
