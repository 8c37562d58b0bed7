// RetryJob (`drover retry`): a job's failed and canceled tasks run again,
// their dependents wait for them again, and a restart replays it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/scheduler.h"
#include "core/testing/test_cluster.h"

namespace drover::core {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::JobBuilder;
using testing::T;
using testing::TaskBuilder;
using testing::TestCluster;
using testing::WorkerBuilder;

uint64_t Count(const Scheduler& s, JobId j, TaskState st) {
  return s.GetJob(j)->counts[static_cast<int>(st)];
}

// a[0] fails with no retries left, which cancels b; retrying the job runs
// a[0] again with its retries unused and b once a[0] has succeeded.
TEST(RetryJobTest, AFailedTaskAndTheDependentsItCanceledRunAgain) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(2));
  c.Submit(JobBuilder()
               .Add(TaskBuilder("a").Array(0, 2).Retries(1, Seconds(10)))
               .Add(TaskBuilder("b").DependsOn("a")));
  c.Run(T(1, 0));
  c.Run(T(1, 1));
  c.Finish(T(1, 1));
  c.Finish(T(1, 0), 3);  // retry 1 of 1
  c.Advance(Seconds(10));
  c.Run(T(1, 0));
  c.Finish(T(1, 0), 3);  // failed for good: b is canceled
  c.Take();
  ASSERT_TRUE(c.scheduler().GetJob(1)->done);
  ASSERT_EQ(c.scheduler().GetTask(T(1, 2))->reason, "dependency 1.0 failed");
  EXPECT_EQ(*c.scheduler().CheckRetry(1), 2u);

  c.Handle(RetryJob{1, "ana"});
  EXPECT_THAT(c.Take(),
              ElementsAre("state 1.0 failed->queued #2: retried by ana",
                          "state 1.2 canceled->waiting #0: retried by ana",
                          "claim 1.0#3 on w1 [lease:1:slot:1.0]", "state 1.0 queued->assigned #3"));
  EXPECT_FALSE(c.scheduler().GetJob(1)->done);
  // The attempt that failed is history, with its reason.
  const std::vector<PastAttempt> past = c.scheduler().PastAttempts(T(1, 0));
  ASSERT_EQ(past.size(), 2u);
  EXPECT_EQ(past[1].attempt, 2u);
  EXPECT_THAT(past[1].reason, HasSubstr("exit code 3"));

  // Its retries are whole again: a failure backs off instead of failing.
  c.Run(T(1, 0));
  c.Finish(T(1, 0), 3);
  EXPECT_EQ(c.scheduler().GetTask(T(1, 0))->state, TaskState::kQueued);
  EXPECT_TRUE(c.scheduler().GetTask(T(1, 0))->retry_at.has_value());
  c.Advance(Seconds(10));
  c.Run(T(1, 0));
  c.Finish(T(1, 0));
  c.Run(T(1, 2));
  c.Finish(T(1, 2));
  EXPECT_TRUE(c.scheduler().GetJob(1)->done);
  EXPECT_EQ(Count(c.scheduler(), 1, TaskState::kSucceeded), 3u);
}

// A job canceled by its user resumes: what was canceled runs, what had
// succeeded stays.
TEST(RetryJobTest, ACanceledJobResumes) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 3)));
  c.Run(T(1, 0));
  c.Finish(T(1, 0));
  c.Handle(CancelJob{1});
  c.Take();
  ASSERT_EQ(Count(c.scheduler(), 1, TaskState::kCanceled), 2u);
  c.Handle(RetryJob{1, ""});
  EXPECT_EQ(c.scheduler().GetTask(T(1, 1))->reason, "retried");
  c.Run(T(1, 1));
  c.Finish(T(1, 1));
  c.Run(T(1, 2));
  c.Finish(T(1, 2));
  EXPECT_EQ(Count(c.scheduler(), 1, TaskState::kSucceeded), 3u);
}

TEST(RetryJobTest, ARetryIsRefusedWithWhatToDoFirst) {
  SchedulerConfig config;
  config.users.quotas["alice"] = UserQuota{.max_queued = 2};
  TestCluster c(config);
  c.AddWorker(WorkerBuilder().Cpus(1));
  // Nothing to run again.
  c.Submit(JobBuilder(TaskBuilder()));
  EXPECT_EQ(c.scheduler().CheckRetry(1).status().message(),
            "job 1 has no failed or canceled tasks");
  EXPECT_EQ(c.scheduler().CheckRetry(9).status().code(), StatusCode::kNotFound);
  // Job 2 is submitted --after job 1, which then fails: job 2 is canceled
  // and cannot run again before job 1 does.
  c.Submit(JobBuilder(TaskBuilder()).After(1));
  c.Run(T(1, 0));
  c.Finish(T(1, 0), 1);
  ASSERT_EQ(c.scheduler().GetTask(T(2, 0))->state, TaskState::kCanceled);
  EXPECT_EQ(c.scheduler().CheckRetry(2).status().message(),
            "job 2 was submitted --after job 1, which has failed or canceled "
            "tasks: retry job 1 first");
  EXPECT_EQ(c.TryHandle(RetryJob{2, "ana"}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.scheduler().GetTask(T(2, 0))->state, TaskState::kCanceled);
  // Retried first, job 1 runs; job 2 then waits for it and runs after it.
  c.Handle(RetryJob{1, "ana"});
  c.Handle(RetryJob{2, "ana"});
  EXPECT_EQ(c.scheduler().GetTask(T(2, 0))->state, TaskState::kWaiting);
  c.Run(T(1, 0));
  c.Finish(T(1, 0));
  EXPECT_EQ(c.scheduler().GetTask(T(2, 0))->state, TaskState::kAssigned);
  c.Run(T(2, 0));
  c.Finish(T(2, 0));

  // A task being canceled (its kill on its way) must end first.
  c.Submit(JobBuilder(TaskBuilder().Array(0, 2)));
  c.Run(T(3, 0));
  c.Handle(CancelTask{T(3, 1)});
  c.Handle(CancelTask{T(3, 0)});
  EXPECT_EQ(c.scheduler().CheckRetry(3).status().message(),
            "job 3: task 3.0 is being canceled; retry when it has ended");
  c.FinishWith(T(3, 0), TaskOutcome{.signal = 15});
  ASSERT_EQ(Count(c.scheduler(), 3, TaskState::kCanceled), 2u);
  EXPECT_EQ(*c.scheduler().CheckRetry(3), 2u);

  // max_queued counts what a retry queues.
  c.Submit(JobBuilder(TaskBuilder().Array(0, 2)));  // 2 queued behind nothing
  EXPECT_THAT(c.scheduler().CheckRetry(3).status().message(), HasSubstr("quota: queued"));
}

// A restart replays a retry: the same states, reasons and history.
TEST(RetryJobTest, ARestoredServerHasTheRetriedJobAsLiveOneDoes) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder().Add(TaskBuilder("a")).Add(TaskBuilder("b").DependsOn("a")));
  c.Run(T(1, 0));
  c.Finish(T(1, 0), 2);
  c.Handle(RetryJob{1, "ana"});
  c.Take();

  Scheduler restored;
  for (const Record& r : c.journal()) ASSERT_TRUE(restored.Restore(r).ok());
  Outbox out;
  restored.FinishRestore(c.now(), out);
  for (uint32_t i = 0; i < 2; ++i) {
    const TaskInfo live = *c.scheduler().GetTask(T(1, i));
    const TaskInfo back = *restored.GetTask(T(1, i));
    EXPECT_EQ(back.reason, "retried by ana");
    EXPECT_EQ(back.reason, live.reason);
    EXPECT_EQ(back.attempt, live.attempt);
    EXPECT_EQ(back.state, live.state);
  }
  EXPECT_EQ(restored.GetTask(T(1, 0))->state, TaskState::kAssigned);  // claimed again live
  EXPECT_EQ(restored.GetTask(T(1, 1))->state, TaskState::kWaiting);
  EXPECT_EQ(restored.PastAttempts(T(1, 0)), c.scheduler().PastAttempts(T(1, 0)));
}

}  // namespace
}  // namespace drover::core
