#include "sim/simulator.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>
#include <string>

#include "sim/bound.h"
#include "sim/generate.h"
#include "sim/report.h"

namespace drover::sim {
namespace {

Trace TraceFrom(const std::string& text) {
  std::istringstream in(text);
  Result<Trace> t = ParseTrace(in, "test.jsonl");
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(t).value();
}

Cluster ClusterFrom(const std::string& text) {
  Result<Cluster> c = ParseCluster(text, "cluster.json");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

std::string Fixed1(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

uint32_t IndexOf(const Trace& trace, const std::string& id) {
  for (uint32_t i = 0; i < trace.ids.size(); ++i) {
    if (trace.ids[i] == id) return i;
  }
  ADD_FAILURE() << "no task " << id;
  return 0;
}

SimResult Replay(const Trace& trace, const Cluster& cluster, SimOptions options = {}) {
  Result<SimResult> r = Simulate(trace, cluster, options);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

// One worker with 2 GPUs. a and b take both GPUs at 0; c (2 GPUs) waits for
// both; d depends on a, is ready at 10 when a frees a GPU, but c (earlier)
// holds a reservation on the only worker, so d may not take that GPU: c runs
// 20-25 and d 25-29. Every figure below is worked out by hand from that.
TEST(SimulatorTest, HandComputedTraceGivesExactMakespanWaitsAndIdle) {
  const Trace trace = TraceFrom(R"({"id":"a","submit":0,"duration":10,"gpus":1}
{"id":"b","submit":0,"duration":20,"gpus":1}
{"id":"c","submit":0,"duration":5,"gpus":2}
{"id":"d","submit":1,"duration":4,"gpus":1,"deps":["a"]}
)");
  const Cluster cluster =
      ClusterFrom(R"({"workers":[{"name":"w","cpus":8,"mem":"64GiB","gpus":2}]})");
  const SimResult r = Replay(trace, cluster);

  EXPECT_EQ(r.tasks, 4u);
  EXPECT_EQ(r.jobs, 2u);  // a, b, c submitted together; d on its own (--after a)
  EXPECT_DOUBLE_EQ(r.makespan_s, 29.0);
  EXPECT_EQ(r.starts[IndexOf(trace, "a")], Seconds(0));
  EXPECT_EQ(r.starts[IndexOf(trace, "b")], Seconds(0));
  EXPECT_EQ(r.starts[IndexOf(trace, "c")], Seconds(20));
  EXPECT_EQ(r.starts[IndexOf(trace, "d")], Seconds(25));
  EXPECT_EQ(r.waits[IndexOf(trace, "c")], Seconds(20));
  EXPECT_EQ(r.waits[IndexOf(trace, "d")], Seconds(15));  // ready at 10, not at its submit
  EXPECT_DOUBLE_EQ(r.wait.mean_s, 35.0 / 4);
  EXPECT_DOUBLE_EQ(r.wait.p50_s, 0.0);
  EXPECT_DOUBLE_EQ(r.wait.p95_s, 20.0);
  EXPECT_DOUBLE_EQ(r.wait.max_s, 20.0);
  EXPECT_NEAR(r.gpu_utilization, 44.0 / (2 * 29), 1e-12);
  EXPECT_NEAR(r.cpu_utilization, 39.0 / (8 * 29), 1e-12);
  // From 10 to 20 one GPU is free and d fits it, held for c's reservation.
  EXPECT_NEAR(r.idle_reservation_gpu_s, 10.0, 1e-9);
  EXPECT_DOUBLE_EQ(r.idle_other_gpu_s, 0.0);
  // The idle profile: 2 x 29 - 44 = 14 free GPU-s, 10 of them held for c,
  // 4 (25-29, d alone) with no GPU task waiting; all after the last submit.
  EXPECT_NEAR(r.idle.reservation_gpu_s, 10.0, 1e-9);
  EXPECT_NEAR(r.idle.queue_empty_gpu_s, 4.0, 1e-9);
  EXPECT_DOUBLE_EQ(r.idle.fragmentation_gpu_s, 0.0);
  EXPECT_DOUBLE_EQ(r.idle.dependency_gpu_s, 0.0);
  EXPECT_NEAR(r.idle.total_gpu_s(), 14.0, 1e-9);
  EXPECT_NEAR(r.idle.after_last_submit_gpu_s, 14.0, 1e-9);

  const MakespanBound b = ComputeBound(trace, cluster);
  EXPECT_DOUBLE_EQ(b.gpu_area_s, 22.0);  // 44 GPU-s on 2 GPUs
  // d cannot start before 10: 10 + its 4 cpu-s / 8 cores beats all 39 / 8.
  EXPECT_DOUBLE_EQ(b.cpu_area_s, 10.5);
  EXPECT_DOUBLE_EQ(b.chain_s, 20.0);  // b alone; a then d is 14
  EXPECT_DOUBLE_EQ(b.value_s(), 22.0);
  EXPECT_DOUBLE_EQ(b.plain_s(), 22.0);
}

// The same trace with time limits equal to the durations: c can start at 20
// at the latest (b's limit), and d, ready at 10, ends by 14, so it backfills
// the GPU a frees instead of waiting behind c: 10-14, then c 20-25.
TEST(SimulatorTest, WithTimeLimitsAShortTaskBackfillsBeforeTheReservation) {
  const Trace trace = TraceFrom(R"({"id":"a","submit":0,"duration":10,"limit":10,"gpus":1}
{"id":"b","submit":0,"duration":20,"limit":20,"gpus":1}
{"id":"c","submit":0,"duration":5,"limit":5,"gpus":2}
{"id":"d","submit":1,"duration":4,"limit":4,"gpus":1,"deps":["a"]}
)");
  const Cluster cluster =
      ClusterFrom(R"({"workers":[{"name":"w","cpus":8,"mem":"64GiB","gpus":2}]})");
  const SimResult r = Replay(trace, cluster);
  EXPECT_DOUBLE_EQ(r.makespan_s, 25.0);
  EXPECT_EQ(r.starts[IndexOf(trace, "c")], Seconds(20));
  EXPECT_EQ(r.starts[IndexOf(trace, "d")], Seconds(10));
  EXPECT_EQ(r.waits[IndexOf(trace, "d")], Seconds(0));
  // From 14 to 20 one GPU is free; nothing that fits is waiting: c (2 GPUs)
  // waits for b's, which is fragmentation in the idle profile.
  EXPECT_DOUBLE_EQ(r.idle_reservation_gpu_s, 0.0);
  EXPECT_DOUBLE_EQ(r.idle_other_gpu_s, 0.0);
  EXPECT_NEAR(r.idle.fragmentation_gpu_s, 6.0, 1e-9);
  EXPECT_NEAR(r.idle.total_gpu_s(), 2 * 25 - 44, 1e-9);

  // A limit longer than c's wait (d could run until 21) holds d back again.
  const Trace longer = TraceFrom(R"({"id":"a","submit":0,"duration":10,"limit":10,"gpus":1}
{"id":"b","submit":0,"duration":20,"limit":20,"gpus":1}
{"id":"c","submit":0,"duration":5,"limit":5,"gpus":2}
{"id":"d","submit":1,"duration":4,"limit":11,"gpus":1,"deps":["a"]}
)");
  const SimResult held = Replay(longer, cluster);
  EXPECT_DOUBLE_EQ(held.makespan_s, 29.0);
  EXPECT_EQ(held.starts[IndexOf(longer, "c")], Seconds(20));
  EXPECT_EQ(held.starts[IndexOf(longer, "d")], Seconds(25));
}

// Two half-GPU tasks share the one GPU; with 50 GiB of GPU memory each they
// no longer fit side by side on an 80 GiB GPU and run one after the other.
TEST(SimulatorTest, GpuSharesPackUntilGpuMemoryRunsOut) {
  const Cluster cluster =
      ClusterFrom(R"({"workers":[{"cpus":4,"mem":"16GiB","gpus":1,"gpu_mem":"80GiB"}]})");
  const SimResult shared = Replay(TraceFrom(R"({"submit":0,"duration":10,"gpus":0.5}
{"submit":0,"duration":10,"gpus":"0.5"}
)"),
                                  cluster);
  EXPECT_DOUBLE_EQ(shared.makespan_s, 10.0);
  EXPECT_NEAR(shared.gpu_utilization, 1.0, 1e-12);

  const SimResult apart =
      Replay(TraceFrom(R"({"submit":0,"duration":10,"gpus":0.5,"gpu_mem":"50GiB"}
{"submit":0,"duration":10,"gpus":0.5,"gpu_mem":"50GiB"}
)"),
             cluster);
  EXPECT_DOUBLE_EQ(apart.makespan_s, 20.0);
  EXPECT_DOUBLE_EQ(apart.wait.max_s, 10.0);
}

// A 4-GPU task arrives behind a stream of 1-GPU tasks that alone would keep
// at least one GPU busy until the stream ends (one every 2.5 s, 10 s each).
// With backfill reservations it starts as soon as the small tasks already
// running finish; without them it waits for the whole stream.
TEST(SimulatorTest, BigGpuTaskIsNotStarvedByAStreamOfSmallOnes) {
  std::string text;
  for (int k = 0; k < 400; ++k) {
    const int ms = k * 2500;
    text += "{\"id\":\"s" + std::to_string(k) + "\",\"submit\":" + std::to_string(ms / 1000) + "." +
            std::to_string(ms % 1000) + ",\"duration\":10,\"gpus\":1}\n";
    if (k == 1) text += "{\"id\":\"big\",\"submit\":3,\"duration\":10,\"gpus\":4}\n";
  }
  const Trace trace = TraceFrom(text);
  const Cluster cluster = ClusterFrom(R"({"workers":[{"cpus":16,"mem":"64GiB","gpus":4}]})");
  const uint32_t big = IndexOf(trace, "big");

  const SimResult with = Replay(trace, cluster);
  // Small tasks 0 and 1 end at 10 and 12.5; nothing else may start meanwhile.
  EXPECT_EQ(with.waits[big], Millis(9500));
  EXPECT_GT(with.idle_reservation_gpu_s, 0.0);
  EXPECT_DOUBLE_EQ(with.idle_other_gpu_s, 0.0);

  const SimResult without = Replay(trace, cluster, SimOptions{core::PolicyKind::kSpread, false});
  EXPECT_GT(without.waits[big], Seconds(900));
  EXPECT_EQ(without.idle_reservation_gpu_s, 0.0);
}

// The same stream with time limits, which let small tasks backfill the
// reserved GPUs when they end before the big task could start: with exact
// limits none of them can (each runs 10 s, the big task can start at 12.5),
// with generous ones (30 s) the big task's start is planned later, and still
// none may take a GPU it waits for. Either way it starts when the two small
// tasks running at its arrival end, as without limits.
TEST(SimulatorTest, BigGpuTaskIsNotStarvedWhenSmallOnesHaveTimeLimits) {
  for (const char* limit : {"10", "30"}) {
    std::string text;
    for (int k = 0; k < 400; ++k) {
      const int ms = k * 2500;
      text += "{\"id\":\"s" + std::to_string(k) + "\",\"submit\":" + std::to_string(ms / 1000) +
              "." + std::to_string(ms % 1000) + ",\"duration\":10,\"limit\":" + limit +
              ",\"gpus\":1}\n";
      if (k == 1) text += "{\"id\":\"big\",\"submit\":3,\"duration\":10,\"gpus\":4}\n";
    }
    const Trace trace = TraceFrom(text);
    const Cluster cluster = ClusterFrom(R"({"workers":[{"cpus":16,"mem":"64GiB","gpus":4}]})");
    const SimResult r = Replay(trace, cluster);
    EXPECT_EQ(r.waits[IndexOf(trace, "big")], Millis(9500)) << "limit " << limit;
    EXPECT_DOUBLE_EQ(r.idle_other_gpu_s, 0.0) << "limit " << limit;
  }
}

TEST(SimulatorTest, SameTraceTwiceGivesIdenticalResults) {
  std::ostringstream text;
  ASSERT_TRUE(WriteSyntheticTrace(GenerateOptions{7, 400, 8, 1.3}, text).ok());
  const Trace trace = TraceFrom(text.str());
  const Cluster cluster =
      ClusterFrom(R"({"workers":[{"name":"g","count":2,"cpus":32,"mem":"256GiB","gpus":4}]})");
  for (core::PolicyKind policy :
       {core::PolicyKind::kSpread, core::PolicyKind::kPack, core::PolicyKind::kRoundRobin}) {
    const SimResult a = Replay(trace, cluster, SimOptions{policy, true});
    const SimResult b = Replay(trace, cluster, SimOptions{policy, true});
    EXPECT_EQ(a.waits, b.waits);
    EXPECT_EQ(a.starts, b.starts);
    EXPECT_EQ(a.makespan_s, b.makespan_s);
    EXPECT_EQ(a.events, b.events);
    EXPECT_EQ(a.idle_reservation_gpu_s, b.idle_reservation_gpu_s);
  }
}

// Invariants on a generated trace with pipelines, under every policy:
// nothing starts before it is submitted or before its dependencies ended,
// the makespan respects the bound, and no fitting task idles GPUs outside a
// reservation.
TEST(SimulatorTest, GeneratedTraceRespectsSubmitTimesDependenciesAndBound) {
  std::ostringstream text;
  ASSERT_TRUE(WriteSyntheticTrace(GenerateOptions{11, 600, 8, 1.5}, text).ok());
  const Trace trace = TraceFrom(text.str());
  ASSERT_FALSE(trace.deps.empty());
  const Cluster cluster =
      ClusterFrom(R"({"workers":[{"name":"g","count":2,"cpus":32,"mem":"256GiB","gpus":4}]})");
  const MakespanBound bound = ComputeBound(trace, cluster);
  for (core::PolicyKind policy :
       {core::PolicyKind::kSpread, core::PolicyKind::kPack, core::PolicyKind::kRoundRobin}) {
    const SimResult r = Replay(trace, cluster, SimOptions{policy, true});
    ASSERT_EQ(r.starts.size(), trace.tasks.size());
    for (size_t i = 0; i < trace.tasks.size(); ++i) {
      const TraceTask& t = trace.tasks[i];
      EXPECT_GE(r.starts[i], t.submit) << trace.ids[i];
      EXPECT_GE(r.waits[i], Duration::zero()) << trace.ids[i];
      for (uint32_t d = 0; d < t.deps_count; ++d) {
        const uint32_t dep = trace.deps[t.deps_begin + d];
        EXPECT_GE(r.starts[i], r.starts[dep] + trace.tasks[dep].duration) << trace.ids[i];
      }
    }
    EXPECT_GE(r.makespan_s, bound.value_s() - 1e-6);
    EXPECT_LE(r.gpu_utilization, 1.0 + 1e-9);
    EXPECT_DOUBLE_EQ(r.idle_other_gpu_s, 0.0) << core::PolicyName(policy);
    // The idle profile accounts for every free GPU-second exactly once.
    double gpu_work = 0;
    for (const TraceTask& t : trace.tasks) {
      gpu_work += static_cast<double>(trace.RequestOf(t).gpus) / core::kWholeGpu *
                  static_cast<double>(t.duration.count()) / 1e6;
    }
    EXPECT_NEAR(r.idle.total_gpu_s(), 8 * r.makespan_s - gpu_work, 1e-6 * gpu_work)
        << core::PolicyName(policy);
    EXPECT_NEAR(8 * bound.plain_gpu_area_s, gpu_work, 1e-6 * gpu_work);
  }
}

// A GPU task waiting for a CPU task it depends on idles the GPU for a
// dependency; once the last task ends nothing is left to wait.
TEST(SimulatorTest, IdleProfileCountsAGpuTaskWaitingForItsDependency) {
  const Trace trace = TraceFrom(R"({"id":"prep","submit":0,"duration":5,"cpus":1}
{"id":"train","submit":0,"duration":10,"gpus":1,"deps":["prep"]}
)");
  const Cluster cluster =
      ClusterFrom(R"({"workers":[{"name":"w","cpus":4,"mem":"16GiB","gpus":1}]})");
  const SimResult r = Replay(trace, cluster);
  EXPECT_DOUBLE_EQ(r.makespan_s, 15.0);
  EXPECT_NEAR(r.idle.dependency_gpu_s, 5.0, 1e-9);
  EXPECT_DOUBLE_EQ(r.idle.fragmentation_gpu_s, 0.0);
  EXPECT_DOUBLE_EQ(r.idle.queue_empty_gpu_s, 0.0);
  EXPECT_NEAR(r.idle.total_gpu_s(), 5.0, 1e-9);
}

TEST(SimulatorTest, TaskThatFitsNoWorkerIsAnErrorNamingIt) {
  const Trace trace = TraceFrom(R"({"id":"small","submit":0,"duration":1}
{"id":"huge","submit":0,"duration":1,"gpus":8}
)");
  const Cluster cluster = ClusterFrom(R"({"workers":[{"cpus":4,"mem":"8GiB","gpus":4}]})");
  Result<SimResult> r = Simulate(trace, cluster, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("\"huge\""), std::string::npos) << r.status().message();
}

// Owner presence (idle-desktop mode). One worker with one GPU; task a runs
// 100 s from 0.
const char* kOneGpu = R"({"workers":[{"name":"ws","cpus":4,"mem":"16GiB","gpus":1}]})";

// A visit shorter than suspend_for: a is frozen 30-90 and finishes 60 s
// late; it held its GPU all along, and the owner took nothing else.
TEST(SimulatorTest, OwnerPresenceSuspendsATaskThatFinishesLaterByThePresence) {
  const Trace trace = TraceFrom(R"({"id":"a","submit":0,"duration":100,"gpus":1}
{"owner":"ws","from":30,"to":90}
)");
  const SimResult r = Replay(trace, ClusterFrom(kOneGpu));
  EXPECT_DOUBLE_EQ(r.makespan_s, 160.0);
  EXPECT_EQ(r.starts[0], Seconds(0));
  EXPECT_EQ(r.owners.presences, 1u);
  EXPECT_EQ(r.owners.suspended_attempts, 1u);
  EXPECT_EQ(r.owners.vacated_attempts, 0u);
  EXPECT_NEAR(r.owners.suspended_gpu_s, 60.0, 1e-9);
  EXPECT_NEAR(r.owners.suspended_cpu_s, 60.0, 1e-9);
  EXPECT_NEAR(r.owners.capacity_gpu_s, 60.0, 1e-9);
  EXPECT_NEAR(r.idle.owner_gpu_s, 0.0, 1e-9);
  EXPECT_NEAR(r.owners.useful_gpu_s, 100.0, 1e-9);
  EXPECT_NEAR(r.owners.throughput_kept, 1.0, 1e-12);  // 100 / (160 - 60)
  EXPECT_NEAR(r.gpu_utilization, 1.0, 1e-12);         // suspended, it holds the GPU
}

// A long visit: a is frozen at 30, vacated at 30 + suspend_for, and runs
// again in full once the owner leaves at 1000; its 30 s of work are lost.
TEST(SimulatorTest, OwnerStayingPastSuspendForVacatesATaskThatRunsAgainInFull) {
  const Trace trace = TraceFrom(R"({"id":"a","submit":0,"duration":100,"gpus":1}
{"owner":"ws","from":30,"to":1000}
)");
  const Cluster cluster = ClusterFrom(kOneGpu);
  const SimResult r = Replay(trace, cluster, SimOptions{.suspend_for = Seconds(60)});
  EXPECT_DOUBLE_EQ(r.makespan_s, 1100.0);
  EXPECT_EQ(r.starts[0], Seconds(1000));
  EXPECT_EQ(r.waits[0], Seconds(910));  // queued again from its vacate at 90
  EXPECT_EQ(r.owners.vacated_attempts, 1u);
  EXPECT_NEAR(r.owners.vacated_gpu_s, 30.0, 1e-9);
  EXPECT_NEAR(r.owners.vacated_cpu_s, 30.0, 1e-9);
  EXPECT_NEAR(r.owners.suspended_gpu_s, 60.0, 1e-9);
  EXPECT_NEAR(r.owners.capacity_gpu_s, 970.0, 1e-9);
  EXPECT_NEAR(r.idle.owner_gpu_s, 910.0, 1e-9);
  EXPECT_NEAR(r.idle.total_gpu_s(), 910.0, 1e-9);  // 1100 - (100 + 60 + 30) held
  EXPECT_NEAR(r.owners.throughput_kept, 100.0 / 130.0, 1e-12);

  // suspend_for 0: vacated at once, nothing held while the owner is there.
  const SimResult now = Replay(trace, cluster, SimOptions{.suspend_for = Duration::zero()});
  EXPECT_DOUBLE_EQ(now.makespan_s, 1100.0);
  EXPECT_EQ(now.owners.vacated_attempts, 1u);
  EXPECT_NEAR(now.owners.suspended_gpu_s, 0.0, 1e-9);
  EXPECT_NEAR(now.idle.owner_gpu_s, 970.0, 1e-9);

  // With checkpoints the second attempt runs only the 70 s left.
  const SimResult kept =
      Replay(trace, cluster, SimOptions{.suspend_for = Seconds(60), .checkpoint = true});
  EXPECT_DOUBLE_EQ(kept.makespan_s, 1070.0);
  EXPECT_EQ(kept.owners.vacated_attempts, 1u);
  EXPECT_DOUBLE_EQ(kept.owners.vacated_gpu_s, 0.0);
}

// A vacated task moves to a worker whose owner is away; a task that would
// fit the paused worker waits rather than start there.
TEST(SimulatorTest, NothingIsPlacedOnAWorkerWhoseOwnerIsPresent) {
  const Trace trace = TraceFrom(R"({"owner":"ws-1","from":0,"to":500}
{"id":"a","submit":0,"duration":100,"gpus":1}
{"id":"b","submit":0,"duration":100,"gpus":1}
)");
  const Cluster cluster =
      ClusterFrom(R"({"workers":[{"name":"ws","count":2,"cpus":4,"mem":"16GiB","gpus":1}]})");
  const SimResult r = Replay(trace, cluster);
  EXPECT_EQ(r.starts[IndexOf(trace, "a")], Seconds(0));
  EXPECT_EQ(r.starts[IndexOf(trace, "b")], Seconds(100));
  EXPECT_DOUBLE_EQ(r.makespan_s, 200.0);
  EXPECT_NEAR(r.idle.owner_gpu_s, 200.0, 1e-9);  // ws-1's GPU, the whole run
  EXPECT_DOUBLE_EQ(r.idle_other_gpu_s, 0.0);     // b never "fit" the paused GPU
  EXPECT_DOUBLE_EQ(r.idle.fragmentation_gpu_s, 0.0);
}

// The core counts a limit from the start, frozen time included: a task
// suspended past its limit is killed there and fails, and its dependent is
// canceled. The replay plays and counts both instead of calling it a bug.
// The limit ends 5 s after the owner leaves, within a renewal interval of
// that instant's Tick: the kill still comes exactly at 120.
TEST(SimulatorTest, ATaskSuspendedPastItsLimitIsKilledThereAndCounted) {
  const Trace trace = TraceFrom(R"({"id":"a","submit":0,"duration":100,"limit":120,"gpus":1}
{"id":"b","submit":0,"duration":10,"deps":["a"]}
{"owner":"ws","from":30,"to":115}
)");
  const SimResult r = Replay(trace, ClusterFrom(kOneGpu));
  EXPECT_DOUBLE_EQ(r.makespan_s, 120.0);
  EXPECT_EQ(r.owners.timed_out_tasks, 1u);
  EXPECT_EQ(r.owners.canceled_tasks, 1u);
  EXPECT_NEAR(r.owners.timed_out_gpu_s, 35.0, 1e-9);  // ran 0-30 and 115-120
  EXPECT_DOUBLE_EQ(r.owners.useful_gpu_s, 0.0);
}

// Invariants with owners on a generated trace, under every policy: the
// replay ends (every task once), nothing fitting idles outside
// reservations, and the figures add up.
TEST(SimulatorTest, OwnerFiguresAddUpOnAGeneratedTrace) {
  std::ostringstream text;
  GenerateOptions gen{5, 600, 8, 1.3};
  gen.owners = 1;
  ASSERT_TRUE(WriteSyntheticTrace(gen, text).ok());
  const Trace trace = TraceFrom(text.str());
  ASSERT_FALSE(trace.owners.empty());
  const Cluster cluster =
      ClusterFrom(R"({"workers":[{"name":"gpu","count":2,"cpus":32,"mem":"256GiB","gpus":4}]})");
  double gpu_work = 0;
  for (const TraceTask& t : trace.tasks) {
    gpu_work += static_cast<double>(trace.RequestOf(t).gpus) / core::kWholeGpu *
                static_cast<double>(t.duration.count()) / 1e6;
  }
  for (Duration suspend_for : {Duration::zero(), Seconds(600)}) {
    for (core::PolicyKind policy :
         {core::PolicyKind::kSpread, core::PolicyKind::kPack, core::PolicyKind::kRoundRobin}) {
      const SimResult r = Replay(trace, cluster, SimOptions{policy, true, suspend_for});
      const OwnerFigures& o = r.owners;
      const std::string what =
          std::string(core::PolicyName(policy)) + " suspend_for " + FormatDuration(suspend_for);
      EXPECT_GT(o.vacated_attempts, 0u) << what;
      EXPECT_GT(o.capacity_gpu_s, 0.0) << what;
      const double held = r.gpu_utilization * 8 * r.makespan_s;
      EXPECT_NEAR(held, o.useful_gpu_s + o.suspended_gpu_s + o.vacated_gpu_s + o.timed_out_gpu_s,
                  1e-6 * held)
          << what;
      EXPECT_NEAR(o.capacity_gpu_s, o.suspended_gpu_s + r.idle.owner_gpu_s, 1e-6 * held) << what;
      EXPECT_NEAR(r.idle.total_gpu_s(), 8 * r.makespan_s - held, 1e-6 * held) << what;
      EXPECT_DOUBLE_EQ(r.idle_other_gpu_s, 0.0) << what;
      if (suspend_for == Duration::zero()) {
        EXPECT_DOUBLE_EQ(o.suspended_gpu_s, 0.0) << what;
      }
      if (o.timed_out_tasks == 0) {
        EXPECT_NEAR(o.useful_gpu_s, gpu_work, 1e-6 * gpu_work) << what;  // every task finished
      }
      for (size_t i = 0; i < trace.tasks.size(); ++i) {
        if (r.starts[i] == Duration::zero()) continue;  // never started (canceled)
        EXPECT_GE(r.starts[i], trace.tasks[i].submit) << trace.ids[i];
      }
    }
  }
}

TEST(SimulatorTest, OwnerOfAWorkerTheClusterLacksIsAnErrorNamingTheLine) {
  const Trace trace = TraceFrom(R"({"submit":0,"duration":1}
{"owner":"gpu-9","from":0,"to":10}
)");
  Result<SimResult> r = Simulate(trace, ClusterFrom(kOneGpu), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "test.jsonl:2: owner: no worker \"gpu-9\" in the cluster");
}

TEST(SimulatorTest, WaitStatsUseNearestRank) {
  std::vector<Duration> waits;
  for (int i = 1; i <= 20; ++i) waits.push_back(Seconds(i));
  const WaitStats s = ComputeWaitStats(waits);
  EXPECT_DOUBLE_EQ(s.mean_s, 10.5);
  EXPECT_DOUBLE_EQ(s.p50_s, 10.0);
  EXPECT_DOUBLE_EQ(s.p95_s, 19.0);
  EXPECT_DOUBLE_EQ(s.max_s, 20.0);
}

// What fair share promises: three users with equal shares and unequal demand
// on a contended pool each get a third of the GPU-seconds (within 5%) while
// all of them have work waiting; without fair share the first to submit
// takes the pool. A user who arrives late catches up, then levels off.
TEST(SimulatorTest, FairShareGivesEachOfThreeUsersAThirdAndALateUserCatchesUp) {
  std::string text;
  const std::pair<const char*, int> demand[] = {{"ana", 90}, {"bob", 60}, {"cy", 30}};
  for (const auto& [user, n] : demand) {
    for (int i = 0; i < n; ++i) {
      text += std::string(R"({"id":")") + user + std::to_string(i) +
              R"(","submit":0,"duration":"1h","gpus":1,"user":")" + user + "\"}\n";
    }
  }
  const Trace trace = TraceFrom(text);
  const Cluster cluster = ClusterFrom(
      R"({"workers":[{"name":"w","cpus":8,"mem":"64GiB","gpus":4,"gpu_mem":"80GiB"}]})");
  SimOptions off;
  off.fair_share.enabled = false;
  const SimResult fifo = Replay(trace, cluster, off);
  const SimResult fair = Replay(trace, cluster);
  ASSERT_EQ(fair.shares.busy.size(), 3u);
  EXPECT_GT(fair.shares.busy_to_s, 20 * 3600.0);  // cy's 30 hours of work at a third of 4 GPUs
  for (double share : fair.shares.busy) EXPECT_NEAR(share, 1.0 / 3, 0.05 / 3) << FormatUsers(fair);
  // First come, first served: ana holds the pool until her 90 tasks ran.
  ASSERT_EQ(fifo.shares.busy.size(), 3u);
  EXPECT_GT(fifo.shares.busy[0], 0.9) << FormatUsers(fifo);

  // dee arrives at 10 h with as much work as ana: she gets more than a
  // quarter while she catches up, then about a quarter.
  std::string late = text;
  for (int i = 0; i < 90; ++i) {
    late += R"({"id":"dee)" + std::to_string(i) +
            R"(","submit":"10h","duration":"1h","gpus":1,"user":"dee"})" + "\n";
  }
  SimOptions with;
  const SimResult r = Replay(TraceFrom(late), cluster, with);
  ASSERT_FALSE(r.shares.windows.empty());
  const size_t dee = 3;
  // The window she arrives in (at 10 h of its 6.8-13.6 h) and the ones
  // after it while all four have work (cy, the smallest, still runs).
  double arrival = -1, later = 0;
  int later_windows = 0;
  for (const ShareFigures::Window& w : r.shares.windows) {
    if (w.from_s < 10 * 3600.0 && w.to_s > 10 * 3600.0) arrival = w.shares[dee];
    if (w.from_s >= 10 * 3600.0 && w.shares[2] > 0.2) {
      later += w.shares[dee];
      ++later_windows;
    }
  }
  // Present for the last 3.6 h of a 6.8 h window: 0.53 of it, so over a
  // third of the window's GPU-seconds means she had most GPUs meanwhile.
  EXPECT_GT(arrival, 0.34) << FormatUsers(r);
  ASSERT_GT(later_windows, 0) << FormatUsers(r);
  EXPECT_NEAR(later / later_windows, 0.25, 0.05) << FormatUsers(r);
}

}  // namespace
}  // namespace drover::sim

namespace drover::sim {
namespace {

// Data locality, by hand: pack fills worker a first. prep (1 cpu, leaves
// 1 GiB) and hold (1 cpu) go to a; big (3 cpus) fits only b. When prep ends
// at 10, a has 3 free cores and b 1, so pack alone sends its dependent to
// b, the fuller, and the gigabyte crosses; with the locality term (pack's
// tolerance: no whole GPU broken, and there are none) it stays on a.
TEST(SimulatorTest, LocalityKeepsAnInputOnItsWorker) {
  const Trace trace = TraceFrom(R"({"id":"prep","submit":0,"duration":10,"output":"1GiB"}
{"id":"hold","submit":0,"duration":100}
{"id":"big","submit":0,"duration":100,"cpus":3}
{"id":"use","submit":0,"duration":30,"deps":["prep"]}
)");
  EXPECT_EQ(trace.tasks[0].output_bytes, 1ull << 30);
  const Cluster cluster = ClusterFrom(
      R"({"workers":[{"name":"a","cpus":4,"mem":"16GiB"},{"name":"b","cpus":4,"mem":"16GiB"}]})");
  SimOptions off;
  off.policy = core::PolicyKind::kPack;
  off.locality = false;
  SimOptions on = off;
  on.locality = true;
  const SimResult without = Replay(trace, cluster, off);
  const SimResult with = Replay(trace, cluster, on);
  EXPECT_EQ(without.input_bytes, 1ull << 30);
  EXPECT_EQ(without.moved_bytes, 1ull << 30);
  EXPECT_EQ(with.input_bytes, 1ull << 30);
  EXPECT_EQ(with.moved_bytes, 0u);
  EXPECT_TRUE(with.locality);
  EXPECT_FALSE(without.locality);
  EXPECT_DOUBLE_EQ(with.makespan_s, 100.0);
  EXPECT_DOUBLE_EQ(without.makespan_s, 100.0);
  const MakespanBound bound = ComputeBound(trace, cluster);
  EXPECT_NE(FormatText(without, bound, cluster)
                .find("\ninputs      1 GiB read by dependents, 1 GiB of it (100.0%) from another "
                      "worker (locality off)\n"),
            std::string::npos)
      << FormatText(without, bound, cluster);
  EXPECT_NE(
      FormatJson(with, bound).find(R"("locality":true,"input_bytes":1073741824,"moved_bytes":0)"),
      std::string::npos)
      << FormatJson(with, bound);
}

TEST(SimulatorTest, ATraceOutputMustBeAQuantityOfBytes) {
  std::istringstream in(R"({"id":"p","submit":0,"duration":1,"output":"lots"})");
  Result<Trace> t = ParseTrace(in, "t.jsonl");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("t.jsonl:1: output"), std::string::npos)
      << t.status().ToString();
}

// Two cores. "heavy" queues 20 tasks of 100 s at 0; "light" queues 4 at 50.
// First in, first out, light waits for all of heavy's (until 1000 s). With
// fair share, light has used nothing when the first two cores free at 100,
// so two of its tasks start then, and its mean wait falls below a quarter.
TEST(SimulatorTest, FairShareLetsAUserWhoUsedLittlePassAFlood) {
  std::string text;
  for (int i = 0; i < 20; ++i) {
    text +=
        R"({"id":"h)" + std::to_string(i) + R"(","submit":0,"duration":100,"user":"heavy"})" + "\n";
  }
  for (int i = 0; i < 4; ++i) {
    text += R"({"id":"l)" + std::to_string(i) + R"(","submit":50,"duration":100,"user":"light"})" +
            "\n";
  }
  const Trace trace = TraceFrom(text);
  const Cluster cluster = ClusterFrom(R"({"workers":[{"name":"w","cpus":2,"mem":"8GiB"}]})");

  SimOptions off;
  off.fair_share.enabled = false;
  const SimResult fifo = Replay(trace, cluster, off);
  const SimResult fair = Replay(trace, cluster);
  EXPECT_FALSE(fifo.fair_share);
  EXPECT_TRUE(fair.fair_share);
  EXPECT_EQ(fifo.starts[IndexOf(trace, "l0")], Seconds(1000));
  EXPECT_EQ(fair.starts[IndexOf(trace, "l0")], Seconds(100));
  EXPECT_EQ(fair.starts[IndexOf(trace, "l1")], Seconds(100));
  EXPECT_DOUBLE_EQ(fifo.makespan_s, fair.makespan_s);  // the same work, reordered

  ASSERT_EQ(fair.users.size(), 2u);
  const UserFigures& light = fair.users[1];
  EXPECT_EQ(light.user, "light");
  EXPECT_EQ(light.tasks, 4u);
  EXPECT_DOUBLE_EQ(light.cpu_s, 400.0);
  EXPECT_DOUBLE_EQ(fair.users[0].cpu_s, 2000.0);
  EXPECT_DOUBLE_EQ(fifo.users[1].wait_mean_s, 1000.0);  // 950, 950, 1050, 1050
  EXPECT_LT(light.wait_mean_s, fifo.users[1].wait_mean_s / 4);
  EXPECT_EQ(FormatUsers(fair).substr(0, FormatUsers(fair).find("  share of")),
            "users       fair share on\n"
            "  heavy  20 tasks, 0.0 GPU-s, 2000.0 core-s; wait mean " +
                Fixed1(fair.users[0].wait_mean_s) + " s, p95 " + Fixed1(fair.users[0].wait_p95_s) +
                " s, max " + Fixed1(fair.users[0].wait_max_s) +
                " s\n"
                "  light  4 tasks, 0.0 GPU-s, 400.0 core-s; wait mean " +
                Fixed1(light.wait_mean_s) + " s, p95 " + Fixed1(light.wait_p95_s) + " s, max " +
                Fixed1(light.wait_max_s) + " s\n");
}

}  // namespace
}  // namespace drover::sim

namespace drover::sim {
namespace {

// A black hole (SimOptions::black_hole): every attempt there fails in a
// second, and each task may retry twice. Without quarantine it burns
// tasks' retries until they fail; with it, a handful of attempts fail
// there before it takes nothing more, and nearly every task succeeds.
TEST(SimulatorTest, ABlackHoleBurnsTasksWithoutQuarantineAndAFewWithIt) {
  std::string text;
  for (int i = 0; i < 200; ++i) {
    text += R"({"id":"t)" + std::to_string(i) + R"(","submit":)" + std::to_string(i / 20 * 60) +
            R"(,"duration":120,"cpus":1})" + "\n";
  }
  const Trace trace = TraceFrom(text);
  const Cluster cluster =
      ClusterFrom(R"({"workers":[{"name":"w","count":4,"cpus":4,"mem":"16GiB"}]})");
  SimOptions on;
  on.black_hole = "w-2";
  Result<SimResult> with = Simulate(trace, cluster, on);
  ASSERT_TRUE(with.ok()) << with.status().ToString();
  SimOptions off = on;
  off.quarantine = false;
  Result<SimResult> without = Simulate(trace, cluster, off);
  ASSERT_TRUE(without.ok()) << without.status().ToString();
  EXPECT_EQ(with->black_hole.worker, "w-2");
  EXPECT_TRUE(with->black_hole.quarantine);
  EXPECT_FALSE(without->black_hole.quarantine);
  EXPECT_GT(without->black_hole.failed_tasks, 20u);
  EXPECT_LE(with->black_hole.failed_tasks, 4u);  // at most 2% of 200
  EXPECT_LT(with->black_hole.failed_attempts, without->black_hole.failed_attempts / 4);
  // An unknown worker is named.
  SimOptions bad;
  bad.black_hole = "nope";
  Result<SimResult> none = Simulate(trace, cluster, bad);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no worker \"nope\""), std::string::npos);
}

// The result cache (trace "key"): a task whose key and user an earlier
// success had is reused without running, and so is its dependent, whose
// input is the same bytes; a key that changed runs, and its dependent with
// it; another user's runs. Figures by hand: b's and d's GPU work saved.
TEST(SimulatorTest, RepeatedKeysAreReusedWithoutRunning) {
  const Trace trace = TraceFrom(R"({"id":"a","submit":0,"duration":10,"gpus":1,"key":"prep","output":"1GiB"}
{"id":"b","submit":0,"duration":20,"gpus":1,"key":"train","deps":["a"]}
{"id":"c","submit":100,"duration":10,"gpus":1,"key":"prep","output":"1GiB"}
{"id":"d","submit":100,"duration":20,"gpus":1,"key":"train","deps":["c"]}
{"id":"e","submit":200,"duration":10,"gpus":1,"key":"prep2","output":"1GiB"}
{"id":"f","submit":200,"duration":20,"gpus":1,"key":"train","deps":["e"]}
{"id":"g","submit":300,"duration":10,"gpus":1,"key":"prep","user":"other"}
)");
  const Cluster cluster =
      ClusterFrom(R"({"workers":[{"name":"w","cpus":8,"mem":"64GiB","gpus":2}]})");
  const SimResult r = Replay(trace, cluster);
  EXPECT_TRUE(r.cache.on);
  EXPECT_EQ(r.cache.keyed_tasks, 7u);
  EXPECT_EQ(r.cache.reused_tasks, 2u);  // c and d
  EXPECT_DOUBLE_EQ(r.cache.saved_gpu_s, 30.0);
  EXPECT_EQ(r.starts[IndexOf(trace, "c")], Duration::zero());
  EXPECT_EQ(r.makespan_s, 310.0);  // g runs 300-310
  EXPECT_NE(FormatText(r, ComputeBound(trace, cluster), cluster).find(
                "cache       2 of 7 cached tasks reused without running (28.6% of all), 0.0 "
                "GPU-hours"),
            std::string::npos)
      << FormatText(r, ComputeBound(trace, cluster), cluster);
  // A trace without keys reports nothing of it.
  EXPECT_FALSE(Replay(TraceFrom(R"({"id":"a","submit":0,"duration":10,"gpus":1}
)"),
                      cluster)
                   .cache.on);
}

}  // namespace
}  // namespace drover::sim
