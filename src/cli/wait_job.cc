#include "cli/wait_job.h"

#include <iostream>
#include <nlohmann/json.hpp>

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

Result<nlohmann::json> GetJobWithAllTasks(ApiClient& api, JobId job, uint32_t page) {
  const std::string base = "/api/v1/jobs/" + std::to_string(job);
  ASSIGN_OR_RETURN(nlohmann::json all, api.Get(base + "?offset=0&limit=" + std::to_string(page)));
  if (!all.contains("tasks") || !all["tasks"].is_array()) {
    return Internal("the server's job " + std::to_string(job) + " has no task list");
  }
  nlohmann::json next = all.value("next_offset", nlohmann::json());
  while (next.is_number_unsigned()) {
    ASSIGN_OR_RETURN(nlohmann::json more,
                     api.Get(base + "?offset=" + std::to_string(next.get<uint64_t>()) +
                             "&limit=" + std::to_string(page)));
    if (!more.contains("tasks") || !more["tasks"].is_array() || more["tasks"].empty()) break;
    for (nlohmann::json& t : more["tasks"]) all["tasks"].push_back(std::move(t));
    next = more.value("next_offset", nlohmann::json());
  }
  // One page holding everything.
  all["limit"] = all["tasks"].size();
  all["next_offset"] = nullptr;
  return all;
}

}  // namespace drover::cli
