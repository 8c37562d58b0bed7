// Allocation queues: the decision rules on their own, and the manager with
// a recorded Slurm (no Slurm here; tests/slurm_alloc_test.py uses a real one).
#include "server/alloc.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <mutex>

#include "core/testing/test_cluster.h"
#include "net/event_loop.h"

namespace drover::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

proto::AllocQueueRequest Spec(uint32_t max_workers = 2, Duration limit = Seconds(3600)) {
  proto::AllocQueueRequest s;
  s.kind = "slurm";
  s.max_workers = max_workers;
  s.time_limit = limit;
  s.idle_timeout = Seconds(30);
  return s;
}

TEST(AllocTest, SubmitsOnlyForWorkWithNothingWaitingBelowTheMaximum) {
  AllocQueue q;
  q.spec = Spec(2);
  const Time now = TimeFromMicros(1'000'000);
  EXPECT_FALSE(ShouldSubmit(q, 0, 0, now));  // no work
  EXPECT_TRUE(ShouldSubmit(q, 1, 0, now));
  EXPECT_FALSE(ShouldSubmit(q, 5, 1, now));  // one on its way already
  q.allocations.push_back(Allocation{"1", "RUNNING", false, now, std::nullopt});
  EXPECT_TRUE(ShouldSubmit(q, 5, 0, now));
  q.allocations.push_back(Allocation{"2", "RUNNING", false, now, std::nullopt});
  EXPECT_FALSE(ShouldSubmit(q, 5, 0, now));  // at its maximum
  q.allocations[0].ended = true;
  EXPECT_TRUE(ShouldSubmit(q, 5, 0, now));
  q.retry_at = now + Seconds(10);
  EXPECT_FALSE(ShouldSubmit(q, 5, 0, now));  // backing off
  EXPECT_TRUE(ShouldSubmit(q, 5, 0, now + Seconds(10)));
}

TEST(AllocTest, BackoffDoublesUpToTenMinutes) {
  EXPECT_EQ(AllocBackoff(1), Seconds(10));
  EXPECT_EQ(AllocBackoff(2), Seconds(20));
  EXPECT_EQ(AllocBackoff(4), Seconds(80));
  EXPECT_EQ(AllocBackoff(30), Seconds(600));
}

TEST(AllocTest, TheWorkerLivesTheTimeLimitLessAMargin) {
  EXPECT_EQ(AllocWorkerLifetime(Spec(1, Seconds(3600))), Seconds(3540));
  EXPECT_EQ(AllocWorkerLifetime(Spec(1, Seconds(300))), Seconds(270));
}

TEST(AllocTest, SqueueOutputIsReadAndGarbageIsNamed) {
  Result<std::map<std::string, std::string>> s = ParseSqueue("12 RUNNING\n13 PENDING\n\n");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->at("12"), "RUNNING");
  EXPECT_EQ(s->at("13"), "PENDING");
  Result<std::map<std::string, std::string>> bad = ParseSqueue("slurm_load_jobs error\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("slurm_load_jobs error"));
}

TEST(AllocTest, TheScriptStartsAWorkerThatKnowsItsEndAndLeavesWhenIdle) {
  AllocQueue q;
  q.id = 3;
  q.spec = Spec(1, Seconds(600));
  const std::string script =
      AllocScript(q, WorkerLaunch{"/opt/drover's/drover", "head:7210", "/srv/d/token", "ab12"});
  EXPECT_EQ(script,
            "#!/bin/sh\n"
            "# Written by the drover server for allocation queue 3 (drover alloc list); run by "
            "sbatch.\n"
            "exec '/opt/drover'\\''s/drover' worker --server 'head:7210' --token-file "
            "'/srv/d/token' --fingerprint ab12 --name \"slurm-3-$SLURM_JOB_ID\" --workdir "
            "\"${TMPDIR:-/tmp}/drover-slurm-$SLURM_JOB_ID\" --lifetime 9m --idle-timeout 30s\n");
}

// Slurm as a recording: each Submit answers the next scripted result.
class RecordedSlurm : public SlurmCommands {
 public:
  struct Log {
    std::mutex mu;
    std::vector<std::vector<std::string>> submits;
    std::vector<std::string> canceled;
    std::vector<Result<std::string>> answers;  // next Submit answers, in order
    std::map<std::string, std::string> states;
  };
  explicit RecordedSlurm(std::shared_ptr<Log> log) : log_(std::move(log)) {}
  Result<std::string> Submit(const std::vector<std::string>& args, const std::string&) override {
    std::lock_guard<std::mutex> lock(log_->mu);
    log_->submits.push_back(args);
    if (log_->answers.empty()) return Internal("no answer scripted");
    Result<std::string> a = log_->answers.front();
    log_->answers.erase(log_->answers.begin());
    if (a.ok()) log_->states[*a] = "PENDING";
    return a;
  }
  Result<std::map<std::string, std::string>> States(const std::vector<std::string>&) override {
    std::lock_guard<std::mutex> lock(log_->mu);
    return log_->states;
  }
  Status Cancel(const std::string& job) override {
    std::lock_guard<std::mutex> lock(log_->mu);
    log_->canceled.push_back(job);
    log_->states.erase(job);
    return Status::Ok();
  }

 private:
  std::shared_ptr<Log> log_;
};

class AllocManagerTest : public ::testing::Test {
 protected:
  AllocManagerTest() {
    dir_ = std::filesystem::temp_directory_path() /
           ("drover-alloc-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  ~AllocManagerTest() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<AllocManager> Start() {
    AllocOptions o;
    o.state_dir = dir_.string();
    o.interval = Millis(5);
    o.server_id = "0123456789abcdef";
    o.launch = [] { return WorkerLaunch{"/usr/bin/drover", "head:7210", "/t", "fp"}; };
    Result<std::unique_ptr<AllocManager>> m =
        AllocManager::Start(loop_, clock_, scheduler_, std::make_unique<RecordedSlurm>(log_), o);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? std::move(*m) : nullptr;
  }
  // Runs the loop until `done` holds (checked after each round's answer).
  bool RunUntil(const std::function<bool()>& done) {
    net::Timer guard(loop_);
    bool timed_out = false;
    guard.ArmAfter(Seconds(20), [&] {
      timed_out = true;
      loop_.Stop();
    });
    net::Timer check(loop_);
    std::function<void()> poll = [&] {
      if (done()) return loop_.Stop();
      check.ArmAfter(Millis(1), poll);
    };
    poll();
    loop_.Run();
    return !timed_out;
  }
  void AttachWorker(const std::string& name) {
    core::Outbox out;
    core::WorkerResources r = core::testing::WorkerBuilder().Build();
    r.name = name;
    r.cpu_cores.clear();  // it takes none of the queued tasks
    ASSERT_TRUE(scheduler_.Handle(clock_.Now(), core::WorkerJoined{next_worker_++, r}, out).ok());
  }
  void QueueTask(Duration timeout) {
    core::Outbox out;
    auto spec = core::testing::JobBuilder(core::testing::TaskBuilder().Timeout(timeout)).Build();
    ASSERT_TRUE(scheduler_.Submit(clock_.Now(), spec, out).ok());
  }

  std::filesystem::path dir_;
  net::EventLoop loop_;
  RealClock clock_;
  core::Scheduler scheduler_{core::SchedulerConfig{}};
  std::shared_ptr<RecordedSlurm::Log> log_ = std::make_shared<RecordedSlurm::Log>();
  WorkerId next_worker_ = 1;
};

TEST_F(AllocManagerTest, QueuedWorkThatFitsAnAllocationSubmitsOneAtATime) {
  std::unique_ptr<AllocManager> m = Start();
  ASSERT_TRUE(m->Add(Spec(2, Seconds(600))).ok());
  QueueTask(Seconds(3600));  // longer than a worker lives: no allocation for it
  QueueTask(Seconds(60));
  QueueTask(Seconds(60));
  log_->answers = {std::string("41"), std::string("42")};
  ASSERT_TRUE(RunUntil([&] { return m->queues()[0].allocations.size() == 1; }));
  // The first one's worker has not attached: no second one, however long.
  ASSERT_TRUE(RunUntil([&] { return m->queues()[0].allocations[0].slurm_state == "PENDING"; }));
  {
    std::lock_guard<std::mutex> lock(log_->mu);
    ASSERT_EQ(log_->submits.size(), 1u);
    EXPECT_THAT(log_->submits[0], ElementsAre("--job-name=drover-01234567-q1", "--time=10",
                                              "--output=" + dir_.string() + "/alloc/slurm-%j.out"));
  }
  // Its worker attaches (and takes none of the tasks): the work still
  // waits and nothing is on its way, so one more.
  AttachWorker("slurm-1-41");
  ASSERT_TRUE(RunUntil([&] { return m->queues()[0].allocations.size() == 2; }));
  EXPECT_TRUE(m->queues()[0].allocations[0].attached);
  EXPECT_FALSE(m->queues()[0].allocations[0].ended);
  EXPECT_EQ(m->queues()[0].allocations[1].job, "42");
  m->Stop();
}

// A node that cannot start the worker (a wrong path, no network to the
// server) ends its allocation at once; it is not asked again every round.
TEST_F(AllocManagerTest, AnAllocationThatEndsBeforeItsWorkerAttachedBacksOff) {
  std::unique_ptr<AllocManager> m = Start();
  ASSERT_TRUE(m->Add(Spec(2, Seconds(600))).ok());
  QueueTask(Seconds(60));
  log_->answers = {std::string("41")};
  ASSERT_TRUE(RunUntil([&] { return m->queues()[0].allocations.size() == 1; }));
  {
    std::lock_guard<std::mutex> lock(log_->mu);
    log_->states.clear();
  }
  ASSERT_TRUE(RunUntil([&] { return m->queues()[0].failures == 1; }));
  EXPECT_THAT(m->queues()[0].last_error,
              HasSubstr("Slurm job 41 ended before its worker attached (its output: "));
  ASSERT_TRUE(m->queues()[0].retry_at.has_value());
  EXPECT_GE(*m->queues()[0].retry_at - m->queues()[0].allocations[0].submitted_at, Seconds(10));
  m->Stop();
}

TEST_F(AllocManagerTest, AFailedSubmissionBacksOffWithTheReasonAndTheQueueSurvivesARestart) {
  {
    std::unique_ptr<AllocManager> m = Start();
    proto::AllocQueueRequest spec = Spec(1, Seconds(600));
    spec.sbatch_args = {"--partition", "nosuch"};
    ASSERT_TRUE(m->Add(spec).ok());
    QueueTask(Seconds(60));
    log_->answers = {Result<std::string>(
        FailedPrecondition("sbatch exited with code 1: invalid partition specified: nosuch"))};
    ASSERT_TRUE(RunUntil([&] { return m->queues()[0].failures == 1; }));
    EXPECT_THAT(m->queues()[0].last_error, HasSubstr("invalid partition specified: nosuch"));
    ASSERT_TRUE(m->queues()[0].retry_at.has_value());
    m->Stop();
  }
  std::unique_ptr<AllocManager> again = Start();
  ASSERT_EQ(again->queues().size(), 1u);
  EXPECT_EQ(again->queues()[0].failures, 1u);
  EXPECT_THAT(again->queues()[0].spec.sbatch_args, ElementsAre("--partition", "nosuch"));
  // Removing it forgets it; a second id is new.
  EXPECT_TRUE(again->Remove(1).ok());
  EXPECT_EQ(again->Remove(1).code(), StatusCode::kNotFound);
  EXPECT_EQ(*again->Add(Spec()), 2u);
  again->Stop();
}

}  // namespace
}  // namespace drover::server
