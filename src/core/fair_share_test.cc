// Fair share across users: among equal priorities, the user
// whose decayed use is smallest for their share goes first; use decays
// with the half-life; a group with a share is one party; a restart rebuilds
// the use from the journal.
#include "core/fair_share.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/scheduler.h"
#include "core/task_queue.h"
#include "core/testing/restore_check.h"
#include "core/testing/test_cluster.h"

namespace drover::core {
namespace {

using ::testing::ElementsAre;
using testing::JobBuilder;
using testing::RestoredFrom;
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

TEST(FairShareBookTest, APastSpanAddsWhatHoldingItLiveChargedInAnyOrder) {
  UserPolicy policy;
  policy.fair_share.half_life = Seconds(3600);
  policy.fair_share.gpu_weight = 4;
  ResourceRequest gpu = Cpus(1);
  gpu.gpus = 100;
  // Live: ann holds 2 cores over [0, 1 h] and a GPU task over [30 min, 2 h].
  FairShareBook live;
  live.Configure(policy);
  live.AddUser(0, "ann");
  live.Hold(0, Cpus(2), 0);
  live.Hold(0, gpu, kHour / 2);
  live.Release(0, Cpus(2), kHour);
  live.Release(0, gpu, 2 * kHour);
  // Replayed: the same spans, the later one first.
  FairShareBook replayed;
  replayed.Configure(policy);
  replayed.AddUser(0, "ann");
  replayed.AddPast(0, gpu, kHour / 2, 2 * kHour);
  replayed.AddPast(0, Cpus(2), 0, kHour);
  replayed.AddPast(0, Cpus(2), kHour, kHour);  // empty: nothing
  for (int64_t at : {2 * kHour, 5 * kHour}) {
    EXPECT_NEAR(replayed.UseAt(0, at), live.UseAt(0, at), 1e-9 * live.UseAt(0, at));
  }
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

// --- across a restart -----------------------------------------------------------

// Every user's use, share and standing agree at `now`.
void ExpectSameUse(const Scheduler& live, const Scheduler& restored, Time now) {
  const std::vector<FairShareLine> a = live.FairShares(now);
  const std::vector<FairShareLine> b = restored.FairShares(now);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].user, b[i].user);
    EXPECT_GT(a[i].use_s, 0) << a[i].user;
    EXPECT_NEAR(a[i].use_s, b[i].use_s, 1e-9 * a[i].use_s) << a[i].user;
    EXPECT_NEAR(a[i].standing, b[i].standing, 1e-9 * a[i].standing) << a[i].user;
    EXPECT_EQ(a[i].share, b[i].share) << a[i].user;
  }
}

double UseOf(const Scheduler& s, const std::string& user, Time now) {
  for (const FairShareLine& line : s.FairShares(now)) {
    if (line.user == user) return line.use_s;
  }
  return -1;
}

// After the restart (or without one): alice, then bob, queue two one-core
// tasks each, then a one-core worker joins; each task runs ten minutes.
// The tasks in the order they were placed.
std::vector<std::string> RunContended(Scheduler& s, Time now) {
  Outbox out;
  const JobId alice =
      s.Submit(now, JobBuilder(TaskBuilder().Array(0, 2)).User("alice").Build(), out).value();
  const JobId bob =
      s.Submit(now, JobBuilder(TaskBuilder().Array(0, 2)).User("bob").Build(), out).value();
  EXPECT_EQ(bob, alice + 1);
  EXPECT_TRUE(s.Handle(now, WorkerJoined{9, WorkerBuilder().Cpus(1).Build()}, out).ok());
  std::vector<std::string> order;
  for (int round = 0; round < 8 && order.size() < 4; ++round) {
    const Outbox commands = std::move(out);
    out.clear();
    for (const Command& c : commands) {
      const auto* claim = std::get_if<ClaimLeases>(&c);
      if (claim == nullptr) continue;
      order.push_back(claim->task.ToString());
      EXPECT_TRUE(s.Handle(now, LeaseGranted{claim->task, claim->attempt}, out).ok());
      EXPECT_TRUE(s.Handle(now, TaskStarted{claim->task, claim->attempt}, out).ok());
      now += Seconds(600);
      EXPECT_TRUE(s.Handle(now, Tick{}, out).ok());
      EXPECT_TRUE(s.Handle(now, TaskFinished{claim->task, claim->attempt, {}}, out).ok());
    }
  }
  return order;
}

TEST(FairShareRestartTest, UseIsRebuiltFromTheJournalAndOrdersTheQueuesAsBefore) {
  SchedulerConfig config;
  config.users.fair_share.half_life = Seconds(3600);
  config.users.fair_share.gpu_weight = 2;
  TestCluster c(config);
  c.AddWorker(WorkerBuilder().Cpus(4).Gpus(1));
  const Time t0 = c.now();
  c.Submit(JobBuilder(TaskBuilder().Gpus(1).Retries(1, Seconds(60))).User("alice"));  // 1.0
  c.Submit(JobBuilder(TaskBuilder().Cpus(2).Array(0, 2)).User("bob"));  // 2.0 runs, 2.1 waits
  c.Run(T(2, 0));
  c.Advance(Seconds(20));  // 1.0 held, not started yet: it counts from its assignment
  c.Run(T(1, 0));
  c.Advance(Seconds(3600));
  c.Finish(T(1, 0), 3);  // fails; its retry comes after a minute
  c.Finish(T(2, 0));
  c.Run(T(2, 1));
  c.Advance(Seconds(60));
  c.Run(T(1, 0));
  c.Advance(Seconds(1800));
  c.Finish(T(1, 0));
  c.Finish(T(2, 1));
  c.Advance(Seconds(600));
  c.Handle(WorkerLost{1});  // the restarted server has no workers yet either
  c.Take();

  std::unique_ptr<Scheduler> from_journal = RestoredFrom(c.journal(), c.now(), config);
  ASSERT_NE(from_journal, nullptr);
  ExpectSameUse(c.scheduler(), *from_journal, c.now());
  ExpectSameUse(c.scheduler(), *from_journal, c.now() + Seconds(7200));  // decays alike

  // A compaction keeps no assignment time: alice's first 20 s (a core and
  // a GPU at weight 2) are not counted after it.
  std::unique_ptr<Scheduler> from_snapshot =
      RestoredFrom(c.scheduler().Snapshot(), c.now(), config);
  ASSERT_NE(from_snapshot, nullptr);
  const double h = 3600;
  const double since_gap =
      static_cast<double>(ToMicros(c.now()) - ToMicros(t0 + Seconds(20))) / 1e6;
  const double gap = 3 * h / std::log(2.0) * (1 - std::exp2(-20 / h)) * std::exp2(-since_gap / h);
  EXPECT_NEAR(UseOf(*from_snapshot, "alice", c.now()), UseOf(c.scheduler(), "alice", c.now()) - gap,
              1e-6);
  EXPECT_NEAR(UseOf(*from_snapshot, "bob", c.now()), UseOf(c.scheduler(), "bob", c.now()), 1e-6);

  // Alice used more: bob's tasks go first, with the restart as without.
  const std::vector<std::string> live = RunContended(c.scheduler(), c.now());
  EXPECT_THAT(live, ElementsAre("4.0", "4.1", "3.0", "3.1"));
  EXPECT_EQ(RunContended(*from_journal, c.now()), live);
  EXPECT_EQ(RunContended(*from_snapshot, c.now()), live);
}

TEST(FairShareRestartTest, WithoutAHalfLifeTheWholePastComesBack) {
  SchedulerConfig config;
  config.users.fair_share.half_life = Duration(0);
  TestCluster c(config);
  c.AddWorker(WorkerBuilder().Cpus(2));
  c.Submit(JobBuilder(TaskBuilder().Array(0, 3)).User("alice"));  // 1.0, 1.1; 1.2 waits
  c.Submit(JobBuilder(TaskBuilder()).User("bob"));                // 2.0 waits
  c.Run(T(1, 0));
  c.Run(T(1, 1));
  c.Advance(Seconds(3600));
  c.Finish(T(1, 0));  // bob's 2.0 takes the core
  c.Run(T(2, 0));
  c.Finish(T(1, 1));  // then 1.2
  c.Run(T(1, 2));
  c.Advance(Seconds(600));
  c.Finish(T(1, 2));
  c.Finish(T(2, 0));
  c.Advance(Seconds(24 * 3600));  // a day later nothing has faded
  c.Handle(WorkerLost{1});
  c.Take();

  // 2 h + 10 min of a core for alice, 10 min for bob, from either source.
  for (const std::vector<Record>& records : {c.journal(), c.scheduler().Snapshot()}) {
    std::unique_ptr<Scheduler> restored = RestoredFrom(records, c.now(), config);
    ASSERT_NE(restored, nullptr);
    ExpectSameUse(c.scheduler(), *restored, c.now());
    EXPECT_DOUBLE_EQ(UseOf(*restored, "alice", c.now()), 7800.0);
    EXPECT_DOUBLE_EQ(UseOf(*restored, "bob", c.now()), 600.0);
  }
  const std::vector<std::string> live = RunContended(c.scheduler(), c.now());
  EXPECT_THAT(live, ElementsAre("4.0", "4.1", "3.0", "3.1"));
  EXPECT_EQ(RunContended(*RestoredFrom(c.journal(), c.now(), config), c.now()), live);
}

TEST(FairShareRestartTest, AnAttemptRunningAcrossTheRestartCountsFromItsAssignment) {
  SchedulerConfig config;
  config.users.fair_share.half_life = Seconds(3600);
  TestCluster c(config);
  c.AddWorker(WorkerBuilder().Cpus(4));
  c.Submit(JobBuilder(TaskBuilder().Cpus(3)).User("alice"));  // 1.0
  c.Submit(JobBuilder(TaskBuilder()).User("bob"));            // 2.0
  c.Advance(Seconds(30));
  c.Run(T(1, 0));
  c.Run(T(2, 0));
  c.Advance(Seconds(600));
  c.Finish(T(2, 0));
  c.Advance(Seconds(1200));  // the server restarts while 1.0 runs
  c.Take();

  std::unique_ptr<Scheduler> restored = RestoredFrom(c.journal(), c.now(), config);
  ASSERT_NE(restored, nullptr);
  ExpectSameUse(c.scheduler(), *restored, c.now());
  // The worker comes back with it: it holds on, and is charged, as live.
  Outbox out;
  ASSERT_TRUE(restored
                  ->Handle(c.now(),
                           WorkerAttached{1,
                                          WorkerBuilder().Cpus(4).Build(),
                                          {ReportedAttempt{T(1, 0), 1, {0, 1, 2}, {}}},
                                          {}},
                           out)
                  .ok());
  EXPECT_EQ(restored->GetTask(T(1, 0))->state, TaskState::kRunning);
  c.Advance(Seconds(1800));
  ASSERT_TRUE(restored->Handle(c.now(), Tick{}, out).ok());
  ExpectSameUse(c.scheduler(), *restored, c.now());

  // A snapshot's running attempt counts from its start, 30 s later.
  std::unique_ptr<Scheduler> from_snapshot =
      RestoredFrom(c.scheduler().Snapshot(), c.now(), config);
  ASSERT_NE(from_snapshot, nullptr);
  const double h = 3600;
  const double since_gap = 600 + 1200 + 1800;
  const double gap = 3 * h / std::log(2.0) * (1 - std::exp2(-30 / h)) * std::exp2(-since_gap / h);
  EXPECT_NEAR(UseOf(*from_snapshot, "alice", c.now()), UseOf(c.scheduler(), "alice", c.now()) - gap,
              1e-6);
}

TEST(FairShareRestartTest, ACompactionKeepsNoAssignmentTimeOfAnAttemptNotStarted) {
  SchedulerConfig config;
  config.users.fair_share.half_life = Duration(0);
  config.start_timeout = Duration::zero();
  TestCluster c(config);
  c.AddWorker(WorkerBuilder().Cpus(1));
  c.Submit(JobBuilder(TaskBuilder()).User("alice"));
  c.Reject(T(1, 0));  // queued again and assigned again at once (attempt 2)
  c.Advance(Seconds(600));
  c.Take();
  ASSERT_EQ(c.scheduler().GetTask(T(1, 0))->state, TaskState::kAssigned);

  // The journal has the assignment's time; a snapshot has the task's
  // reason there instead, and the attempt counts from the restart.
  std::unique_ptr<Scheduler> from_journal = RestoredFrom(c.journal(), c.now(), config);
  ASSERT_NE(from_journal, nullptr);
  ExpectSameUse(c.scheduler(), *from_journal, c.now());
  EXPECT_DOUBLE_EQ(UseOf(*from_journal, "alice", c.now()), 600.0);
  std::unique_ptr<Scheduler> from_snapshot =
      RestoredFrom(c.scheduler().Snapshot(), c.now(), config);
  ASSERT_NE(from_snapshot, nullptr);
  EXPECT_EQ(UseOf(*from_snapshot, "alice", c.now()), 0.0);
  EXPECT_DOUBLE_EQ(UseOf(*from_snapshot, "alice", c.now() + Seconds(60)), 60.0);
}

TEST(FairShareRestartTest, ACompactionCountsARerunSuccessForItsMeasuredRun) {
  // prep succeeds after an hour, its worker is lost two hours later and
  // it is to run again for its dependent: the snapshot keeps the rerun's
  // time as its attempt's end, not the success's.
  SchedulerConfig config;
  config.users.fair_share.half_life = Duration(0);
  TestCluster c(config);
  c.AddWorker(WorkerBuilder().Cpus(1).Label("at", "a"));
  c.Submit(JobBuilder()
               .Add(TaskBuilder("prep").Label("at", "a"))
               .Add(TaskBuilder("use").Label("at", "b").DependsOn("prep"))
               .User("alice"));
  c.Run(T(1, 0));
  c.Advance(Seconds(3600));
  TaskOutcome made;
  made.outputs = {OutputFile{"train.csv", 1 << 20, std::string(64, 'a')}};
  made.usage.wall = Seconds(3600);
  c.FinishWith(T(1, 0), made);
  c.Advance(Seconds(7200));
  c.Handle(WorkerLost{1});
  c.Advance(Seconds(60));  // past the lease bound: rerun
  c.Take();
  ASSERT_EQ(c.scheduler().GetTask(T(1, 0))->reason, "rerun: outputs lost with worker 1");

  for (const std::vector<Record>& records : {c.journal(), c.scheduler().Snapshot()}) {
    std::unique_ptr<Scheduler> restored = RestoredFrom(records, c.now(), config);
    ASSERT_NE(restored, nullptr);
    ExpectSameUse(c.scheduler(), *restored, c.now());
    EXPECT_DOUBLE_EQ(UseOf(*restored, "alice", c.now()), 3600.0);
  }
}

}  // namespace
}  // namespace drover::core
