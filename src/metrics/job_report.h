// JobReport: what one job did, task by task — the body of
// GET /api/v1/jobs/{id}/report and the input of `drover report`.
//
//   {"job":"12", "name":.., "user":.., "state":"succeeded",
//    "submitted_at_ms":.., "started_at_ms":.., "ended_at_ms":.., "makespan_s":..,
//    "tasks":[{"id":"12.3", "name":"train[2]", "group":"train", "state":..,
//              "worker":3, "worker_name":"gpu1", "deps":["12.0"],
//              "start_ms":.., "end_ms":.., "wall_s":.., "cpu_s":.., "peak_mem_bytes":..,
//              "requested":{"cpus":2.0,"mem_bytes":..,"gpus":0.5},
//              "cpu_efficiency":0.93, "mem_efficiency":0.41, "attempts":1,
//              "critical":true, "reason":""}],
//    "critical_path":["12.0","12.3"], "critical_path_s":..,
//    "slowest":["12.3", ...]}
//
// Definitions:
// - state: "succeeded" / "failed" / "canceled" when every task is terminal
//   (failed if any failed, else canceled if any was canceled); otherwise
//   "running" once a task has started, else "pending".
// - started_at_ms: the earliest task start; ended_at_ms: the latest task end
//   once the job is done (null before); makespan_s: ended - started (while
//   running: now - started; null before anything started).
// - Per task, start_ms/end_ms/wall_s/cpu_s/peak_mem_bytes are of the last
//   attempt. A running task's wall_s is its time so far (cpu_s, peak memory
//   and efficiencies are null until it ends). wall_s is the worker's
//   measured wall time when it reported one, else end - start.
// - deps: the tasks of the groups named in `depends_on` (same job; `--after`
//   dependencies on other jobs are not shown).
// - cpu_efficiency: cpu_s / (wall_s * requested cpus); mem_efficiency:
//   peak_mem_bytes / requested mem. null when the request is 0 or the task
//   has not ended.
// - critical_path: report::CriticalPath over the tasks (critical_path.h),
//   task ids first to last; critical_path_s its summed wall time.
// - slowest: ids of the tasks with the longest wall times, slowest first,
//   at most 10 (ties by task id).
// All times are Unix milliseconds, durations seconds (floating point).
//
// Thread safety: pure functions of their arguments.
#ifndef DROVER_METRICS_JOB_REPORT_H_
#define DROVER_METRICS_JOB_REPORT_H_

#include <nlohmann/json.hpp>

#include "common/ids.h"
#include "common/status.h"
#include "common/time.h"
#include "core/scheduler.h"

namespace drover::metrics {

inline constexpr size_t kSlowestCount = 10;

// The report of `job` as of `now`. Errors: kNotFound for an unknown job.
Result<nlohmann::json> BuildJobReport(const core::Scheduler& scheduler, JobId job, Time now);

}  // namespace drover::metrics

#endif  // DROVER_METRICS_JOB_REPORT_H_
