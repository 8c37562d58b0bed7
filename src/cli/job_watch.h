// JobWatch: what a client waiting for a job knows, built from the event
// stream (WebSocket /api/v1/events?job=N): the latest state of each task.
// The stream starts with a snapshot (one event per task, from == to), then
// sends every change, so the watch is complete once it has seen each of the
// job's tasks, and the job is over when all of them are terminal.
//
// Pure: no I/O, so `wait`, `submit --wait` and `run` share it and tests feed
// it events directly.
//
// Thread safety: a plain value.
#ifndef DROVER_CLI_JOB_WATCH_H_
#define DROVER_CLI_JOB_WATCH_H_

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace drover::cli {

// One decoded event-stream message.
struct TaskEventView {
  std::string task;  // "12.3"
  std::string from;
  std::string to;  // a state name ("running")
  uint32_t attempt = 0;
  std::string reason;
};

// Decodes {"type":"task_state","task":"12.3","from":..,"to":..,
// "attempt":..,"reason":..}. kInvalidArgument for other text; kNotFound for
// a well-formed message of another type (to be skipped).
Result<TaskEventView> DecodeTaskEventView(std::string_view text);

// The task_state events of one message: a single event, or a JSON array
// of them (a stream opened with ?batch=true), in order. Elements that are
// not task_state events are skipped; kInvalidArgument for text that is
// neither.
Result<std::vector<TaskEventView>> DecodeTaskEvents(std::string_view text);

class JobWatch {
 public:
  // `task_count`: how many tasks the job has (GET /api/v1/jobs/{id}).
  explicit JobWatch(uint64_t task_count) : task_count_(task_count) {}

  // Records the event. Returns true when it changed what is known (a new
  // task, or a new state or attempt of a known one); a repeated snapshot
  // entry after a reconnect returns false.
  bool Apply(const TaskEventView& event);

  // Every task seen and terminal.
  bool done() const;
  // Tasks in a state ("failed"), among those seen.
  uint64_t count(std::string_view state) const;
  uint64_t seen() const { return tasks_.size(); }
  uint64_t task_count() const { return task_count_; }
  // Done and every task succeeded.
  bool succeeded() const { return done() && count("succeeded") == task_count_; }

  // How the job ended, for a person: one task "task 12.0 failed (attempt
  // 2): exit code 3" (reason when not succeeded, attempt past the first);
  // several "7 succeeded, 1 failed" (states with no task left out).
  std::string EndLine() const;

  // "[########............] 5/9 done  2 running  1 queued  1 failed",
  // `width` characters of bar.
  std::string ProgressLine(int width = 24) const;

 private:
  struct Known {
    std::string state;
    uint32_t attempt = 0;
    std::string reason;
  };
  // Moves one task's count from `from` (none when empty) to `to`.
  void Recount(std::string_view from, std::string_view to);

  uint64_t task_count_;
  std::map<std::string, Known> tasks_;
  // How many of tasks_ are in each state, and in a terminal one: done(),
  // count() and ProgressLine() answer without a pass over the tasks, which
  // for a job of 100,000 tasks would be one per event.
  std::map<std::string, uint64_t, std::less<>> counts_;
  uint64_t terminal_ = 0;
};

// True for "succeeded", "failed", "canceled".
bool IsTerminalStateName(std::string_view state);

}  // namespace drover::cli

#endif  // DROVER_CLI_JOB_WATCH_H_
