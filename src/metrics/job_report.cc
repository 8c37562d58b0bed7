#include "metrics/job_report.h"

#include <algorithm>
#include <map>
#include <optional>

#include "metrics/critical_path.h"

namespace drover::metrics {

namespace {

using nlohmann::json;

int64_t UnixMs(Time t) {
  const int64_t us = ToMicros(t);
  return us >= 0 ? us / 1000 : -((-us + 999) / 1000);
}

double Secs(Duration d) { return static_cast<double>(d.count()) / 1e6; }

json OptMs(const std::optional<Time>& t) { return t ? json(UnixMs(*t)) : json(nullptr); }

// One task's figures, gathered once and used for both the JSON and the path.
struct Row {
  core::TaskInfo info;
  const core::TaskGroupSpec* spec = nullptr;
  std::vector<size_t> deps;
  std::optional<Duration> wall;  // of the last attempt (so far, while running)
  bool ended = false;            // the last attempt has ended
};

std::string TaskName(const Row& r) {
  if (r.spec != nullptr && r.spec->array) {
    return r.info.group + "[" + std::to_string(r.info.array_index) + "]";
  }
  return r.info.group;
}

std::string JobState(const core::JobInfo& job, bool any_started) {
  auto count = [&](core::TaskState s) { return job.counts[static_cast<int>(s)]; };
  if (job.done) {
    if (count(core::TaskState::kFailed) > 0) return "failed";
    if (count(core::TaskState::kCanceled) > 0) return "canceled";
    return "succeeded";
  }
  return any_started ? "running" : "pending";
}

}  // namespace

Result<json> BuildJobReport(const core::Scheduler& scheduler, JobId job, Time now) {
  ASSIGN_OR_RETURN(core::JobInfo info, scheduler.GetJob(job));
  ASSIGN_OR_RETURN(std::vector<TaskId> ids, scheduler.JobTasks(job));

  std::vector<Row> rows;
  rows.reserve(ids.size());
  std::map<std::string, std::vector<size_t>> by_group;
  for (const TaskId& id : ids) {
    Row row;
    ASSIGN_OR_RETURN(row.info, scheduler.GetTask(id));
    Result<const core::TaskGroupSpec*> spec = scheduler.GetSpec(id);
    if (spec.ok()) row.spec = *spec;
    by_group[row.info.group].push_back(rows.size());
    rows.push_back(std::move(row));
  }

  std::optional<Time> first_start;
  std::optional<Time> last_end;
  for (Row& r : rows) {
    if (r.spec != nullptr) {
      for (const std::string& g : r.spec->depends_on) {
        auto it = by_group.find(g);
        if (it != by_group.end()) r.deps.insert(r.deps.end(), it->second.begin(), it->second.end());
      }
    }
    const core::TaskInfo& t = r.info;
    const bool active = t.state == core::TaskState::kAssigned ||
                        t.state == core::TaskState::kRunning;
    if (t.started_at && (!first_start || *t.started_at < *first_start)) first_start = t.started_at;
    if (t.finished_at && !active) {
      r.ended = t.started_at.has_value();
      if (!last_end || *t.finished_at > *last_end) last_end = t.finished_at;
    }
    if (r.ended) {
      // The worker's own measurement when it sent one; the outcome belongs
      // to the last finished attempt, which is this one when it has ended.
      r.wall = t.outcome && t.outcome->usage.wall > Duration::zero()
                   ? t.outcome->usage.wall
                   : *t.finished_at - *t.started_at;
    } else if (t.state == core::TaskState::kRunning && t.started_at) {
      r.wall = std::max(Duration::zero(), now - *t.started_at);
    }
  }

  std::vector<PathNode> nodes(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    nodes[i].wall = rows[i].wall ? rows[i].wall->count() : 0;
    if (rows[i].ended) nodes[i].end = ToMicros(*rows[i].info.finished_at);
    nodes[i].deps = rows[i].deps;
  }
  const std::vector<size_t> path = CriticalPath(nodes);
  std::vector<bool> critical(rows.size(), false);
  for (size_t i : path) critical[i] = true;

  json tasks = json::array();
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const core::TaskInfo& t = r.info;
    json deps = json::array();
    for (size_t d : r.deps) deps.push_back(rows[d].info.id.ToString());
    const core::ResourceRequest req = r.spec ? r.spec->resources : core::ResourceRequest{};
    json requested{{"cpus", static_cast<double>(req.cpus_milli) / 1000.0},
                   {"mem_bytes", req.mem_bytes},
                   {"gpus", static_cast<double>(req.gpus) / 100.0}};
    json task{{"id", t.id.ToString()},
              {"name", TaskName(r)},
              {"group", t.group},
              {"array_index", t.array_index},
              {"state", std::string(core::TaskStateName(t.state))},
              {"worker", t.worker ? json(*t.worker) : json(nullptr)},
              {"worker_name", nullptr},
              {"deps", std::move(deps)},
              {"start_ms", OptMs(t.started_at)},
              {"end_ms", r.ended ? OptMs(t.finished_at) : json(nullptr)},
              {"wall_s", r.wall ? json(Secs(*r.wall)) : json(nullptr)},
              {"cpu_s", nullptr},
              {"peak_mem_bytes", nullptr},
              {"requested", std::move(requested)},
              {"cpu_efficiency", nullptr},
              {"mem_efficiency", nullptr},
              {"attempts", t.attempt},
              {"critical", static_cast<bool>(critical[i])},
              {"reason", t.reason}};
    if (t.worker) {
      Result<core::WorkerInfo> w = scheduler.GetWorker(*t.worker);
      if (w.ok()) task["worker_name"] = w->resources.name;
    }
    if (r.ended && t.outcome) {
      const core::TaskUsage& u = t.outcome->usage;
      task["cpu_s"] = Secs(u.cpu);
      task["peak_mem_bytes"] = u.peak_mem_bytes;
      const double wall = Secs(*r.wall);
      if (req.cpus_milli > 0 && wall > 0) {
        task["cpu_efficiency"] = Secs(u.cpu) / (wall * static_cast<double>(req.cpus_milli) / 1000.0);
      }
      if (req.mem_bytes > 0) {
        task["mem_efficiency"] =
            static_cast<double>(u.peak_mem_bytes) / static_cast<double>(req.mem_bytes);
      }
    }
    tasks.push_back(std::move(task));
  }

  std::vector<size_t> order;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].wall) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return *rows[a].wall > *rows[b].wall; });
  if (order.size() > kSlowestCount) order.resize(kSlowestCount);
  json slowest = json::array();
  for (size_t i : order) slowest.push_back(rows[i].info.id.ToString());
  json critical_path = json::array();
  for (size_t i : path) critical_path.push_back(rows[i].info.id.ToString());

  const std::optional<Time> ended = info.done ? last_end : std::nullopt;
  json makespan = nullptr;
  if (first_start) makespan = Secs((ended ? *ended : now) - *first_start);
  return json{{"job", std::to_string(info.id)},
              {"name", info.name},
              {"user", info.user},
              {"state", JobState(info, first_start.has_value())},
              {"submitted_at_ms", UnixMs(info.submitted_at)},
              {"started_at_ms", OptMs(first_start)},
              {"ended_at_ms", OptMs(ended)},
              {"makespan_s", makespan},
              {"tasks", std::move(tasks)},
              {"critical_path", std::move(critical_path)},
              {"critical_path_s", static_cast<double>(PathLength(nodes, path)) / 1e6},
              {"slowest", std::move(slowest)}};
}

}  // namespace drover::metrics
