#include "cli/wait_job.h"

#include <iostream>

#include "cli/streams.h"

namespace drover::cli {

Result<JobWatch> WaitForJob(ApiClient& api, JobId job, Progress progress,
                            std::optional<uint64_t> task_count) {
  if (!task_count) {
    ASSIGN_OR_RETURN(nlohmann::json info,
                     api.Get("/api/v1/jobs/" + std::to_string(job) + "?limit=0"));
    auto count = info.find("task_count");
    if (count == info.end() || !count->is_number_unsigned()) {
      return Internal("the server's job " + std::to_string(job) + " has no task_count");
    }
    task_count = count->get<uint64_t>();
  }
  JobWatch watch(*task_count);
  JobChangeFn on_change = [progress](const TaskEventView& e, const JobWatch& w) {
    if (progress == Progress::kLines) {
      std::cout << e.task << " " << e.to;
      if (e.attempt > 0) std::cout << " (attempt " << e.attempt << ")";
      if (!e.reason.empty()) std::cout << ": " << e.reason;
      std::cout << std::endl;
    } else if (progress == Progress::kBar) {
      std::cout << "\r\033[K" << w.ProgressLine() << std::flush;
    }
  };
  Status s = FollowJob(api.StreamOptions(), job, watch, on_change);
  if (progress == Progress::kBar) std::cout << std::endl;
  RETURN_IF_ERROR(s);
  return watch;
}

}  // namespace drover::cli
