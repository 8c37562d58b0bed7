// WaitForJob: `wait`, `submit --wait` and `run` wait for a job's end through
// the event stream (streams.h), never by polling, and show progress.
//
// Thread safety: main thread only (blocks).
#ifndef DROVER_CLI_WAIT_JOB_H_
#define DROVER_CLI_WAIT_JOB_H_

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

// Reads the job's task count, then follows its events until every task is
// terminal. Errors: the job is unknown (kNotFound), the server cannot be
// reached or stayed away for a minute.
Result<JobWatch> WaitForJob(ApiClient& api, JobId job, Progress progress);

}  // namespace drover::cli

#endif  // DROVER_CLI_WAIT_JOB_H_
