// Replicas: `replicas = 2` keeps a copy of a task's outputs on a
// second worker, so losing one worker loses no work.
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
using ::testing::ElementsAre;
using testing::FirstDifference;
using ::testing::IsEmpty;
using testing::JobBuilder;
using testing::RestoredFrom;
using testing::T;
using testing::TaskBuilder;
using testing::TestCluster;
using testing::WorkerBuilder;

TaskOutcome WithFile(const std::string& name) {
  TaskOutcome o;
  o.outputs = {OutputFile{name, 4 << 20, std::string(64, 'e')}};
  return o;
}

constexpr Duration kBound = Seconds(40);  // lease_ttl 30 s + expiry_grace 10 s

SchedulerConfig NoStartBound() {
  SchedulerConfig config;
  config.start_timeout = Duration::zero();
  return config;
}

std::vector<ReplicateOutputs> Copies(const std::vector<Command>& commands) {
  std::vector<ReplicateOutputs> copies;
  for (const Command& c : commands) {
    if (const auto* r = std::get_if<ReplicateOutputs>(&c)) copies.push_back(*r);
  }
  return copies;
}

// The pool most tests start from: worker 1 (label at=a) and `others`
// plain one-CPU workers (2, 3, ...), and job 1: prep (1.0, on worker 1,
// `replicas` copies of its outputs), then, unless `alone`, use (1.1,
// needing a worker labelled at=b, none yet) after it. prep runs; its
// assignment's commands are taken.
struct ReplicaPool {
  explicit ReplicaPool(int others, uint32_t replicas = 2, bool alone = false) : c(NoStartBound()) {
    c.AddWorker(WorkerBuilder().Cpus(1).Label("at", "a"));
    for (int i = 0; i < others; ++i) c.AddWorker(WorkerBuilder().Cpus(1));
    JobBuilder job;
    job.Add(TaskBuilder("prep").Label("at", "a").Replicas(replicas));
    if (!alone) job.Add(TaskBuilder("use").Label("at", "b").DependsOn("prep"));
    c.Submit(job);
    c.Run(T(1, 0));
    c.TakeRaw();
  }
  // prep succeeds with one output; worker 2 reports its copy when `copied`.
  void PrepSucceeds(bool copied) {
    c.FinishWith(T(1, 0), WithFile("data.bin"));
    if (copied) c.Handle(OutputsReplicated{T(1, 0), 1, 2});
  }
  TestCluster c;
};

TEST(ReplicasTest, ASuccessAsksAnotherWorkerForACopyAndCountsItWhenReported) {
  ReplicaPool pool(1);
  TestCluster& c = pool.c;
  pool.PrepSucceeds(/*copied=*/false);
  std::vector<ReplicateOutputs> copies = Copies(c.TakeRaw());
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].task, T(1, 0));
  EXPECT_EQ(copies[0].attempt, 1u);
  EXPECT_EQ(copies[0].to, 2u);
  EXPECT_THAT(copies[0].from, ElementsAre(1u));
  ASSERT_EQ(copies[0].files.size(), 1u);
  EXPECT_EQ(copies[0].files[0].name, "data.bin");
  // Reported: the outcome lists it, journaled.
  c.Handle(OutputsReplicated{T(1, 0), 1, 2});
  EXPECT_THAT(c.scheduler().GetTask(T(1, 0))->outcome->replicas, ElementsAre(2u));
  // Twice, from a stale attempt, or from the holder: ignored.
  EXPECT_FALSE(c.TryHandle(OutputsReplicated{T(1, 0), 1, 2}).ok());
  EXPECT_FALSE(c.TryHandle(OutputsReplicated{T(1, 0), 2, 2}).ok());
  EXPECT_FALSE(c.TryHandle(OutputsReplicated{T(1, 0), 1, 1}).ok());
  std::unique_ptr<Scheduler> from_journal = RestoredFrom(c.journal(), c.now());
  ASSERT_NE(from_journal, nullptr);
  EXPECT_THAT(from_journal->GetTask(T(1, 0))->outcome->replicas, ElementsAre(2u));
  std::unique_ptr<Scheduler> from_snapshot = RestoredFrom(c.scheduler().Snapshot(), c.now());
  ASSERT_NE(from_snapshot, nullptr);
  EXPECT_EQ(FirstDifference(*from_journal, *from_snapshot), "");
}

TEST(ReplicasTest, WithoutReplicasOrAnotherWorkerNoCopyIsAsked) {
  for (uint32_t replicas : {1u, 2u}) {
    ReplicaPool pool(0, replicas, /*alone=*/true);
    pool.PrepSucceeds(/*copied=*/false);
    EXPECT_THAT(Copies(pool.c.TakeRaw()), IsEmpty()) << replicas;
  }
}

TEST(ReplicasTest, LosingTheFirstHolderLosesNoWorkAndAFreshCopyIsMade) {
  ReplicaPool pool(2);
  TestCluster& c = pool.c;
  pool.PrepSucceeds(/*copied=*/true);
  c.TakeRaw();
  c.Handle(WorkerLost{1});
  c.Advance(kBound);
  EXPECT_EQ(c.scheduler().GetTask(T(1, 0))->state, TaskState::kSucceeded) << "no rerun";
  EXPECT_EQ(c.scheduler().GetTask(T(1, 0))->outcome->outputs_on, 2u) << "the copy holds them";
  EXPECT_THAT(c.scheduler().GetTask(T(1, 0))->outcome->replicas, IsEmpty());
  std::vector<ReplicateOutputs> copies = Copies(c.TakeRaw());
  ASSERT_EQ(copies.size(), 1u) << "a second copy again";
  EXPECT_EQ(copies[0].to, 3u);
  EXPECT_THAT(copies[0].from, ElementsAre(2u));
  // use, on a new worker b, gets its input from worker 2.
  c.AddWorker(WorkerBuilder().Cpus(1).Label("at", "b"));
  ASSERT_EQ(c.scheduler().GetTask(T(1, 1))->state, TaskState::kAssigned);
  c.Grant(T(1, 1));
  const AssignTask* assign = nullptr;
  std::vector<Command> commands = c.TakeRaw();
  for (const Command& cmd : commands) {
    if (const auto* a = std::get_if<AssignTask>(&cmd); a && a->task == T(1, 1)) assign = a;
  }
  ASSERT_NE(assign, nullptr);
  ASSERT_NE(assign->inputs, nullptr);
  EXPECT_EQ((*assign->inputs)[0].outputs_on, 2u);
  std::unique_ptr<Scheduler> from_journal = RestoredFrom(c.journal(), c.now());
  std::unique_ptr<Scheduler> from_snapshot = RestoredFrom(c.scheduler().Snapshot(), c.now());
  ASSERT_NE(from_journal, nullptr);
  ASSERT_NE(from_snapshot, nullptr);
  EXPECT_EQ(FirstDifference(*from_journal, *from_snapshot), "");
}

TEST(ReplicasTest, AssignmentsNameEveryHolder) {
  ReplicaPool pool(1);
  TestCluster& c = pool.c;
  pool.PrepSucceeds(/*copied=*/true);
  c.AddWorker(WorkerBuilder().Cpus(1).Label("at", "b"));
  c.TakeRaw();
  c.Grant(T(1, 1));
  for (const Command& cmd : c.TakeRaw()) {
    if (const auto* a = std::get_if<AssignTask>(&cmd); a && a->task == T(1, 1)) {
      ASSERT_NE(a->inputs, nullptr);
      EXPECT_EQ((*a->inputs)[0].outputs_on, 1u);
      EXPECT_THAT((*a->inputs)[0].replicas, ElementsAre(2u));
      return;
    }
  }
  ADD_FAILURE() << "use was not assigned";
}

TEST(ReplicasTest, LosingEveryHolderRerunsTheProducerNamingThemAll) {
  ReplicaPool pool(1);
  TestCluster& c = pool.c;
  pool.PrepSucceeds(/*copied=*/true);
  c.Take();
  c.Handle(WorkerLost{1});
  c.Handle(WorkerLost{2});
  c.Advance(kBound);
  EXPECT_THAT(c.Take(),
              Contains("state 1.0 succeeded->queued #1: rerun: outputs lost with workers 1, 2"));
}

TEST(ReplicasTest, ReplicasOutsideOneToFourAreRefusedAtSubmit) {
  TestCluster c;
  for (uint32_t bad : {0u, 5u}) {
    JobBuilder job;
    job.Add(TaskBuilder("prep").Replicas(bad));
    Status s = c.TryHandle(JobSubmitted{0, job.Build()});
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(s.message(), "task \"prep\": replicas " + std::to_string(bad) + ": expected 1 to 4");
  }
}

TEST(ReplicasTest, CopiesOfAFinishedJobsOutputsAreKeptToo) {
  ReplicaPool pool(2, 2, /*alone=*/true);
  TestCluster& c = pool.c;
  pool.PrepSucceeds(/*copied=*/true);
  c.TakeRaw();
  c.Handle(WorkerLost{2});  // the copy goes
  c.Advance(kBound);
  std::vector<ReplicateOutputs> copies = Copies(c.TakeRaw());
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].to, 3u);
  EXPECT_THAT(copies[0].from, ElementsAre(1u));
  EXPECT_THAT(c.scheduler().GetTask(T(1, 0))->outcome->replicas, IsEmpty());
}

}  // namespace
}  // namespace drover::core
