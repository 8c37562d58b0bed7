// WaitForJob: `wait`, `submit --wait` and `run` wait for a job's end through
// the event stream (streams.h), never by polling, and show progress.
//
// Thread safety: main thread only (blocks).
#ifndef DROVER_CLI_WAIT_JOB_H_
#define DROVER_CLI_WAIT_JOB_H_

#include <cstdint>
#include <optional>

#include <nlohmann/json_fwd.hpp>

#include "cli/api_client.h"
#include "cli/job_watch.h"
#include "common/ids.h"
#include "common/status.h"

namespace drover::cli {

enum class Progress {
  kNone,   // print nothing
  kLines,  // one line per task change on stdout ("12.3 running (attempt 1)")
  kBar,    // a progress bar redrawn in place (stdout is a terminal)
};

// Follows the job's events until every task is terminal. `task_count` is
// the job's number of tasks when the caller knows it (it submitted the
// spec); otherwise it is read from the server first (one more request).
// Errors: the job is unknown (kNotFound), the server cannot be reached or
// stayed away for a minute.
Result<JobWatch> WaitForJob(ApiClient& api, JobId job, Progress progress,
                            std::optional<uint64_t> task_count = std::nullopt);

// The job as GET /api/v1/jobs/{id} has it, with every task: the server
// sends a page of tasks at a time (next_offset), so this asks for pages of
// `page` tasks until the last. Errors: those of the requests, or an answer
// without "tasks".
Result<nlohmann::json> GetJobWithAllTasks(ApiClient& api, JobId job, uint32_t page = 1000);

}  // namespace drover::cli

#endif  // DROVER_CLI_WAIT_JOB_H_
