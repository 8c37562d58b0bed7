#include "metrics/job_report.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>

#include "core/testing/test_cluster.h"
#include "metrics/critical_path.h"

namespace drover::metrics {
namespace {

using core::testing::JobBuilder;
using core::testing::T;
using core::testing::TaskBuilder;
using core::testing::TestCluster;
using core::testing::WorkerBuilder;
using nlohmann::json;

core::TaskOutcome Used(Duration wall, Duration cpu, uint64_t peak) {
  core::TaskOutcome o;
  o.usage.wall = wall;
  o.usage.cpu = cpu;
  o.usage.peak_mem_bytes = peak;
  return o;
}

const json& TaskOf(const json& report, const std::string& id) {
  for (const json& t : report["tasks"]) {
    if (t["id"] == id) return t;
  }
  static const json kNone;
  ADD_FAILURE() << "no task " << id << " in " << report.dump(2);
  return kNone;
}

// prep -> {fast, slow} -> join, slow clearly longer than fast.
class DiamondTest : public ::testing::Test {
 protected:
  void SetUp() override {
    c.AddWorker(WorkerBuilder().Cpus(4).Mem(16 * kGiB));
    job = c.Submit(JobBuilder()
                       .Add(TaskBuilder("prep").Cpus(1).Mem(1 * kGiB))
                       .Add(TaskBuilder("fast").DependsOn("prep"))
                       .Add(TaskBuilder("slow").Cpus(2).DependsOn("prep"))
                       .Add(TaskBuilder("join").DependsOn("fast").DependsOn("slow")));
    t0 = c.now();
  }
  // Runs every stage with the given durations (whole seconds).
  void RunAll() {
    c.Run(T(job, 0));
    c.Advance(Seconds(1));
    c.FinishWith(T(job, 0), Used(Seconds(1), Millis(500), 512 * kMiB));
    c.Run(T(job, 1));
    c.Run(T(job, 2));
    c.Advance(Seconds(1));
    c.FinishWith(T(job, 1), Used(Seconds(1), Seconds(1), 0));
    c.Advance(Seconds(3));
    c.FinishWith(T(job, 2), Used(Seconds(4), Seconds(6), 0));
    c.Run(T(job, 3));
    c.Advance(Seconds(1));
    c.FinishWith(T(job, 3), Used(Seconds(1), Millis(100), 0));
  }
  json Report() {
    Result<json> r = BuildJobReport(c.scheduler(), job, c.now());
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : json();
  }
  static int64_t Ms(Time t) { return ToMicros(t) / 1000; }

  TestCluster c;
  JobId job = 0;
  Time t0;
};

TEST_F(DiamondTest, CriticalPathSlowestAndEfficiencies) {
  RunAll();
  const json r = Report();
  const std::string j = std::to_string(job);
  EXPECT_EQ(r["job"], j);
  EXPECT_EQ(r["name"], "job");
  EXPECT_EQ(r["state"], "succeeded");
  EXPECT_EQ(r["critical_path"], json::array({j + ".0", j + ".2", j + ".3"})) << r.dump(2);
  EXPECT_DOUBLE_EQ(r["critical_path_s"].get<double>(), 6.0);
  EXPECT_EQ(r["slowest"], json::array({j + ".2", j + ".0", j + ".1", j + ".3"}));
  EXPECT_EQ(r["started_at_ms"], Ms(t0));
  EXPECT_EQ(r["ended_at_ms"], Ms(t0 + Seconds(6)));
  EXPECT_DOUBLE_EQ(r["makespan_s"].get<double>(), 6.0);
  ASSERT_EQ(r["tasks"].size(), 4u);

  const json& prep = TaskOf(r, j + ".0");
  EXPECT_EQ(prep["name"], "prep");
  EXPECT_EQ(prep["state"], "succeeded");
  EXPECT_EQ(prep["worker"], 1);
  EXPECT_EQ(prep["worker_name"], "host");
  EXPECT_EQ(prep["deps"], json::array());
  EXPECT_EQ(prep["start_ms"], Ms(t0));
  EXPECT_EQ(prep["end_ms"], Ms(t0 + Seconds(1)));
  EXPECT_DOUBLE_EQ(prep["wall_s"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(prep["cpu_s"].get<double>(), 0.5);
  EXPECT_EQ(prep["peak_mem_bytes"], 512 * kMiB);
  EXPECT_DOUBLE_EQ(prep["requested"]["cpus"].get<double>(), 1.0);
  EXPECT_EQ(prep["requested"]["mem_bytes"], 1 * kGiB);
  EXPECT_DOUBLE_EQ(prep["requested"]["gpus"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(prep["cpu_efficiency"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(prep["mem_efficiency"].get<double>(), 0.5);
  EXPECT_EQ(prep["attempts"], 1);
  EXPECT_EQ(prep["critical"], true);

  const json& slow = TaskOf(r, j + ".2");
  EXPECT_EQ(slow["deps"], json::array({j + ".0"}));
  EXPECT_DOUBLE_EQ(slow["cpu_efficiency"].get<double>(), 6.0 / (4.0 * 2));
  EXPECT_TRUE(slow["mem_efficiency"].is_null());  // no memory requested
  EXPECT_EQ(slow["critical"], true);
  const json& fast = TaskOf(r, j + ".1");
  EXPECT_EQ(fast["critical"], false);
  const json& join = TaskOf(r, j + ".3");
  EXPECT_EQ(join["deps"], json::array({j + ".1", j + ".2"}));
}

TEST_F(DiamondTest, WhileRunning) {
  EXPECT_EQ(Report()["state"], "pending");
  EXPECT_TRUE(Report()["critical_path"].empty());
  EXPECT_TRUE(Report()["makespan_s"].is_null());
  c.Run(T(job, 0));
  c.Advance(Seconds(2));
  const json r = Report();
  EXPECT_EQ(r["state"], "running");
  EXPECT_TRUE(r["ended_at_ms"].is_null());
  EXPECT_DOUBLE_EQ(r["makespan_s"].get<double>(), 2.0);
  const json& prep = TaskOf(r, std::to_string(job) + ".0");
  EXPECT_EQ(prep["state"], "running");
  EXPECT_DOUBLE_EQ(prep["wall_s"].get<double>(), 2.0);  // so far
  EXPECT_TRUE(prep["end_ms"].is_null());
  EXPECT_TRUE(prep["cpu_s"].is_null());
  EXPECT_TRUE(prep["cpu_efficiency"].is_null());
  EXPECT_EQ(r["slowest"], json::array({std::to_string(job) + ".0"}));
}

TEST_F(DiamondTest, FailedJobAndUnknownJob) {
  c.Run(T(job, 0));
  c.Advance(Seconds(1));
  c.Finish(T(job, 0), 3);
  const json r = Report();
  EXPECT_EQ(r["state"], "failed") << r.dump(2);
  EXPECT_EQ(TaskOf(r, std::to_string(job) + ".0")["reason"], "exit code 3");
  EXPECT_EQ(r["critical_path"], json::array({std::to_string(job) + ".0"}));
  // The worker sent no wall time: end - start stands in.
  EXPECT_DOUBLE_EQ(TaskOf(r, std::to_string(job) + ".0")["wall_s"].get<double>(), 1.0);

  Result<json> missing = BuildJobReport(c.scheduler(), 999, c.now());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST(JobReportTest, ArrayTasksAreNamedByIndex) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(4));
  const JobId job = c.Submit(JobBuilder().Add(TaskBuilder("shard").Array(5, 2)));
  Result<json> r = BuildJobReport(c.scheduler(), job, c.now());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["tasks"][0]["name"], "shard[5]");
  EXPECT_EQ((*r)["tasks"][1]["name"], "shard[6]");
  EXPECT_EQ((*r)["tasks"][1]["group"], "shard");
}

// The report keeps one candidate per task group (its longest task) and the
// task that ended last instead of a node per task with an edge to every
// task of each group it depends on. On random jobs (array groups, random
// dependencies, random wall times with ties, some tasks still running)
// its critical path and slowest tasks equal the per-task computation.
TEST(JobReportTest, GroupCandidatesGiveThePerTaskCriticalPath) {
  std::mt19937 rng(18);
  for (int round = 0; round < 60; ++round) {
    TestCluster c;
    c.AddWorker(WorkerBuilder().Cpus(64).Mem(256 * kGiB));
    JobBuilder builder;
    const int groups = 2 + static_cast<int>(rng() % 5);
    for (int g = 0; g < groups; ++g) {
      TaskBuilder t("g" + std::to_string(g));
      t.Cpus(1).Mem(kMiB);
      if (rng() % 2) t.Array(0, 1 + rng() % 4);
      for (int d = 0; d < g; ++d) {
        if (rng() % 3 == 0) t.DependsOn("g" + std::to_string(d));
      }
      builder.Add(t);
    }
    const JobId job = c.Submit(builder);
    const uint64_t count = c.scheduler().GetJob(job)->task_count;
    // Start what is assigned, end a random running task, until done (or,
    // in some rounds, stop early with tasks still running).
    const bool stop_early = rng() % 4 == 0;
    for (int step = 0; step < 200; ++step) {
      std::vector<TaskId> running;
      for (uint32_t i = 0; i < count; ++i) {
        const TaskId t{job, i};
        const core::TaskState st = c.scheduler().GetTask(t)->state;
        if (st == core::TaskState::kAssigned) c.Run(t);
        if (c.scheduler().GetTask(t)->state == core::TaskState::kRunning) running.push_back(t);
      }
      if (running.empty() || (stop_early && step == 3)) break;
      c.Advance(Seconds(1 + rng() % 3));
      const TaskId t = running[rng() % running.size()];
      c.FinishWith(t, Used(Seconds(1 + rng() % 4), Seconds(1), 0));  // ties are common
    }
    Result<json> report = BuildJobReport(c.scheduler(), job, c.now());
    ASSERT_TRUE(report.ok()) << report.status().ToString();

    // The per-task computation the report had before.
    std::vector<PathNode> nodes(count);
    std::map<std::string, std::vector<size_t>> by_group;
    std::vector<core::TaskInfo> infos;
    for (uint32_t i = 0; i < count; ++i) {
      infos.push_back(*c.scheduler().GetTask(TaskId{job, i}));
      by_group[infos.back().group].push_back(i);
    }
    std::vector<std::pair<int64_t, size_t>> walls;
    for (uint32_t i = 0; i < count; ++i) {
      const core::TaskInfo& t = infos[i];
      const core::TaskGroupSpec* spec = *c.scheduler().GetSpec(t.id);
      for (const std::string& g : spec->depends_on) {
        for (size_t d : by_group[g]) nodes[i].deps.push_back(d);
      }
      const JobReportScan::Timing m = [&] {
        JobReportScan::Timing x;
        const bool active = t.state == core::TaskState::kAssigned ||
                            t.state == core::TaskState::kRunning;
        x.ended = t.finished_at && !active && t.started_at;
        if (x.ended) {
          x.wall = t.outcome && t.outcome->usage.wall > Duration::zero()
                       ? t.outcome->usage.wall
                       : *t.finished_at - *t.started_at;
        } else if (t.state == core::TaskState::kRunning && t.started_at) {
          x.wall = c.now() - *t.started_at;
        }
        return x;
      }();
      nodes[i].wall = m.wall ? m.wall->count() : 0;
      if (m.ended) nodes[i].end = ToMicros(*t.finished_at);
      if (m.wall) walls.emplace_back(m.wall->count(), i);
    }
    json path = json::array();
    const std::vector<size_t> full = CriticalPath(nodes);
    for (size_t i : full) path.push_back(infos[i].id.ToString());
    EXPECT_EQ((*report)["critical_path"], path) << "round " << round;
    EXPECT_DOUBLE_EQ((*report)["critical_path_s"].get<double>(),
                     static_cast<double>(PathLength(nodes, full)) / 1e6);
    std::stable_sort(walls.begin(), walls.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    if (walls.size() > kSlowestCount) walls.resize(kSlowestCount);
    json slowest = json::array();
    for (const auto& [wall, i] : walls) slowest.push_back(infos[i].id.ToString());
    EXPECT_EQ((*report)["slowest"], slowest) << "round " << round;
  }
}

TEST(JobReportTest, StepsAndPagesGiveTheSameReport) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(4));
  const JobId job = c.Submit(JobBuilder().Add(TaskBuilder("a").Array(0, 7)).Add(
      TaskBuilder("b").Array(0, 5).DependsOn("a")));
  c.Run(T(job, 0));
  c.Advance(Seconds(2));
  c.FinishWith(T(job, 0), Used(Seconds(2), Seconds(1), 0));
  Result<json> whole = BuildJobReport(c.scheduler(), job, c.now());
  ASSERT_TRUE(whole.ok());
  Result<JobReportScan> scan = JobReportScan::Start(c.scheduler(), job, c.now());
  ASSERT_TRUE(scan.ok());
  int steps = 1;
  while (!scan->Step(c.scheduler(), 3)) ++steps;
  EXPECT_EQ(steps, 4);  // 12 tasks, 3 a step
  Result<json> page = scan->Finish(c.scheduler(), ReportPage{5, 4});
  ASSERT_TRUE(page.ok());
  ASSERT_EQ((*page)["tasks"].size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ((*page)["tasks"][i], (*whole)["tasks"][5 + i]);
  json rest = *page;
  rest.erase("tasks");
  json all = *whole;
  all.erase("tasks");
  EXPECT_EQ(rest, all);
  EXPECT_EQ(all["task_count"], 12);
  // Every task of "a" is a dependency of each task of "b".
  EXPECT_EQ((*whole)["tasks"][7]["deps_count"], 7);
  EXPECT_EQ((*whole)["tasks"][7]["deps"].size(), 7u);
}

}  // namespace
}  // namespace drover::metrics
