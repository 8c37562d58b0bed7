// Views: the text the read commands print, made from the API's JSON (shapes
// in proto/api_json.h). They only format; fetching is the commands' job.
//
// Fields that are missing or of an unexpected type print as "-" rather
// than failing, so a newer server with more (or renamed) fields still gives
// a readable table; `--json` shows everything as sent.
//
// Thread safety: pure functions.
#ifndef DROVER_CLI_VIEWS_H_
#define DROVER_CLI_VIEWS_H_

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace drover::cli {

// {"jobs":[...]} as a table: ID NAME USER TASKS STATE SUBMITTED.
std::string JobsView(const nlohmann::json& list);

// One job with its tasks ({job fields..., "tasks":[...]}): a header line
// and a table TASK GROUP INDEX STATE ATTEMPT WORKER TIME REASON. `now_ms`
// (Unix ms) gives running tasks their elapsed time.
std::string JobView(const nlohmann::json& job, int64_t now_ms);

// Just the task table of JobView (the run summary).
std::string TaskTable(const nlohmann::json& tasks, int64_t now_ms);

// One task: "key: value" lines (state, reason, attempt, worker, times,
// resources, outcome, result) and the scheduler's explanation.
std::string TaskView(const nlohmann::json& task, int64_t now_ms);

// {"workers":[...]} as a table: ID NAME STATE CORES MEM GPUS TASKS CPU%.
std::string WorkersView(const nlohmann::json& list);

// "3 succeeded, 1 running" from a job's "counts" object (zero counts
// omitted, in lifecycle order); "-" when there are none.
std::string CountsSummary(const nlohmann::json& counts);

// "1.2s", "3m04s", "2h05m" for a span in milliseconds; "-" when negative.
std::string FormatSpan(int64_t ms);

}  // namespace drover::cli

#endif  // DROVER_CLI_VIEWS_H_
