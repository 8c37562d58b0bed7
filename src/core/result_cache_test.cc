// The result cache (result_cache.h) on the simulated clock: a job submitted
// again succeeds from the cache without running, with the outputs where
// they are held; what changed (a code file's hash, an environment value, a
// producer's output) runs again with what depends on it; another user's
// job, an entry whose holder is lost, a forgotten job and a group without
// `cache` all run; a restart keeps the cache.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/scheduler.h"
#include "core/testing/test_cluster.h"

namespace drover::core {
namespace {

using testing::JobBuilder;
using testing::T;
using testing::TaskBuilder;
using testing::TestCluster;
using testing::WorkerBuilder;

std::string Sha(char c) { return std::string(64, c); }

SchedulerConfig WithCache() {
  SchedulerConfig config;
  // The key material itself stands for its digest here: equal exactly
  // when the material is.
  config.result_cache.digest = [](std::string_view bytes) { return std::string(bytes); };
  config.result_cache.keep_outputs = Seconds(7 * 24 * 3600);
  return config;
}

// prep -> train (two of them): prep leaves model.bin (its content given
// by `model`), train reads it; both cached.
JobBuilder Pipeline(char code = 'a', const std::string& lr = "0.1",
                    const std::string& user = "alice") {
  return JobBuilder(
             TaskBuilder("prep").Command({"prep"}).Cache({OutputFile{"prep.py", 0, Sha(code)}}))
      .Add(TaskBuilder("train")
               .Command({"train", "{index}"})
               .Array(0, 2)
               .DependsOn("prep")
               .Env("LR", lr)
               .Cache())
      .User(user);
}

// Runs every task of `job` (n of them) to its end: each attempt claimed is
// granted, started and finished after a second, prep's with model.bin of
// content `model`. Returns how many attempts ran.
int RunAll(TestCluster& c, JobId job, uint32_t n, char model = '1') {
  int ran = 0;
  for (int round = 0; round < 50; ++round) {
    bool done = true;
    for (uint32_t i = 0; i < n; ++i) {
      const TaskState st = c.scheduler().GetTask(T(job, i))->state;
      if (st == TaskState::kAssigned) {
        c.Run(T(job, i));
        c.Advance(Seconds(1));
        TaskOutcome o;
        if (i == 0) o.outputs = {OutputFile{"model.bin", 10, Sha(model)}};
        o.result = "r" + std::to_string(i);
        c.FinishWith(T(job, i), o);
        ++ran;
      }
      done = done && IsTerminal(c.scheduler().GetTask(T(job, i))->state);
    }
    if (done) break;
    c.Advance(Seconds(1));
  }
  return ran;
}

TEST(ResultCacheTest, TheSameJobAgainSucceedsFromTheCacheWithTheOutputsWhereTheyAre) {
  TestCluster c(WithCache());
  c.AddWorker(WorkerBuilder().Cpus(2));
  const JobId first = c.Submit(Pipeline());
  EXPECT_EQ(RunAll(c, first, 3), 3);
  c.Advance(Seconds(60));
  const JobId again = c.Submit(Pipeline());
  EXPECT_EQ(RunAll(c, again, 3), 0);
  for (uint32_t i = 0; i < 3; ++i) {
    const TaskInfo info = *c.scheduler().GetTask(T(again, i));
    EXPECT_EQ(info.state, TaskState::kSucceeded) << i;
    ASSERT_TRUE(info.outcome.has_value()) << i;
    EXPECT_EQ(info.outcome->cached_from, T(first, i));
    EXPECT_EQ(info.outcome->cached_ran, Seconds(1));
    EXPECT_EQ(info.outcome->result, "r" + std::to_string(i));
  }
  const TaskOutcome prep = *c.scheduler().GetTask(T(again, 0))->outcome;
  EXPECT_EQ(prep.outputs, (std::vector<OutputFile>{OutputFile{"model.bin", 10, Sha('1')}}));
  EXPECT_EQ(prep.outputs_on, 1u);
}

TEST(ResultCacheTest, WhatChangedRunsAgainWithWhatDependsOnIt) {
  TestCluster c(WithCache());
  c.AddWorker(WorkerBuilder().Cpus(2));
  EXPECT_EQ(RunAll(c, c.Submit(Pipeline()), 3), 3);
  // Another learning rate: prep is reused, both trains run.
  EXPECT_EQ(RunAll(c, c.Submit(Pipeline('a', "0.2")), 3), 2);
  // prep's code changed and it makes the same model: prep runs; the
  // trains' inputs are the same bytes, so they are reused.
  EXPECT_EQ(RunAll(c, c.Submit(Pipeline('b')), 3, '1'), 1);
  // prep's code changed again and makes another model: all run.
  EXPECT_EQ(RunAll(c, c.Submit(Pipeline('c')), 3, '2'), 3);
}

TEST(ResultCacheTest, AnotherUsersJobRunsItsOwn) {
  TestCluster c(WithCache());
  c.AddWorker(WorkerBuilder().Cpus(2));
  EXPECT_EQ(RunAll(c, c.Submit(Pipeline()), 3), 3);
  EXPECT_EQ(RunAll(c, c.Submit(Pipeline('a', "0.1", "bob")), 3), 3);
  EXPECT_EQ(RunAll(c, c.Submit(Pipeline('a', "0.1", "bob")), 3), 0);
}

TEST(ResultCacheTest, AnEntryWhoseOutputsAreGoneIsNotUsed) {
  TestCluster c(WithCache());
  const WorkerId holder = c.AddWorker(WorkerBuilder().Cpus(2));
  c.AddWorker(WorkerBuilder().Cpus(2));
  c.Handle(WorkerDrained{2, true});
  const JobId first = c.Submit(Pipeline());
  EXPECT_EQ(RunAll(c, first, 3), 3);
  c.Handle(WorkerDrained{2, false});
  c.Handle(WorkerLost{holder});
  // prep's model is on the lost worker only: prep runs; the trains' one
  // result-only entries are still good, but their input (prep's output)
  // is now held elsewhere and is the same bytes: reused.
  const JobId again = c.Submit(Pipeline());
  EXPECT_EQ(RunAll(c, again, 3), 1);
  EXPECT_EQ(c.scheduler().GetTask(T(again, 0))->outcome->cached_from, TaskId());
  // Released after keep_outputs (the server's --cache-keep) once its job
  // ended: not used either; a day before, it still is.
  const JobId third = c.Submit(Pipeline());
  EXPECT_EQ(RunAll(c, third, 3), 0);
  c.Advance(Seconds(6 * 24 * 3600));
  EXPECT_EQ(RunAll(c, c.Submit(Pipeline()), 3), 0);
  c.Advance(Seconds(24 * 3600));
  EXPECT_EQ(RunAll(c, c.Submit(Pipeline()), 3), 1);
}

TEST(ResultCacheTest, WithoutCacheOrAfterItsJobIsForgottenItRuns) {
  TestCluster c(WithCache());
  c.AddWorker(WorkerBuilder().Cpus(2));
  const JobBuilder plain(TaskBuilder("p").Command({"prep"}));
  EXPECT_EQ(RunAll(c, c.Submit(plain), 1), 1);
  EXPECT_EQ(RunAll(c, c.Submit(plain), 1), 1);
  const JobId first = c.Submit(Pipeline());
  EXPECT_EQ(RunAll(c, first, 3), 3);
  ASSERT_TRUE(c.scheduler().ForgetJob(first).ok());
  EXPECT_EQ(RunAll(c, c.Submit(Pipeline()), 3), 3);
}

TEST(ResultCacheTest, ARestartKeepsTheCache) {
  for (const bool from_snapshot : {false, true}) {
    SCOPED_TRACE(from_snapshot ? "from a snapshot" : "from the journal");
    TestCluster c(WithCache());
    c.AddWorker(WorkerBuilder().Cpus(2));
    const JobId first = c.Submit(Pipeline());
    EXPECT_EQ(RunAll(c, first, 3), 3);
    c.Restart(from_snapshot);
    c.Rejoin(1);
    const JobId again = c.Submit(Pipeline());
    EXPECT_EQ(RunAll(c, again, 3), 0);
    EXPECT_EQ(c.scheduler().GetTask(T(again, 2))->outcome->cached_from, T(first, 2));
    // A hit is journaled as such: after another restart it still says so.
    c.Restart(from_snapshot);
    EXPECT_EQ(c.scheduler().GetTask(T(again, 2))->outcome->cached_from, T(first, 2));
  }
}

// A fetch of a reused task's outputs that fails their SHA-256 (the worker's
// refusal names the producer and the holder): with no other copy, the task
// runs after all, and its success, not the corrupt copy's, is the entry.
TEST(ResultCacheTest, OutputsThatFailTheirHashOnAFetchRerunTheTaskAndDropTheEntry) {
  TestCluster c(WithCache());
  c.AddWorker(WorkerBuilder().Cpus(2));
  c.AddWorker(WorkerBuilder().Cpus(2));
  const JobBuilder job = JobBuilder(TaskBuilder("prep").Command({"prep"}).Cache())
                             .Add(TaskBuilder("use").Command({"use"}).DependsOn("prep"));
  c.Handle(WorkerDrained{2, true});
  const JobId first = c.Submit(JobBuilder(TaskBuilder("prep").Command({"prep"}).Cache()));
  EXPECT_EQ(RunAll(c, first, 1), 1);  // on worker 1
  c.Handle(WorkerDrained{2, false});
  c.Handle(WorkerDrained{1, true});
  const JobId second = c.Submit(job);
  EXPECT_EQ(c.scheduler().GetTask(T(second, 0))->outcome->cached_from, T(first, 0));
  ASSERT_EQ(c.scheduler().GetTask(T(second, 1))->state, TaskState::kAssigned);  // on worker 2
  c.Handle(TaskRefused{T(second, 1),
                       c.Attempt(T(second, 1)),
                       2,
                       "input 2.0/model.bin: sha256 mismatch from worker 1",
                       {{T(second, 0), 1}}});
  const TaskInfo prep = *c.scheduler().GetTask(T(second, 0));
  EXPECT_NE(prep.state, TaskState::kSucceeded);
  EXPECT_EQ(c.scheduler().Explain(T(second, 1)).ok(), true);
  std::vector<PastAttempt> past = c.scheduler().PastAttempts(T(second, 0));
  ASSERT_FALSE(past.empty());
  EXPECT_EQ(past.back().reason, "rerun: its outputs failed their SHA-256 check from worker 1");
  c.Handle(WorkerHeartbeat{2, {}});    // it takes work again after refusing
  EXPECT_EQ(RunAll(c, second, 2), 2);  // prep on worker 2, then use
  EXPECT_EQ(c.scheduler().GetTask(T(second, 0))->attempt, 1u);
  // The next one reuses the rerun's result.
  const JobId third = c.Submit(job);
  ASSERT_TRUE(c.scheduler().GetTask(T(third, 0))->outcome.has_value());
  EXPECT_EQ(c.scheduler().GetTask(T(third, 0))->outcome->cached_from, T(second, 0));
}

// A person forgets entries: a task's, a job's, or all of a user's; an
// identical task then runs (and its success is the new entry); the forget
// is journaled, so a restart does not bring an entry back.
TEST(ResultCacheTest, ForgottenEntriesStayForgottenAcrossARestart) {
  for (const bool from_snapshot : {false, true}) {
    SCOPED_TRACE(from_snapshot ? "from a snapshot" : "from the journal");
    TestCluster c(WithCache());
    c.AddWorker(WorkerBuilder().Cpus(2));
    const JobId first = c.Submit(Pipeline());
    EXPECT_EQ(RunAll(c, first, 3), 3);
    const JobId bobs = c.Submit(Pipeline('a', "0.1", "bob"));
    EXPECT_EQ(RunAll(c, bobs, 3), 3);
    EXPECT_EQ(c.scheduler().ResultCacheSize(), 6u);
    c.Handle(ForgetCacheEntries{T(first, 2), 0, false, ""});  // train 2 of alice's
    EXPECT_EQ(c.scheduler().ResultCacheSize(), 5u);
    c.Restart(from_snapshot);
    c.Rejoin(1);
    EXPECT_EQ(c.scheduler().ResultCacheSize(), 5u);
    EXPECT_EQ(RunAll(c, c.Submit(Pipeline()), 3), 1);  // that train alone runs
    c.Handle(ForgetCacheEntries{TaskId(), 0, true, "alice"});
    EXPECT_EQ(c.scheduler().ResultCacheSize(), 3u);  // bob's stay
    EXPECT_EQ(RunAll(c, c.Submit(Pipeline('a', "0.1", "bob")), 3), 0);
    c.Handle(ForgetCacheEntries{TaskId(), bobs, false, ""});
    EXPECT_EQ(c.scheduler().ResultCacheSize(), 0u);
    EXPECT_EQ(c.TryHandle(ForgetCacheEntries{}).code(), StatusCode::kInvalidArgument);
  }
}

// A group that shares its cache (share_cache): its members reuse each
// other's results; a user outside it does not.
TEST(ResultCacheTest, AGroupThatSharesItsCacheReusesItsMembersResults) {
  SchedulerConfig config = WithCache();
  config.users.groups["vision"] = {"alice", "bob"};
  config.users.sharing_groups = {"vision"};
  config.users.cache_sharing_groups = {"vision"};
  TestCluster c(config);
  c.AddWorker(WorkerBuilder().Cpus(2));
  EXPECT_EQ(RunAll(c, c.Submit(Pipeline()), 3), 3);
  EXPECT_EQ(RunAll(c, c.Submit(Pipeline('a', "0.1", "bob")), 3), 0);
  EXPECT_EQ(RunAll(c, c.Submit(Pipeline('a', "0.1", "carol")), 3), 3);
}

// A size cap (--cache-max-size): past it the oldest entries go, down to
// 90% of it. prep's model is 10 bytes, the trains' results none: with a cap
// of 25 bytes the third prep's entry pushes the first one out.
TEST(ResultCacheTest, PastTheSizeCapTheOldestEntriesGo) {
  SchedulerConfig config = WithCache();
  config.result_cache.max_bytes = 25;
  TestCluster c(config);
  c.AddWorker(WorkerBuilder().Cpus(2));
  EXPECT_EQ(RunAll(c, c.Submit(Pipeline('a')), 3), 3);
  EXPECT_EQ(RunAll(c, c.Submit(Pipeline('b')), 3, '2'), 3);
  EXPECT_EQ(c.scheduler().ResultCacheSize(), 6u);  // 20 bytes
  EXPECT_EQ(RunAll(c, c.Submit(Pipeline('c')), 3, '3'), 3);
  // 30 bytes > 25: the oldest entries go until 23 or less (a's prep).
  EXPECT_EQ(c.scheduler().ResultCacheSize(), 8u);
  EXPECT_EQ(RunAll(c, c.Submit(Pipeline('a')), 3), 1);  // prep a runs; its trains' entries live
  EXPECT_EQ(RunAll(c, c.Submit(Pipeline('c')), 3, '3'), 0);
}

// A refusal that names a copy of a task that is not one of the refused
// task's inputs changes nothing: a worker cannot make any task run again.
TEST(ResultCacheTest, ACorruptCopyClaimAboutAnotherTaskIsIgnored) {
  TestCluster c(WithCache());
  c.AddWorker(WorkerBuilder().Cpus(2));
  c.AddWorker(WorkerBuilder().Cpus(2));
  c.Handle(WorkerDrained{2, true});
  const JobId first = c.Submit(JobBuilder(TaskBuilder("prep").Command({"prep"}).Cache()));
  EXPECT_EQ(RunAll(c, first, 1), 1);  // its model on worker 1
  c.Handle(WorkerDrained{2, false});
  c.Handle(WorkerDrained{1, true});
  const JobId other = c.Submit(JobBuilder(TaskBuilder("x").Command({"x"})));
  ASSERT_EQ(c.scheduler().GetTask(T(other, 0))->state, TaskState::kAssigned);
  c.Handle(
      TaskRefused{T(other, 0), c.Attempt(T(other, 0)), 2, "sha256 mismatch", {{T(first, 0), 1}}});
  EXPECT_EQ(c.scheduler().GetTask(T(first, 0))->state, TaskState::kSucceeded);
  EXPECT_TRUE(c.scheduler().PastAttempts(T(first, 0)).empty());
  EXPECT_EQ(c.scheduler().ResultCacheSize(), 1u);
}

}  // namespace
}  // namespace drover::core
