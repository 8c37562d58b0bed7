#include "metrics/job_report.h"

#include <algorithm>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>

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

constexpr int64_t kNoEnd = INT64_MIN;

std::string TaskName(const core::TaskInfo& t, const core::TaskGroupSpec* spec) {
  if (spec != nullptr && spec->array) return t.group + "[" + std::to_string(t.array_index) + "]";
  return t.group;
}

JobReportScan::Timing Measure(const core::TaskInfo& t, Time now) {
  JobReportScan::Timing m;
  const bool active = t.state == core::TaskState::kAssigned || t.state == core::TaskState::kRunning;
  m.ended = t.finished_at && !active && t.started_at;
  if (m.ended) {
    // The worker's own measurement when it sent one; the outcome belongs
    // to the last finished attempt, which is this one when it has ended.
    m.wall = t.outcome && t.outcome->usage.wall > Duration::zero()
                 ? t.outcome->usage.wall
                 : *t.finished_at - *t.started_at;
  } else if (t.state == core::TaskState::kRunning && t.started_at) {
    m.wall = std::max(Duration::zero(), now - *t.started_at);
  }
  return m;
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

Result<JobReportScan> JobReportScan::Start(const core::Scheduler& scheduler, JobId job,
                                           Time now) {
  ASSIGN_OR_RETURN(core::JobInfo info, scheduler.GetJob(job));
  JobReportScan scan;
  scan.job_ = job;
  scan.now_ = now;
  scan.count_ = info.task_count;
  return scan;
}

bool JobReportScan::Step(const core::Scheduler& scheduler, uint64_t max_tasks) {
  const uint64_t end = count_ - next_ > max_tasks ? next_ + max_tasks : count_;
  for (; next_ < end; ++next_) {
    const uint32_t index = static_cast<uint32_t>(next_);
    const TaskId id{job_, index};
    Result<core::TaskInfo> got = scheduler.GetTask(id);
    if (!got.ok()) {  // the job is gone; Finish says so
      next_ = count_;
      return true;
    }
    const core::TaskInfo& t = *got;
    if (groups_.empty() || groups_.back().name != t.group) {
      GroupScan g;
      g.name = t.group;
      g.first = index;
      if (Result<const core::TaskGroupSpec*> spec = scheduler.GetSpec(id); spec.ok()) {
        g.depends_on = (*spec)->depends_on;
      }
      groups_.push_back(std::move(g));
    }
    GroupScan& group = groups_.back();
    ++group.count;

    const bool active = t.state == core::TaskState::kAssigned ||
                        t.state == core::TaskState::kRunning;
    if (t.started_at && (!first_start_ || *t.started_at < *first_start_)) {
      first_start_ = t.started_at;
    }
    if (t.finished_at && !active && (!last_end_ || *t.finished_at > *last_end_)) {
      last_end_ = t.finished_at;
    }
    const Timing m = Measure(t, now_);
    Best b{index, m.wall ? m.wall->count() : 0, std::nullopt};
    if (m.ended) b.end = ToMicros(*t.finished_at);
    // Within a group every task has the same dependencies, so the longest
    // (then the one that ended later, then the first) is the group's only
    // candidate for the critical path (critical_path.h's order).
    if (!group.longest || b.wall > group.longest->wall ||
        (b.wall == group.longest->wall &&
         b.end.value_or(kNoEnd) > group.longest->end.value_or(kNoEnd))) {
      group.longest = b;
    }
    if (b.end && (!last_ || *b.end > *last_->end)) last_ = b;
    if (m.wall && (slowest_.size() < kSlowestCount || b.wall > slowest_.back().wall)) {
      // After those of equal wall time: they have lower indices.
      auto at = std::upper_bound(slowest_.begin(), slowest_.end(), b,
                                 [](const Best& x, const Best& y) { return x.wall > y.wall; });
      slowest_.insert(at, b);
      if (slowest_.size() > kSlowestCount) slowest_.pop_back();
    }
  }
  return next_ >= count_;
}

Result<json> JobReportScan::Finish(const core::Scheduler& scheduler, ReportPage page) const {
  ASSIGN_OR_RETURN(core::JobInfo info, scheduler.GetJob(job_));
  auto group_named = [&](const std::string& name) -> const GroupScan* {
    for (const GroupScan& g : groups_) {
      if (g.name == name) return &g;
    }
    return nullptr;
  };
  auto group_of = [&](uint32_t index) -> const GroupScan* {
    auto it = std::upper_bound(groups_.begin(), groups_.end(), index,
                               [](uint32_t i, const GroupScan& g) { return i < g.first; });
    return it == groups_.begin() ? nullptr : &*std::prev(it);
  };

  // The critical path over the candidates: each group's longest task and
  // the task that ended last, in task order (ties go to lower indices).
  std::vector<Best> candidates;
  for (const GroupScan& g : groups_) {
    if (g.longest) candidates.push_back(*g.longest);
  }
  if (last_) candidates.push_back(*last_);
  std::sort(candidates.begin(), candidates.end(),
            [](const Best& a, const Best& b) { return a.index < b.index; });
  candidates.erase(std::unique(candidates.begin(), candidates.end(),
                               [](const Best& a, const Best& b) { return a.index == b.index; }),
                   candidates.end());
  std::map<const GroupScan*, size_t> node_of;  // a group's longest task's node
  for (size_t i = 0; i < candidates.size(); ++i) {
    const GroupScan* g = group_of(candidates[i].index);
    if (g != nullptr && g->longest && g->longest->index == candidates[i].index) node_of[g] = i;
  }
  std::vector<PathNode> nodes(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    nodes[i].wall = candidates[i].wall;
    nodes[i].end = candidates[i].end;
    if (const GroupScan* g = group_of(candidates[i].index); g != nullptr) {
      for (const std::string& d : g->depends_on) {
        auto it = node_of.find(group_named(d));
        if (it != node_of.end()) nodes[i].deps.push_back(it->second);
      }
    }
  }
  const std::vector<size_t> path = CriticalPath(nodes);
  std::vector<uint32_t> on_path;
  for (size_t i : path) on_path.push_back(candidates[i].index);

  json tasks = json::array();
  const uint64_t from = std::min(page.offset, count_);
  const uint64_t to = count_ - from > page.limit ? from + page.limit : count_;
  for (uint64_t i = from; i < to; ++i) {
    const TaskId id{job_, static_cast<uint32_t>(i)};
    Result<core::TaskInfo> got = scheduler.GetTask(id);
    if (!got.ok()) continue;
    const core::TaskInfo& t = *got;
    Result<const core::TaskGroupSpec*> found = scheduler.GetSpec(id);
    const core::TaskGroupSpec* spec = found.ok() ? *found : nullptr;
    const Timing m = Measure(t, now_);
    json deps = json::array();
    uint64_t deps_count = 0;
    if (spec != nullptr) {
      for (const std::string& name : spec->depends_on) {
        const GroupScan* g = group_named(name);
        if (g == nullptr) continue;
        deps_count += g->count;
        for (uint32_t k = 0; k < g->count && deps.size() < kMaxDepsListed; ++k) {
          deps.push_back(TaskId{job_, g->first + k}.ToString());
        }
      }
    }
    const core::ResourceRequest req = spec ? spec->resources : core::ResourceRequest{};
    json requested{{"cpus", static_cast<double>(req.cpus_milli) / 1000.0},
                   {"mem_bytes", req.mem_bytes},
                   {"gpus", static_cast<double>(req.gpus) / 100.0}};
    const bool critical =
        std::find(on_path.begin(), on_path.end(), static_cast<uint32_t>(i)) != on_path.end();
    json task{{"id", t.id.ToString()},
              {"name", TaskName(t, spec)},
              {"group", t.group},
              {"array_index", t.array_index},
              {"state", std::string(core::TaskStateName(t.state))},
              {"worker", t.worker ? json(*t.worker) : json(nullptr)},
              {"worker_name", nullptr},
              {"deps", std::move(deps)},
              {"deps_count", deps_count},
              {"start_ms", OptMs(t.started_at)},
              {"end_ms", m.ended ? OptMs(t.finished_at) : json(nullptr)},
              {"wall_s", m.wall ? json(Secs(*m.wall)) : json(nullptr)},
              {"cpu_s", nullptr},
              {"peak_mem_bytes", nullptr},
              {"io_read_bytes", nullptr},
              {"io_write_bytes", nullptr},
              {"requested", std::move(requested)},
              {"cpu_efficiency", nullptr},
              {"mem_efficiency", nullptr},
              {"attempts", t.attempt},
              {"critical", critical},
              {"reason", t.reason}};
    if (t.worker) {
      Result<core::WorkerInfo> w = scheduler.GetWorker(*t.worker);
      if (w.ok()) task["worker_name"] = w->resources.name;
    }
    if (m.ended && t.outcome) {
      const core::TaskUsage& u = t.outcome->usage;
      task["cpu_s"] = Secs(u.cpu);
      task["peak_mem_bytes"] = u.peak_mem_bytes;
      if (u.io_read_bytes) task["io_read_bytes"] = *u.io_read_bytes;
      if (u.io_write_bytes) task["io_write_bytes"] = *u.io_write_bytes;
      const double wall = Secs(*m.wall);
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

  json slowest = json::array();
  for (const Best& b : slowest_) slowest.push_back(TaskId{job_, b.index}.ToString());
  json critical_path = json::array();
  for (uint32_t i : on_path) critical_path.push_back(TaskId{job_, i}.ToString());

  const std::optional<Time> ended = info.done ? last_end_ : std::nullopt;
  json makespan = nullptr;
  if (first_start_) makespan = Secs((ended ? *ended : now_) - *first_start_);
  return json{{"job", std::to_string(info.id)},
              {"name", info.name},
              {"user", info.user},
              {"state", JobState(info, first_start_.has_value())},
              {"submitted_at_ms", UnixMs(info.submitted_at)},
              {"started_at_ms", OptMs(first_start_)},
              {"ended_at_ms", OptMs(ended)},
              {"makespan_s", makespan},
              {"task_count", count_},
              {"tasks", std::move(tasks)},
              {"critical_path", std::move(critical_path)},
              {"critical_path_s", static_cast<double>(PathLength(nodes, path)) / 1e6},
              {"slowest", std::move(slowest)}};
}

Result<json> BuildJobReport(const core::Scheduler& scheduler, JobId job, Time now,
                            ReportPage page) {
  ASSIGN_OR_RETURN(JobReportScan scan, JobReportScan::Start(scheduler, job, now));
  while (!scan.Step(scheduler, UINT64_MAX)) {
  }
  return scan.Finish(scheduler, page);
}

}  // namespace drover::metrics
