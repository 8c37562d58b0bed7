// Quotas through the scheduler: memory and queued-task limits, groups, the
// policy replaced at run time (UserPolicyChanged), the Quotas() report.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/quantity.h"
#include "core/scheduler.h"
#include "core/testing/restore_check.h"
#include "core/testing/test_cluster.h"

namespace drover::core {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing::JobBuilder;
using testing::T;
using testing::TaskBuilder;
using testing::TestCluster;
using testing::WorkerBuilder;

UserPolicyChanged Policy(UserPolicy p) {
  return UserPolicyChanged{std::make_shared<const UserPolicy>(std::move(p))};
}

TEST(QuotaPolicyTest, MemoryQuotaHoldsBackWhatWouldPassIt) {
  SchedulerConfig config;
  config.users.quotas["ana"] = UserQuota{.max_mem_bytes = 64 * kGiB};
  TestCluster c(config);
  c.AddWorker(WorkerBuilder().Cpus(8).Mem(256 * kGiB));
  c.Submit(JobBuilder(TaskBuilder().Mem(32 * kGiB).Array(0, 3)).User("ana"));
  EXPECT_THAT(c.Take(),
              ElementsAre("claim 1.0#1 on w1 [lease:1:slot:1.0]", "state 1.0 queued->assigned #1",
                          "claim 1.1#1 on w1 [lease:1:slot:1.1]", "state 1.1 queued->assigned #1"));
  EXPECT_EQ(*c.scheduler().Explain(T(1, 2)), "quota: memory 64 GiB/64 GiB for ana");
  // A task asking no memory is not held by the memory limit.
  c.Submit(JobBuilder(TaskBuilder()).User("ana"));
  EXPECT_THAT(c.Take(),
              ElementsAre("claim 2.0#1 on w1 [lease:1:slot:2.0]", "state 2.0 queued->assigned #1"));
  c.Run(T(1, 0));
  c.Take();
  c.Finish(T(1, 0));
  EXPECT_THAT(
      c.Take(),
      ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0]", "state 1.0 running->succeeded #1",
                  "claim 1.2#1 on w1 [lease:1:slot:1.2]", "state 1.2 queued->assigned #1"));
}

TEST(QuotaPolicyTest, ASubmissionPastMaxQueuedIsRefusedWhole) {
  SchedulerConfig config;
  config.users.quotas["ana"] = UserQuota{.max_queued = 5};
  TestCluster c(config);  // no workers: everything stays queued
  c.Submit(JobBuilder(TaskBuilder().Array(0, 3)).User("ana"));
  Outbox out;
  Result<JobId> refused =
      c.scheduler().Submit(c.now(), JobBuilder(TaskBuilder().Array(0, 3)).User("ana").Build(), out);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.status().message(), "quota: queued tasks 3/5 for ana (this job adds 3)");
  EXPECT_THAT(out, IsEmpty());  // nothing journaled, nothing made
  // Others are not bound by ana's limit; ana may still add up to it.
  c.Submit(JobBuilder(TaskBuilder().Array(0, 9)).User("bob"));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 2)).User("ana"));
  // Full now; canceled tasks leave the count.
  Result<JobId> full =
      c.scheduler().Submit(c.now(), JobBuilder(TaskBuilder()).User("ana").Build(), out);
  EXPECT_EQ(full.status().code(), StatusCode::kResourceExhausted);
  c.Handle(CancelJob{1});
  c.Take();
  c.Submit(JobBuilder(TaskBuilder().Array(0, 3)).User("ana"));
  const QuotaReport report = c.scheduler().Quotas();
  ASSERT_EQ(report.users.size(), 2u);
  EXPECT_EQ(report.users[0].name, "ana");
  EXPECT_EQ(report.users[0].use.queued, 5u);
  EXPECT_EQ(report.users[0].max_queued, 5u);
  EXPECT_EQ(report.users[1].name, "bob");
  EXPECT_FALSE(report.users[1].own);
  EXPECT_EQ(report.users[1].use.queued, 9u);
}

TEST(QuotaPolicyTest, TasksLeaveTheQueuedCountWhenAssigned) {
  SchedulerConfig config;
  config.users.quotas["ana"] = UserQuota{.max_queued = 2};
  TestCluster c(config);
  c.AddWorker(WorkerBuilder().Cpus(2));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 2)).User("ana"));  // both assigned
  c.Submit(JobBuilder(TaskBuilder().Array(0, 2)).User("ana"));  // both queued
  Outbox out;
  EXPECT_FALSE(
      c.scheduler().Submit(c.now(), JobBuilder(TaskBuilder()).User("ana").Build(), out).ok());
  EXPECT_EQ(c.scheduler().Quotas().users[0].use.queued, 2u);
  EXPECT_EQ(c.scheduler().Quotas().users[0].use.tasks, 2u);
}

// Ana and bob share group vision (4 GPUs together); ana alone may hold 3.
SchedulerConfig Vision() {
  SchedulerConfig config;
  config.users.quotas["ana"] = UserQuota{.max_gpus = 300};
  config.users.group_quotas["vision"] = UserQuota{.max_gpus = 400};
  config.users.groups["vision"] = {"ana", "bob"};
  return config;
}

TEST(QuotaPolicyTest, AGroupQuotaBoundsItsMembersTogether) {
  TestCluster c(Vision());
  c.AddWorker(WorkerBuilder().Cpus(8).Gpus(8));
  c.Submit(JobBuilder(TaskBuilder().Gpus(1).Array(0, 2)).User("bob"));
  c.Submit(JobBuilder(TaskBuilder().Gpus(1).Array(0, 3)).User("ana"));
  c.Submit(JobBuilder(TaskBuilder().Gpus(1)).User("carl"));  // in no group
  EXPECT_THAT(
      c.Take(),
      ElementsAre(
          "claim 1.0#1 on w1 [lease:1:slot:1.0 lease:1:gpu:0]", "state 1.0 queued->assigned #1",
          "claim 1.1#1 on w1 [lease:1:slot:1.1 lease:1:gpu:1]", "state 1.1 queued->assigned #1",
          "claim 2.0#1 on w1 [lease:1:slot:2.0 lease:1:gpu:2]", "state 2.0 queued->assigned #1",
          "claim 2.1#1 on w1 [lease:1:slot:2.1 lease:1:gpu:3]", "state 2.1 queued->assigned #1",
          "claim 3.0#1 on w1 [lease:1:slot:3.0 lease:1:gpu:4]", "state 3.0 queued->assigned #1"));
  EXPECT_EQ(*c.scheduler().Explain(T(2, 2)), "quota: gpus 4/4 for group vision (ana)");
  const QuotaReport report = c.scheduler().Quotas();
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_EQ(report.groups[0].name, "vision");
  EXPECT_EQ(report.groups[0].use.gpus, 400);
  EXPECT_EQ(report.groups[0].use.tasks, 4u);
  EXPECT_EQ(report.groups[0].use.queued, 1u);
  EXPECT_THAT(report.groups[0].related, ElementsAre("ana", "bob"));
  // Bob's task ends: the room it gave the group goes to ana's parked one.
  c.Run(T(1, 0));
  c.Take();
  c.Finish(T(1, 0));
  EXPECT_THAT(c.Take(), ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0 lease:1:gpu:0]",
                                    "state 1.0 running->succeeded #1",
                                    "claim 2.2#1 on w1 [lease:1:slot:2.2 lease:1:gpu:0]",
                                    "state 2.2 queued->assigned #1"));
}

TEST(QuotaPolicyTest, ARaisedLimitPlacesParkedTasksAtOnce) {
  SchedulerConfig config;
  config.users.quotas["ana"] = UserQuota{.max_gpus = 200};
  TestCluster c(config);
  c.AddWorker(WorkerBuilder().Cpus(8).Gpus(4));
  c.Submit(JobBuilder(TaskBuilder().Gpus(1).Array(0, 3)).User("ana"));
  c.Take();
  EXPECT_EQ(*c.scheduler().Explain(T(1, 2)), "quota: gpus 2/2 for ana");
  UserPolicy raised = config.users;
  raised.quotas["ana"].max_gpus = 300;
  c.Handle(Policy(raised));
  EXPECT_THAT(c.Take(), ElementsAre("claim 1.2#1 on w1 [lease:1:slot:1.2 lease:1:gpu:2]",
                                    "state 1.2 queued->assigned #1"));
  EXPECT_EQ(c.scheduler().config().users, raised);
  EXPECT_EQ(c.scheduler().Quotas().users[0].max_gpus, 300);
}

TEST(QuotaPolicyTest, ALoweredLimitStopsNothingButHoldsNewStarts) {
  SchedulerConfig config;
  TestCluster c(config);
  c.AddWorker(WorkerBuilder().Cpus(8).Gpus(4));
  c.Submit(JobBuilder(TaskBuilder().Gpus(1).Array(0, 2)).User("ana"));
  c.Take();
  c.Run(T(1, 0));
  c.Run(T(1, 1));
  c.Take();
  UserPolicy lowered;
  lowered.quotas["ana"] = UserQuota{.max_gpus = 100};
  c.Handle(Policy(lowered));
  EXPECT_THAT(c.Take(), IsEmpty());  // no kill, no release
  c.Submit(JobBuilder(TaskBuilder().Gpus(1)).User("ana"));
  EXPECT_THAT(c.Take(), IsEmpty());
  EXPECT_EQ(*c.scheduler().Explain(T(2, 0)), "quota: gpus 2/1 for ana");
  // Each end frees room, but ana stays over the new limit until both ended.
  c.Finish(T(1, 0));
  EXPECT_THAT(c.Take(), ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0 lease:1:gpu:0]",
                                    "state 1.0 running->succeeded #1"));
  c.Finish(T(1, 1));
  EXPECT_THAT(c.Take(), ElementsAre("release 1.1#1 on w1 [lease:1:slot:1.1 lease:1:gpu:1]",
                                    "state 1.1 running->succeeded #1",
                                    "claim 2.0#1 on w1 [lease:1:slot:2.0 lease:1:gpu:0]",
                                    "state 2.0 queued->assigned #1"));
}

TEST(QuotaPolicyTest, ANewGroupTakesItsMembersCurrentUse) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(8).Gpus(8));
  c.Submit(JobBuilder(TaskBuilder().Gpus(1).Array(0, 2)).User("bob"));
  c.Take();
  UserPolicy grouped;
  grouped.group_quotas["vision"] = UserQuota{.max_gpus = 300};
  grouped.groups["vision"] = {"ana", "bob"};
  c.Handle(Policy(grouped));
  c.Submit(JobBuilder(TaskBuilder().Gpus(1).Array(0, 2)).User("ana"));
  EXPECT_THAT(c.Take(), ElementsAre("claim 2.0#1 on w1 [lease:1:slot:2.0 lease:1:gpu:2]",
                                    "state 2.0 queued->assigned #1"));
  EXPECT_EQ(*c.scheduler().Explain(T(2, 1)), "quota: gpus 3/3 for group vision (ana)");
  // The group removed again: ana's parked task goes.
  c.Handle(Policy(UserPolicy{}));
  EXPECT_THAT(c.Take(), ElementsAre("claim 2.1#1 on w1 [lease:1:slot:2.1 lease:1:gpu:3]",
                                    "state 2.1 queued->assigned #1"));
  EXPECT_THAT(c.scheduler().Quotas().groups, IsEmpty());
}

TEST(QuotaPolicyTest, ARestoredSchedulerCountsTheQueuedTasksAgain) {
  SchedulerConfig config;
  config.users.quotas["ana"] = UserQuota{.max_queued = 4};
  TestCluster c(config);
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 3)).User("ana"));  // 1 assigned, 2 queued
  c.Submit(JobBuilder(TaskBuilder("a")).Add(TaskBuilder("b").DependsOn("a")).User("ana"));
  std::unique_ptr<Scheduler> restored =
      testing::RestoredFrom(c.scheduler().Snapshot(), c.now(), config);
  ASSERT_NE(restored, nullptr);
  ASSERT_EQ(restored->Quotas().users.size(), 1u);
  EXPECT_EQ(restored->Quotas().users[0].use.queued, 4u);  // 2 queued, 1 queued + 1 waiting
  Outbox out;
  Result<JobId> refused =
      restored->Submit(c.now(), JobBuilder(TaskBuilder()).User("ana").Build(), out);
  EXPECT_EQ(refused.status().message(), "quota: queued tasks 4/4 for ana (this job adds 1)");
}

}  // namespace
}  // namespace drover::core
