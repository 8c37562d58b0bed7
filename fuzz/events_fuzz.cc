// libFuzzer target: the event-stream decoder the CLI runs on every message
// from the server (one task_state event, or a JSON array of them with
// ?batch=true). Whatever it accepts is a whole event: a task and a state.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cli/job_watch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto events = drover::cli::DecodeTaskEvents(text);
  if (!events.ok()) return 0;
  for (const drover::cli::TaskEventView& e : *events) {
    if (e.task.empty() || e.to.empty()) std::abort();
  }
  return 0;
}
