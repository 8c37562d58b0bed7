// Lineage: a succeeded task whose outputs were lost with their
// only holder runs again while a dependent still needs them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/scheduler.h"
#include "core/testing/restore_check.h"
#include "core/testing/test_cluster.h"

namespace drover::core {
namespace {

using ::testing::Contains;
using testing::FirstDifference;
using testing::JobBuilder;
using ::testing::Not;
using testing::RestoredFrom;
using testing::T;
using testing::TaskBuilder;
using testing::TestCluster;
using testing::WorkerBuilder;

TaskOutcome WithFile(const std::string& name) {
  TaskOutcome o;
  o.outputs = {OutputFile{name, 1 << 20, std::string(64, 'a')}};
  return o;
}

// The lease bound of the default config: lease_ttl 30 s + expiry_grace 10 s.
constexpr Duration kBound = Seconds(40);

// prep runs on worker 1 (label a), use on worker 2 (label b).
struct Pipeline {
  explicit Pipeline(TestCluster& c, int steps = 2) {
    c.AddWorker(WorkerBuilder().Cpus(1).Label("at", "a"));
    c.AddWorker(WorkerBuilder().Cpus(1).Label("at", "b"));
    JobBuilder job;
    job.Add(TaskBuilder("prep").Label("at", "a"));
    if (steps == 3) job.Add(TaskBuilder("mid").Label("at", "a").DependsOn("prep"));
    job.Add(TaskBuilder("use").Label("at", "b").DependsOn(steps == 3 ? "mid" : "prep"));
    c.Submit(job);
  }
};

TaskState StateOf(TestCluster& c, TaskId t) { return c.scheduler().GetTask(t)->state; }

// Dependents sit assigned (fetching) for longer than a start bound here.
SchedulerConfig NoStartBound() {
  SchedulerConfig config;
  config.start_timeout = Duration::zero();
  return config;
}

TEST(LineageTest, AProducerWhoseHolderIsLostRunsAgainBeforeItsDependentStarts) {
  TestCluster c(NoStartBound());
  Pipeline p(c);
  c.Run(T(1, 0));
  c.FinishWith(T(1, 0), WithFile("train.csv"));
  c.Grant(T(1, 1));  // use: sent to worker 2, fetching its input
  ASSERT_EQ(StateOf(c, T(1, 1)), TaskState::kAssigned);
  c.Take();
  c.Handle(WorkerLost{1});
  c.Advance(kBound - Seconds(1));
  EXPECT_EQ(StateOf(c, T(1, 0)), TaskState::kSucceeded) << "not before the lease bound";
  c.Advance(Seconds(1));
  EXPECT_THAT(c.Take(),
              Contains("state 1.0 succeeded->queued #1: rerun: outputs lost with worker 1"));
  EXPECT_EQ(c.scheduler().GetTask(T(1, 0))->reason, "rerun: outputs lost with worker 1");
  ASSERT_EQ(c.scheduler().PastAttempts(T(1, 0)).size(), 1u);
  EXPECT_EQ(c.scheduler().PastAttempts(T(1, 0))[0].reason, "rerun: outputs lost with worker 1");
  EXPECT_EQ(c.scheduler().PastAttempts(T(1, 0))[0].kind, EndKind::kRerun);
  // The dependent's fetch fails; refused, it waits for the rerun instead of
  // being placed again.
  c.Handle(TaskRefused{T(1, 1), c.Attempt(T(1, 1)), 2, "fetch failed: worker 1 unreachable"});
  EXPECT_EQ(StateOf(c, T(1, 1)), TaskState::kWaiting);
  c.Handle(WorkerHeartbeat{2, {}});  // it takes work again after refusing
  // A worker like 1 joins; prep runs there again and use follows.
  c.AddWorker(WorkerBuilder().Cpus(1).Label("at", "a"));
  ASSERT_EQ(StateOf(c, T(1, 0)), TaskState::kAssigned);
  EXPECT_EQ(c.Attempt(T(1, 0)), 2u);
  c.Run(T(1, 0));
  c.FinishWith(T(1, 0), WithFile("train.csv"));
  EXPECT_EQ(StateOf(c, T(1, 1)), TaskState::kAssigned);
  c.Run(T(1, 1));
  c.Finish(T(1, 1));
  EXPECT_EQ(StateOf(c, T(1, 1)), TaskState::kSucceeded);
  // The journal and a snapshot restore to what the live scheduler shows.
  std::unique_ptr<Scheduler> from_journal = RestoredFrom(c.journal(), c.now());
  ASSERT_NE(from_journal, nullptr);
  EXPECT_EQ(from_journal->GetTask(T(1, 0))->attempt, 2u);
  ASSERT_EQ(from_journal->PastAttempts(T(1, 0)).size(), 1u);
  EXPECT_EQ(from_journal->PastAttempts(T(1, 0))[0].kind, EndKind::kRerun);
  std::unique_ptr<Scheduler> from_snapshot = RestoredFrom(c.scheduler().Snapshot(), c.now());
  ASSERT_NE(from_snapshot, nullptr);
  EXPECT_EQ(FirstDifference(*from_journal, *from_snapshot), "");
}

TEST(LineageTest, AQueuedDependentGoesBackToWaiting) {
  TestCluster c(NoStartBound());
  Pipeline p(c);
  c.Run(T(1, 0));
  c.Handle(WorkerDrained{2, true});  // use cannot be placed: it stays queued
  c.FinishWith(T(1, 0), WithFile("train.csv"));
  ASSERT_EQ(StateOf(c, T(1, 1)), TaskState::kQueued);
  c.Handle(WorkerLost{1});
  c.Advance(kBound);
  EXPECT_EQ(StateOf(c, T(1, 0)), TaskState::kQueued);
  EXPECT_EQ(StateOf(c, T(1, 1)), TaskState::kWaiting);
  // Its dead queue entry places nothing when worker 2 takes work again.
  c.Handle(WorkerDrained{2, false});
  c.Advance(Seconds(1));
  EXPECT_EQ(StateOf(c, T(1, 1)), TaskState::kWaiting);
  c.AddWorker(WorkerBuilder().Cpus(1).Label("at", "a"));
  c.Run(T(1, 0));
  c.FinishWith(T(1, 0), WithFile("train.csv"));
  EXPECT_EQ(StateOf(c, T(1, 1)), TaskState::kAssigned);
  EXPECT_EQ(c.Attempt(T(1, 1)), 1u);
}

TEST(LineageTest, AHolderBackWithinTheLeaseBoundKeepsItsOutputs) {
  TestCluster c(NoStartBound());
  Pipeline p(c);
  c.Run(T(1, 0));
  c.FinishWith(T(1, 0), WithFile("train.csv"));
  c.Grant(T(1, 1));
  c.Handle(WorkerLost{1});
  c.Advance(Seconds(5));
  c.Handle(WorkerJoined{1, WorkerBuilder().Cpus(1).Label("at", "a").Build()});  // it re-joins
  c.Advance(kBound);
  EXPECT_EQ(StateOf(c, T(1, 0)), TaskState::kSucceeded);
  EXPECT_EQ(StateOf(c, T(1, 1)), TaskState::kAssigned);
}

TEST(LineageTest, NothingRerunsWhenEveryDependentHasItsInputsAlready) {
  TestCluster c(NoStartBound());
  Pipeline p(c);
  c.Run(T(1, 0));
  c.FinishWith(T(1, 0), WithFile("train.csv"));
  c.Run(T(1, 1));  // started: its inputs are in place
  c.Take();
  c.Handle(WorkerLost{1});
  c.Advance(kBound + Seconds(5));
  EXPECT_EQ(StateOf(c, T(1, 0)), TaskState::kSucceeded);
  EXPECT_THAT(c.Take(),
              Not(Contains("state 1.0 succeeded->queued #1: rerun: outputs lost with worker 1")));
}

TEST(LineageTest, TaskWithoutOutputFilesNeverReruns) {
  TestCluster c(NoStartBound());
  Pipeline p(c);
  c.Run(T(1, 0));
  TaskOutcome o;
  o.result = "42";  // the small result travels with the server, not the worker
  c.FinishWith(T(1, 0), o);
  c.Grant(T(1, 1));
  c.Handle(WorkerLost{1});
  c.Advance(kBound + Seconds(5));
  EXPECT_EQ(StateOf(c, T(1, 0)), TaskState::kSucceeded);
}

// A dependent that started (inputs in place) fails later with retries left:
// its next attempt needs the inputs again, so the producer reruns then.
TEST(LineageTest, ARetryAfterTheHolderIsGoneRerunsTheProducerFirst) {
  TestCluster c(NoStartBound());
  c.AddWorker(WorkerBuilder().Cpus(1).Label("at", "a"));
  c.AddWorker(WorkerBuilder().Cpus(1).Label("at", "b"));
  c.Submit(JobBuilder()
               .Add(TaskBuilder("prep").Label("at", "a"))
               .Add(TaskBuilder("use").Label("at", "b").DependsOn("prep").Retries(2, Seconds(1))));
  c.Run(T(1, 0));
  c.FinishWith(T(1, 0), WithFile("train.csv"));
  c.Run(T(1, 1));
  c.Handle(WorkerLost{1});
  c.Advance(kBound);
  EXPECT_EQ(StateOf(c, T(1, 0)), TaskState::kSucceeded);
  c.Finish(T(1, 1), 1);
  c.Advance(Seconds(1));  // its backoff ends
  EXPECT_EQ(StateOf(c, T(1, 0)), TaskState::kQueued);
  EXPECT_EQ(c.scheduler().GetTask(T(1, 0))->reason, "rerun: outputs lost with worker 1");
  EXPECT_EQ(StateOf(c, T(1, 1)), TaskState::kWaiting);
  c.AddWorker(WorkerBuilder().Cpus(1).Label("at", "a"));
  c.Run(T(1, 0));
  c.FinishWith(T(1, 0), WithFile("train.csv"));
  EXPECT_EQ(StateOf(c, T(1, 1)), TaskState::kAssigned);
}

// prep -> mid -> use, prep and mid both on the lost worker: mid reruns, and
// so does prep, whose outputs mid needs again.
TEST(LineageTest, TheRerunReachesBackThroughProducersOnTheSameLostWorker) {
  TestCluster c(NoStartBound());
  Pipeline p(c, 3);
  c.Run(T(1, 0));
  c.FinishWith(T(1, 0), WithFile("a.bin"));
  c.Run(T(1, 1));
  c.FinishWith(T(1, 1), WithFile("b.bin"));
  c.Grant(T(1, 2));
  c.Handle(WorkerLost{1});
  c.Advance(kBound);
  EXPECT_EQ(StateOf(c, T(1, 0)), TaskState::kQueued);
  EXPECT_EQ(StateOf(c, T(1, 1)), TaskState::kWaiting);
  EXPECT_EQ(c.scheduler().GetTask(T(1, 1))->reason, "rerun: outputs lost with worker 1");
  c.AddWorker(WorkerBuilder().Cpus(1).Label("at", "a"));
  c.Run(T(1, 0));
  c.FinishWith(T(1, 0), WithFile("a.bin"));
  EXPECT_EQ(StateOf(c, T(1, 1)), TaskState::kAssigned);
  c.Run(T(1, 1));
  c.FinishWith(T(1, 1), WithFile("b.bin"));
  c.Handle(TaskRefused{T(1, 2), c.Attempt(T(1, 2)), 2, "fetch failed"});
  c.Handle(WorkerHeartbeat{2, {}});
  EXPECT_EQ(StateOf(c, T(1, 2)), TaskState::kAssigned) << "placed again, inputs held again";
  std::unique_ptr<Scheduler> from_journal = RestoredFrom(c.journal(), c.now());
  std::unique_ptr<Scheduler> from_snapshot = RestoredFrom(c.scheduler().Snapshot(), c.now());
  ASSERT_NE(from_journal, nullptr);
  ASSERT_NE(from_snapshot, nullptr);
  EXPECT_EQ(FirstDifference(*from_journal, *from_snapshot), "");
}

// mid's own dependency src ran again and failed after mid succeeded: mid
// cannot run again, so when mid's outputs are lost too, use (which still
// needs them) is canceled with the reason instead of waiting forever.
TEST(LineageTest, AProducerThatCannotRunAgainCancelsWhatStillNeedsIt) {
  TestCluster c(NoStartBound());
  c.AddWorker(WorkerBuilder().Cpus(1).Label("at", "a"));  // 1
  c.AddWorker(WorkerBuilder().Cpus(1).Label("at", "b"));  // 2
  c.AddWorker(WorkerBuilder().Cpus(1).Label("at", "c"));  // 3
  c.AddWorker(WorkerBuilder().Cpus(1).Label("at", "d"));  // 4
  JobBuilder job;
  job.Add(TaskBuilder("src").Label("at", "a"));
  job.Add(TaskBuilder("mid").Label("at", "b").DependsOn("src"));
  job.Add(TaskBuilder("other").Label("at", "d").DependsOn("src"));
  job.Add(TaskBuilder("use").Label("at", "c").DependsOn("mid").Retries(1, Seconds(1)));
  c.Submit(job);
  c.Handle(WorkerDrained{4, true});  // other stays queued: it needs src
  c.Run(T(1, 0));
  c.FinishWith(T(1, 0), WithFile("src.bin"));
  c.Run(T(1, 1));
  c.FinishWith(T(1, 1), WithFile("mid.bin"));
  c.Run(T(1, 3));  // use runs
  c.Handle(WorkerLost{1});
  c.Advance(kBound);
  ASSERT_EQ(StateOf(c, T(1, 0)), TaskState::kQueued) << "src reruns for other";
  c.AddWorker(WorkerBuilder().Cpus(1).Label("at", "a"));  // 5
  c.Run(T(1, 0));
  c.Finish(T(1, 0), 1);  // src fails for good: other is canceled
  ASSERT_EQ(StateOf(c, T(1, 0)), TaskState::kFailed);
  ASSERT_EQ(StateOf(c, T(1, 2)), TaskState::kCanceled);
  c.Finish(T(1, 3), 1);  // use fails once; its retry waits for its backoff
  ASSERT_EQ(StateOf(c, T(1, 3)), TaskState::kQueued);
  c.Handle(WorkerLost{2});  // mid's outputs go
  c.Advance(kBound);
  EXPECT_EQ(StateOf(c, T(1, 1)), TaskState::kSucceeded);
  EXPECT_EQ(StateOf(c, T(1, 3)), TaskState::kCanceled);
  EXPECT_EQ(c.scheduler().GetTask(T(1, 3))->reason,
            "dependency 1.1 lost its outputs with worker 2 and cannot run again");
  std::unique_ptr<Scheduler> from_journal = RestoredFrom(c.journal(), c.now());
  std::unique_ptr<Scheduler> from_snapshot = RestoredFrom(c.scheduler().Snapshot(), c.now());
  ASSERT_NE(from_journal, nullptr);
  ASSERT_NE(from_snapshot, nullptr);
  EXPECT_EQ(FirstDifference(*from_journal, *from_snapshot), "");
}

}  // namespace
}  // namespace drover::core
