// Retention on a simulated clock: finished jobs are forgotten `keep` after
// their last change, journaled as tombstones, and stay forgotten (and their
// ids used) across a restart; nothing waits seven days.
#include "server/retention.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "net/event_loop.h"
#include "proto/job_file.h"
#include "store/memory_env.h"
#include "store/memory_store.h"

namespace drover::server {
namespace {

constexpr Duration kWeek = Seconds(7 * 24 * 3600);

// Keeps the assignments, so a test can run them to their end.
class RecordingSink final : public CommandSink {
 public:
  std::vector<core::AssignTask> assigned;
  void Assign(const core::AssignTask& a) override { assigned.push_back(a); }
  void Kill(const core::KillTask&) override {}
  void StateChanged(const core::TaskStateChanged&, Time) override {}
};

class RetentionTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }

  // A fresh scheduler and driver over the same journal: a restart.
  void Open() {
    driver_.reset();
    store_.reset();
    scheduler_ = std::make_unique<core::Scheduler>();
    auto store = store::MemoryStore::Open(clock_, env_, "/state/store");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    driver_ = std::make_unique<CoreDriver>(loop_, clock_, *scheduler_, *store_, book_, sink_,
                                           DriverOptions{});
    ASSERT_TRUE(driver_->Recover().ok());
    retention_ = std::make_unique<Retention>(*driver_, kWeek);
  }
  void Durable() {
    bool done = false;
    driver_->AfterDurable([&](Status s) { done = s.ok(); }, CoreDriver::Flush::kSoon);
    ASSERT_TRUE(done);
  }

  JobId Submit(const std::string& after = "") {
    Result<core::JobSpec> spec = proto::JobSpecFromJson(
        R"({"name": "j", )" + (after.empty() ? "" : R"("after": [")" + after + R"("], )") +
        R"("task": [{"id": "t", "command": ["true"], "array": "0-2"}]})");
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    Result<JobId> id = driver_->Submit(std::make_shared<const core::JobSpec>(std::move(*spec)));
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : JobId{};
  }
  void Cancel(JobId job) { driver_->Handle(core::CancelJob{job}); }
  // Runs every task assigned so far (a worker joins first) to success.
  void RunAssigned() {
    if (!joined_) {
      core::WorkerResources r;
      r.name = "w1";
      r.cpu_cores = {0, 1, 2, 3};
      r.mem_bytes = uint64_t{64} << 30;
      driver_->Handle(core::WorkerJoined{1, r});
      joined_ = true;
    }
    while (!sink_.assigned.empty()) {
      const core::AssignTask a = sink_.assigned.front();
      sink_.assigned.erase(sink_.assigned.begin());
      driver_->Handle(core::TaskStarted{a.task, a.attempt, a.worker});
      driver_->Handle(core::TaskFinished{a.task, a.attempt, core::TaskOutcome{}, a.worker});
    }
  }
  bool Held(JobId job) { return scheduler_->GetJob(job).ok(); }

  net::EventLoop loop_;
  SimulatedClock clock_;
  store::MemoryEnv env_;
  LeaseBook book_{"test-server"};
  RecordingSink sink_;
  std::unique_ptr<core::Scheduler> scheduler_;
  std::unique_ptr<store::MemoryStore> store_;
  std::unique_ptr<CoreDriver> driver_;
  std::unique_ptr<Retention> retention_;
  bool joined_ = false;
};

TEST_F(RetentionTest, FinishedJobsAreForgottenAfterKeepAndStayForgottenAfterARestart) {
  const JobId active = Submit();                // 1: queued, never done
  const JobId done = Submit();                  // 2: canceled (done)
  const JobId dependent = Submit(std::to_string(done));  // 3: --after 2, canceled too
  Cancel(done);
  Cancel(dependent);
  ASSERT_TRUE(scheduler_->GetJob(done)->done);
  ASSERT_TRUE(scheduler_->GetJob(dependent)->done);

  clock_.Advance(kWeek - Seconds(1));
  EXPECT_EQ(retention_->Prune(clock_.Now()).jobs, 0u);
  EXPECT_TRUE(Held(done));

  clock_.Advance(Seconds(1));
  const Retention::Pass pass = retention_->Prune(clock_.Now());
  EXPECT_EQ(pass.jobs, 2u);  // 3 first, which frees 2 (named in its --after)
  EXPECT_EQ(pass.tasks, 6u);
  EXPECT_FALSE(pass.more);
  EXPECT_TRUE(Held(active));
  EXPECT_FALSE(Held(done));
  EXPECT_FALSE(Held(dependent));
  EXPECT_TRUE(driver_->Expired(done));
  EXPECT_TRUE(driver_->Expired(dependent));
  EXPECT_FALSE(driver_->Expired(active));
  EXPECT_FALSE(driver_->Expired(4));  // never used
  EXPECT_EQ(scheduler_->Jobs(), (std::vector<JobId>{active}));
  // The snapshot a compaction writes holds the active job and one
  // tombstone for the highest id, nothing of the forgotten jobs.
  size_t tombstones = 0;
  for (const core::Record& r : scheduler_->Snapshot()) {
    if (const auto* job = std::get_if<core::JobRecord>(&r); job != nullptr) {
      if (!job->spec) ++tombstones;
      EXPECT_EQ(job->job, job->spec ? active : dependent);
    } else if (const auto* task = std::get_if<core::TaskRecord>(&r); task != nullptr) {
      EXPECT_EQ(task->task.job, active);
    } else {
      EXPECT_EQ(std::get<core::OutcomeRecord>(r).task.job, active);
    }
  }
  EXPECT_EQ(tombstones, 1u);
  Durable();

  Open();  // restart from the journal (tombstones after the jobs' records)
  EXPECT_TRUE(Held(active));
  EXPECT_FALSE(Held(done));
  EXPECT_FALSE(Held(dependent));
  EXPECT_TRUE(driver_->Expired(done));
  EXPECT_EQ(Submit(), 4u);  // ids are not given twice
}

TEST_F(RetentionTest, AJobNamedByAHeldJobIsKeptAndZeroKeepsEverything) {
  const JobId done = Submit();
  RunAssigned();
  ASSERT_TRUE(scheduler_->GetJob(done)->done);
  driver_->Handle(core::WorkerDrained{1, true});       // nothing more is placed
  const JobId waiting = Submit(std::to_string(done));  // held (queued), names 1
  ASSERT_FALSE(scheduler_->GetJob(waiting)->done);
  clock_.Advance(2 * kWeek);
  EXPECT_EQ(retention_->Prune(clock_.Now()).jobs, 0u);
  EXPECT_TRUE(Held(done));

  Retention forever(*driver_, Duration::zero());
  Cancel(waiting);
  clock_.Advance(2 * kWeek);
  EXPECT_EQ(forever.Prune(clock_.Now()).jobs, 0u);
  EXPECT_EQ(retention_->Prune(clock_.Now()).jobs, 2u);
}

TEST_F(RetentionTest, APassTakesAboutItsTaskBudgetAndSaysMoreAreDue) {
  // Three jobs of 3 tasks and a budget of 6 a pass: two fit in the first.
  for (int i = 0; i < 3; ++i) Cancel(Submit());
  clock_.Advance(kWeek);
  Retention small(*driver_, kWeek, 6);
  Retention::Pass pass = small.Prune(clock_.Now());
  EXPECT_EQ(pass.jobs, 2u);
  EXPECT_EQ(pass.tasks, 6u);
  EXPECT_TRUE(pass.more);
  pass = small.Prune(clock_.Now());
  EXPECT_EQ(pass.jobs, 1u);
  EXPECT_FALSE(pass.more);
  EXPECT_TRUE(scheduler_->Jobs().empty());
  // A job bigger than the budget still goes, alone.
  Retention tiny(*driver_, kWeek, 1);
  Cancel(Submit());
  clock_.Advance(kWeek);
  EXPECT_EQ(tiny.Prune(clock_.Now()).jobs, 1u);
}

}  // namespace
}  // namespace drover::server
