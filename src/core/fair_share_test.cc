// Fair share across users (issue 22): among equal priorities, the user
// whose decayed use is smallest for their share goes first; use decays
// with the half-life; a group with a share is one party.
#include "core/fair_share.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "core/scheduler.h"
#include "core/task_queue.h"
#include "core/testing/test_cluster.h"

namespace drover::core {
namespace {

using ::testing::ElementsAre;
using testing::JobBuilder;
using testing::T;
using testing::TaskBuilder;
using testing::TestCluster;
using testing::WorkerBuilder;

constexpr int64_t kHour = int64_t{3600} * 1000 * 1000;

// --- the book -----------------------------------------------------------------

ResourceRequest Cpus(int64_t n) {
  ResourceRequest r;
  r.cpus_milli = n * 1000;
  return r;
}

TEST(FairShareBookTest, UseIsChargedWhileHeldAndDecaysWithTheHalfLife) {
  UserPolicy policy;
  policy.fair_share.half_life = Seconds(3600);
  FairShareBook book;
  book.Configure(policy);
  book.AddUser(0, "ann");
  book.Hold(0, Cpus(2), 0);
  // Two cores for one half-life: 2 x h / ln 2 x (1 - 1/2) core-seconds.
  const double one_half_life = 2 * 3600 / std::log(2.0) * 0.5;
  EXPECT_NEAR(book.UseAt(0, kHour), one_half_life, 1e-6);
  book.Release(0, Cpus(2), kHour);
  // Nothing held: it only halves, each half-life.
  EXPECT_NEAR(book.UseAt(0, 2 * kHour), one_half_life / 2, 1e-6);
  EXPECT_NEAR(book.UseAt(0, 3 * kHour), one_half_life / 4, 1e-6);
}

TEST(FairShareBookTest, GpusCountWithTheirWeightAndNoHalfLifeMeansNoDecay) {
  UserPolicy policy;
  policy.fair_share.half_life = Duration(0);
  policy.fair_share.gpu_weight = 10;
  FairShareBook book;
  book.Configure(policy);
  book.AddUser(0, "ann");
  ResourceRequest req = Cpus(1);
  req.gpus = 50;  // half a GPU
  book.Hold(0, req, 0);
  book.Release(0, req, 100 * 1000 * 1000);
  // 100 s x (1 core + 10 x 0.5 GPU), kept as it is a year later.
  EXPECT_DOUBLE_EQ(book.UseAt(0, 365 * 24 * kHour), 600.0);
}

TEST(FairShareBookTest, StandingIsUseOverShareAndAGroupWithAShareIsOneParty) {
  UserPolicy policy;
  policy.fair_share.half_life = Duration(0);
  policy.groups["lab"] = {"ann", "ben"};
  policy.fair_share.shares["lab"] = 2;
  policy.fair_share.shares["cid"] = 4;
  FairShareBook book;
  book.Configure(policy);
  book.AddUser(0, "ann");
  book.AddUser(1, "ben");
  book.AddUser(2, "cid");
  book.AddUser(3, "dee");
  for (uint32_t u : {0u, 2u, 3u}) book.Hold(u, Cpus(1), 0);
  std::vector<double> standings;
  book.Standings(100 * 1000 * 1000, standings);
  // ann's 100 core-seconds count for ben too, against the lab's 2 shares.
  EXPECT_THAT(standings, ElementsAre(50.0, 50.0, 25.0, 100.0));
  EXPECT_EQ(book.PartyOf(1), "lab");
  EXPECT_EQ(book.ShareOf(2), 4.0);

  policy.fair_share.enabled = false;
  book.Configure(policy);
  book.Standings(200 * 1000 * 1000, standings);
  EXPECT_THAT(standings, ElementsAre(0.0, 0.0, 0.0, 0.0));
}

// --- the queues ---------------------------------------------------------------

std::vector<uint32_t> Order(const TaskQueues& q, uint32_t cls) {
  std::vector<uint32_t> jobs;
  q.ForEach(cls, [&](const QueueEntry& e) {
    jobs.push_back(e.task.job);
    return true;
  });
  return jobs;
}

TEST(TaskQueuesTest, EqualStandingsKeepOneFifoAcrossUsersAndALowerStandingGoesFirst) {
  TaskQueues q;
  const uint32_t cls = q.ClassOf(Cpus(1));
  q.PushBack(cls, 0, /*user=*/0, TaskRef{1, 0});
  q.PushBack(cls, 0, 1, TaskRef{2, 0});
  q.PushBack(cls, 0, 0, TaskRef{3, 0});
  q.PushBack(cls, 0, 1, TaskRef{4, 0});
  EXPECT_THAT(Order(q, cls), ElementsAre(1, 2, 3, 4));
  EXPECT_EQ(q.Head(cls).task.job, 1u);

  q.SetStanding(0, 5.0);  // user 0 used more
  EXPECT_THAT(Order(q, cls), ElementsAre(2, 4, 1, 3));
  EXPECT_EQ(q.Head(cls).task.job, 2u);
  EXPECT_EQ(q.HeadKeyOf(cls).standing, 0.0);

  // Put back at the front: before every entry of its level, so first
  // again once the standings are equal.
  q.PopHead(cls);
  q.PushFront(cls, 0, 1, TaskRef{2, 0});
  EXPECT_EQ(q.Head(cls).task.job, 2u);
  q.SetStanding(0, 0.0);
  EXPECT_THAT(Order(q, cls), ElementsAre(2, 1, 3, 4));
  // A higher priority still goes first, whoever's it is.
  q.SetStanding(0, 9.0);
  q.PushBack(cls, 3, 0, TaskRef{5, 0});
  EXPECT_EQ(q.Head(cls).task.job, 5u);
  EXPECT_EQ(q.HeadPriority(cls), 3);
}

TEST(TaskQueuesTest, ALevelThatEmptiedIsReusedByAnyUserAndStillFollowsStandings) {
  TaskQueues q;
  const uint32_t cls = q.ClassOf(Cpus(1));
  const uint32_t other = q.ClassOf(Cpus(2));
  q.PushBack(cls, 0, 0, TaskRef{1, 0});
  q.PopHead(cls);  // the level empties: kept for reuse
  EXPECT_TRUE(q.Empty(cls));
  q.SetStanding(1, 3.0);                 // user 1 had no lane here then
  q.PushBack(cls, 0, 1, TaskRef{2, 0});  // takes the kept level's lane
  q.PushBack(cls, 0, 0, TaskRef{3, 0});
  q.PushBack(other, 0, 0, TaskRef{4, 0});
  EXPECT_THAT(Order(q, cls), ElementsAre(3, 2));
  EXPECT_EQ(TaskQueues::ClassOfKey(*q.heads().begin()), cls);  // user 0's 3.0 first
  q.SetStanding(1, 0.0);  // user 1's class is re-keyed: its 2.0 arrived first
  EXPECT_THAT(Order(q, cls), ElementsAre(2, 3));
  EXPECT_EQ(q.Head(cls).task.job, 2u);
  q.SetStanding(0, 5.0);
  EXPECT_EQ(TaskQueues::ClassOfKey(*q.heads().begin()), cls);
  EXPECT_EQ(q.HeadKeyOf(cls).standing, 0.0);
  EXPECT_EQ(q.HeadKeyOf(other).standing, 5.0);
}

TEST(TaskQueuesTest, TheHeadsOrderClassesByStandingBeforeArrival) {
  TaskQueues q;
  const uint32_t a = q.ClassOf(Cpus(1));
  const uint32_t b = q.ClassOf(Cpus(2));
  q.PushBack(a, 0, 0, TaskRef{1, 0});
  q.PushBack(b, 0, 1, TaskRef{2, 0});
  EXPECT_EQ(TaskQueues::ClassOfKey(*q.heads().begin()), a);
  q.SetStanding(0, 1.0);
  EXPECT_EQ(TaskQueues::ClassOfKey(*q.heads().begin()), b);
  q.PopHead(b);
  EXPECT_EQ(TaskQueues::ClassOfKey(*q.heads().begin()), a);
}

// --- the scheduler --------------------------------------------------------------

// One core; alice's 3 tasks queue at 0 and the first runs for an hour, so
// alice has used an hour of a core when bob's task arrives.
void AliceRanAnHourThenBobSubmits(TestCluster& c, TaskBuilder bob_task = TaskBuilder()) {
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 3)).User("alice"));  // job 1
  c.Take();
  c.Run(T(1, 0));
  c.Advance(Seconds(3600));                    // a Tick: standings as of now
  c.Submit(JobBuilder(bob_task).User("bob"));  // job 2
  c.Take();
}

TEST(FairShareTest, AUserWhoUsedLessGoesFirstAmongEqualPriorities) {
  TestCluster c;
  AliceRanAnHourThenBobSubmits(c);
  c.Finish(T(1, 0));
  EXPECT_THAT(
      c.Take(),
      ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0]", "state 1.0 running->succeeded #1",
                  "claim 2.0#1 on w1 [lease:1:slot:2.0]", "state 2.0 queued->assigned #1"));
}

TEST(FairShareTest, OffTheQueueStaysFifo) {
  SchedulerConfig config;
  config.users.fair_share.enabled = false;
  TestCluster c(config);
  AliceRanAnHourThenBobSubmits(c);
  c.Finish(T(1, 0));
  EXPECT_THAT(
      c.Take(),
      ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0]", "state 1.0 running->succeeded #1",
                  "claim 1.1#1 on w1 [lease:1:slot:1.1]", "state 1.1 queued->assigned #1"));
}

TEST(FairShareTest, AHigherPriorityStillGoesFirst) {
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 2).Priority(1)).User("alice"));
  c.Take();
  c.Run(T(1, 0));
  c.Advance(Seconds(3600));
  c.Submit(JobBuilder(TaskBuilder()).User("bob"));
  c.Take();
  c.Finish(T(1, 0));
  EXPECT_THAT(
      c.Take(),
      ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0]", "state 1.0 running->succeeded #1",
                  "claim 1.1#1 on w1 [lease:1:slot:1.1]", "state 1.1 queued->assigned #1"));
}

TEST(FairShareTest, ItOrdersTheHeadsOfDifferentClassesToo) {
  // Bob asks for another shape (a class of its own): the freed core is
  // offered to the heads in standing order, not arrival order.
  TestCluster c;
  AliceRanAnHourThenBobSubmits(c, TaskBuilder().Mem(1));
  c.Finish(T(1, 0));
  EXPECT_THAT(
      c.Take(),
      ElementsAre("release 1.0#1 on w1 [lease:1:slot:1.0]", "state 1.0 running->succeeded #1",
                  "claim 2.0#1 on w1 [lease:1:slot:2.0]", "state 2.0 queued->assigned #1"));
}

TEST(FairShareTest, SharesWeighTheUse) {
  // Both ran one core for an hour; alice has 4 shares, bob 1: alice's use
  // counts a quarter, so her next task goes before bob's earlier one.
  SchedulerConfig config;
  config.users.fair_share.shares["alice"] = 4;
  TestCluster c(config);
  c.AddWorker(WorkerBuilder().Cpus(2));
  c.Submit(JobBuilder(TaskBuilder()).User("alice"));            // 1.0
  c.Submit(JobBuilder(TaskBuilder().Array(0, 2)).User("bob"));  // 2.0 runs, 2.1 queues
  c.Submit(JobBuilder(TaskBuilder()).User("alice"));            // 3.0 queues
  c.Take();
  c.Run(T(1, 0));
  c.Run(T(2, 0));
  c.Advance(Seconds(3600));
  c.Take();
  c.Finish(T(2, 0));
  EXPECT_THAT(
      c.Take(),
      ElementsAre("release 2.0#1 on w1 [lease:1:slot:2.0]", "state 2.0 running->succeeded #1",
                  "claim 3.0#1 on w1 [lease:1:slot:3.0]", "state 3.0 queued->assigned #1"));
}

TEST(FairShareTest, SharesGivenAtAReloadCountFromTheNextTick) {
  // As SharesWeighTheUse, with alice's 4 shares arriving by a reload
  // (UserPolicyChanged, the server's SIGHUP) after both ran an hour.
  TestCluster c;
  c.AddWorker(WorkerBuilder().Cpus(2));
  c.Submit(JobBuilder(TaskBuilder()).User("alice"));            // 1.0
  c.Submit(JobBuilder(TaskBuilder().Array(0, 2)).User("bob"));  // 2.0 runs, 2.1 queues
  c.Submit(JobBuilder(TaskBuilder()).User("alice"));            // 3.0 queues
  c.Take();
  c.Run(T(1, 0));
  c.Run(T(2, 0));
  c.Advance(Seconds(3600));
  auto policy = std::make_shared<UserPolicy>();
  policy->fair_share.shares["alice"] = 4;
  c.Handle(UserPolicyChanged{policy});
  c.Advance(Seconds(1));
  c.Take();
  c.Finish(T(2, 0));
  EXPECT_THAT(
      c.Take(),
      ElementsAre("release 2.0#1 on w1 [lease:1:slot:2.0]", "state 2.0 running->succeeded #1",
                  "claim 3.0#1 on w1 [lease:1:slot:3.0]", "state 3.0 queued->assigned #1"));
}

TEST(FairShareTest, PastUseFadesWithTheHalfLife) {
  // Alice ran an hour long ago, bob a minute just now: after ten
  // half-lives of an hour, alice's hour counts 2.5 core-seconds, less than
  // bob's minute, so alice goes first again.
  SchedulerConfig config;
  config.users.fair_share.half_life = Seconds(3600);
  TestCluster c(config);
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder()).User("alice"));  // 1.0
  c.Take();
  c.Run(T(1, 0));
  c.Advance(Seconds(3600));
  c.Finish(T(1, 0));
  c.Advance(Seconds(10 * 3600));
  c.Submit(JobBuilder(TaskBuilder()).User("bob"));  // 2.0 runs a minute
  c.Take();
  c.Run(T(2, 0));
  c.Submit(JobBuilder(TaskBuilder()).User("bob"));    // 3.0
  c.Submit(JobBuilder(TaskBuilder()).User("alice"));  // 4.0
  c.Advance(Seconds(60));
  c.Take();
  c.Finish(T(2, 0));
  EXPECT_THAT(
      c.Take(),
      ElementsAre("release 2.0#1 on w1 [lease:1:slot:2.0]", "state 2.0 running->succeeded #1",
                  "claim 4.0#1 on w1 [lease:1:slot:4.0]", "state 4.0 queued->assigned #1"));
}

}  // namespace
}  // namespace drover::core
