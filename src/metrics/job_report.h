// JobReport: what one job did, task by task — the body of
// GET /api/v1/jobs/{id}/report and the input of `drover report`.
//
//   {"job":"12", "name":.., "user":.., "state":"succeeded",
//    "submitted_at_ms":.., "started_at_ms":.., "ended_at_ms":.., "makespan_s":..,
//    "tasks":[{"id":"12.3", "name":"train[2]", "group":"train", "state":..,
//              "worker":3, "worker_name":"gpu1", "deps":["12.0"],
//              "start_ms":.., "end_ms":.., "wall_s":.., "cpu_s":.., "peak_mem_bytes":..,
//              "io_read_bytes":.., "io_write_bytes":..,
//              "requested":{"cpus":2.0,"mem_bytes":..,"gpus":0.5},
//              "cpu_efficiency":0.93, "mem_efficiency":0.41, "attempts":1,
//              "critical":true, "reason":"", "deps_count":1}],
//    "critical_path":["12.0","12.3"], "critical_path_s":..,
//    "slowest":["12.3", ...], "task_count":4}
//
// Definitions:
// - state: "succeeded" / "failed" / "canceled" when every task is terminal
//   (failed if any failed, else canceled if any was canceled); otherwise
//   "running" once a task has started, else "pending".
// - started_at_ms: the earliest task start; ended_at_ms: the latest task end
//   once the job is done (null before); makespan_s: ended - started (while
//   running: now - started; null before anything started).
// - Per task, start_ms/end_ms/wall_s/cpu_s/peak_mem_bytes are of the last
//   attempt, and so are io_read_bytes/io_write_bytes, the bytes it read
//   from and wrote to disk where its cgroup counted them (null elsewhere). A running task's wall_s
//   is its time so far (cpu_s, peak memory and efficiencies are null until it ends). wall_s is the
//   worker's measured wall time when it reported one, else end - start.
// - deps: the tasks of the groups named in `depends_on` (same job; `--after`
//   dependencies on other jobs are not shown), at most kMaxDepsListed of
//   them (the first ones); deps_count: how many there are.
// - cpu_efficiency: cpu_s / (wall_s * requested cpus); mem_efficiency:
//   peak_mem_bytes / requested mem. null when the request is 0 or the task
//   has not ended.
// - critical_path: report::CriticalPath over the tasks (critical_path.h),
//   task ids first to last; critical_path_s its summed wall time.
// - slowest: ids of the tasks with the longest wall times, slowest first,
//   at most 10 (ties by task id).
// - tasks: the rows of one page (ReportPage; all of them by default): the
//   figures above are over every task, the rows only those asked for.
// All times are Unix milliseconds, durations seconds (floating point).
//
// Cost: one pass over the job's tasks, keeping per task group only its
// longest task (every task of a group has the same dependencies, so the
// critical path runs through groups' longest tasks and the last task to
// end), and the kSlowestCount longest; rows are built for the page only.
// JobReportScan cuts the pass into steps so a server can spread a
// million-task job over many loop turns.
//
// Thread safety: pure functions of their arguments.
#ifndef DROVER_METRICS_JOB_REPORT_H_
#define DROVER_METRICS_JOB_REPORT_H_

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "common/time.h"
#include "core/scheduler.h"

namespace drover::metrics {

inline constexpr size_t kSlowestCount = 10;
inline constexpr size_t kMaxDepsListed = 100;

// Which task rows a report holds: `limit` rows from task index `offset`.
struct ReportPage {
  uint64_t offset = 0;
  uint64_t limit = UINT64_MAX;
};

// A report built a slice of tasks at a time. Tasks that change between
// steps are seen as they are when their step reaches them.
//
//   ASSIGN_OR_RETURN(JobReportScan scan, JobReportScan::Start(sched, job, now));
//   while (!scan.Step(sched, 20000)) { ...let other work run... }
//   ASSIGN_OR_RETURN(json report, scan.Finish(sched, page));
class JobReportScan {
 public:
  // Errors: kNotFound for an unknown job.
  static Result<JobReportScan> Start(const core::Scheduler& scheduler, JobId job, Time now);
  // Looks at up to `max_tasks` more tasks; true once every task was seen.
  // A job that went away meanwhile counts as seen (Finish says kNotFound).
  bool Step(const core::Scheduler& scheduler, uint64_t max_tasks);
  // The report, after Step returned true, with the rows of `page`.
  // Errors: kNotFound when the job is gone.
  Result<nlohmann::json> Finish(const core::Scheduler& scheduler, ReportPage page = {}) const;

  uint64_t task_count() const { return count_; }

  // One task's timing, as the report counts it.
  struct Timing {
    std::optional<Duration> wall;  // of the last attempt (so far, while running)
    bool ended = false;            // the last attempt has ended
  };

 private:
  struct Best {  // a task as a candidate on a path or among the slowest
    uint32_t index = 0;
    int64_t wall = 0;
    std::optional<int64_t> end;
  };
  struct GroupScan {
    std::string name;
    uint32_t first = 0;
    uint32_t count = 0;
    std::vector<std::string> depends_on;
    std::optional<Best> longest;  // its best candidate for the critical path
  };

  JobId job_ = 0;
  Time now_;
  uint64_t count_ = 0;
  uint64_t next_ = 0;
  std::vector<GroupScan> groups_;
  std::optional<Best> last_;               // the task that ended last
  std::vector<Best> slowest_;              // longest first
  std::optional<Time> first_start_;
  std::optional<Time> last_end_;
};

// The whole report of `job` as of `now` in one call. Errors: kNotFound for
// an unknown job.
Result<nlohmann::json> BuildJobReport(const core::Scheduler& scheduler, JobId job, Time now,
                                      ReportPage page = {});

}  // namespace drover::metrics

#endif  // DROVER_METRICS_JOB_REPORT_H_
