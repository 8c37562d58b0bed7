#include "server/core_driver.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "net/event_loop.h"
#include "net/idle.h"
#include "proto/job_file.h"
#include "store/memory_env.h"
#include "store/memory_store.h"

namespace drover::server {
namespace {

class NullSink final : public CommandSink {
 public:
  void Assign(const core::AssignTask&) override {}
  void Kill(const core::KillTask&) override {}
  void StateChanged(const core::TaskStateChanged&, Time) override {}
};

// A driver over a MemoryStore whose journal syncs inside Flush (no
// background thread): a callback waiting for durability runs as soon as
// the driver flushes, so the test sees exactly when it does.
class CoreDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = store::MemoryStore::Open(clock_, env_, "/state/store");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    driver_ = std::make_unique<CoreDriver>(loop_, clock_, scheduler_, *store_, book_, sink_,
                                           DriverOptions{});
    ASSERT_TRUE(driver_->Recover().ok());
  }

  JobId Submit() {
    Result<core::JobSpec> spec =
        proto::JobSpecFromJson(R"({"name": "j", "task": [{"id": "t", "command": ["true"]}]})");
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    Result<JobId> id = driver_->Submit(std::make_shared<const core::JobSpec>(std::move(*spec)));
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : JobId{};
  }

  // A new driver and store over the same journal, restoring into `scheduler`.
  Status Reopen(core::Scheduler& scheduler, DriverOptions options) {
    driver_.reset();
    store_.reset();
    auto store = store::MemoryStore::Open(clock_, env_, "/state/store");
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    driver_ =
        std::make_unique<CoreDriver>(loop_, clock_, scheduler, *store_, book_, sink_, options);
    return driver_->Recover();
  }

  net::EventLoop loop_;
  RealClock clock_;
  store::MemoryEnv env_;
  core::Scheduler scheduler_;
  LeaseBook book_{"test-server"};
  NullSink sink_;
  std::unique_ptr<store::MemoryStore> store_;
  std::unique_ptr<CoreDriver> driver_;
};

// A job submission's answer waits for durability; its flush starts at once
// instead of at the loop's idle point, after whatever else is ready (in
// `drover up`, the local worker starting the task).
TEST_F(CoreDriverTest, ASubmissionsAnswerFlushesAtOnce) {
  Submit();
  std::vector<std::string> order;
  driver_->AfterDurable([&](Status s) { order.push_back("durable " + s.ToString()); },
                        CoreDriver::Flush::kSoon);
  order.push_back("returned");
  ASSERT_EQ(order, (std::vector<std::string>{"durable ok", "returned"}));
  EXPECT_EQ(driver_->stats().flushes, 1u);
}

// Other waiters (a worker's result ack) leave the flush at the idle point,
// where a burst of records shares one batch.
TEST_F(CoreDriverTest, OtherWaitersFlushAtTheIdlePoint) {
  Submit();
  std::vector<std::string> order;
  driver_->AfterDurable([&](Status s) { order.push_back("durable " + s.ToString()); });
  order.push_back("returned");
  loop_.Post([&] { order.push_back("ready work"); });
  net::PostWhenIdle(loop_, [&] { loop_.Post([&] { loop_.Stop(); }); });
  loop_.Run();
  ASSERT_EQ(order, (std::vector<std::string>{"returned", "ready work", "durable ok"}));
  EXPECT_EQ(driver_->stats().flushes, 1u);
}

// What waited for one durable batch runs a slice of the loop's time per
// turn, in order, rather than all in one callback (after a compaction that
// is thousands of assignments); what asks later, with nothing left to make
// durable, still runs after them.
TEST_F(CoreDriverTest, WaitersOfOneBatchRunASlicePerTurnInOrder) {
  Submit();
  constexpr int kWaiters = 12;
  std::vector<int> ran;
  // Each waiter stands for 1 ms of work (a batch of assignments).
  auto work = [] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
    while (std::chrono::steady_clock::now() < until) {
    }
  };
  for (int i = 0; i < kWaiters; ++i) {
    driver_->AfterDurable(
        [&, i](Status s) {
          EXPECT_TRUE(s.ok()) << s.ToString();
          ran.push_back(i);
          work();
        },
        i + 1 == kWaiters ? CoreDriver::Flush::kSoon : CoreDriver::Flush::kAtIdle);
  }
  // The flush ran (this store syncs within it); a slice of 4 ms went.
  EXPECT_GE(ran.size(), 1u);
  EXPECT_LT(ran.size(), static_cast<size_t>(kWaiters));
  driver_->AfterDurable([&](Status) { ran.push_back(kWaiters); });
  int turns = 0;
  while (ran.size() < kWaiters + 1u && turns < 100) turns += loop_.Poll() > 0 ? 1 : 0;
  std::vector<int> want;
  for (int i = 0; i <= kWaiters; ++i) want.push_back(i);
  EXPECT_EQ(ran, want);
}

// Nothing left to make durable: the answer comes on the next turn, with no
// flush.
TEST_F(CoreDriverTest, NothingPendingAnswersWithoutAFlush) {
  Submit();
  driver_->AfterDurable([](Status) {}, CoreDriver::Flush::kSoon);
  const uint64_t flushes = driver_->stats().flushes;
  bool answered = false;
  driver_->AfterDurable([&](Status s) { answered = s.ok(); }, CoreDriver::Flush::kSoon);
  EXPECT_FALSE(answered);
  loop_.Post([&] { loop_.Stop(); });
  loop_.Run();
  EXPECT_TRUE(answered);
  EXPECT_EQ(driver_->stats().flushes, flushes);
}

// A restart decodes the journal on helper threads, chunks of it ahead of
// the restore: every job comes back in order, and a record that does not
// decode fails the start naming its index, however far in it lies.
TEST_F(CoreDriverTest, ARestartRestoresEveryRecordAndNamesOneThatDoesNotDecode) {
  constexpr int kJobs = 9000;  // records in three chunks and more, two helpers
  for (int i = 0; i < kJobs; ++i) Submit();
  driver_->AfterDurable([](Status) {}, CoreDriver::Flush::kSoon);
  auto reopen = [&](core::Scheduler& scheduler) { return Reopen(scheduler, DriverOptions{}); };
  core::Scheduler restored;
  Status recovered = reopen(restored);
  ASSERT_TRUE(recovered.ok()) << recovered.ToString();
  ASSERT_EQ(restored.Jobs().size(), static_cast<size_t>(kJobs));
  EXPECT_EQ(restored.Jobs().front(), JobId(1));
  EXPECT_EQ(restored.Jobs().back(), JobId(kJobs));
  const uint64_t records = driver_->stats().restored_records;
  EXPECT_GE(records, static_cast<uint64_t>(kJobs));

  bool appended = false;
  store_->Append("not a record", [&](Status s) { appended = s.ok(); });
  store_->Flush();
  ASSERT_TRUE(appended);
  core::Scheduler broken;
  Status failed = reopen(broken);
  EXPECT_EQ(failed.code(), StatusCode::kDataLoss) << failed.ToString();
  EXPECT_NE(failed.message().find("journal record " + std::to_string(records)), std::string::npos)
      << failed.ToString();
  driver_.reset();
}

// A compaction takes its snapshot a slice per loop turn, and what changes
// between slices is kept: a change to a task already taken follows the
// snapshot in the new journal, one to a task not yet taken is in the
// snapshot, and a job submitted meanwhile follows it. A restart restores
// all of it from the compacted journal.
TEST_F(CoreDriverTest, ACompactionTakenInSlicesKeepsWhatChangedBetweenThem) {
  DriverOptions options;
  options.compact_bytes = 1;  // the first flush compacts
  options.snapshot_tasks_per_slice = 1;
  auto reopen = [&](core::Scheduler& scheduler) { return Reopen(scheduler, options); };
  core::Scheduler live;
  ASSERT_TRUE(reopen(live).ok());
  const JobId a = Submit();
  const JobId b = Submit();
  const JobId c = Submit();
  // The flush starts the compaction; its first slice takes job a's task.
  driver_->AfterDurable([](Status) {}, CoreDriver::Flush::kSoon);
  ASSERT_EQ(driver_->stats().compactions, 0u);
  driver_->Handle(core::CancelTask{TaskId{a, 0}});  // taken: follows the snapshot
  driver_->Handle(core::CancelTask{TaskId{c, 0}});  // not yet taken: in it
  const JobId d = Submit();                         // newer than the start: follows
  Deadline limit(Seconds(30));
  while (driver_->stats().compactions == 0 && !limit.Passed()) loop_.Poll();
  ASSERT_EQ(driver_->stats().compactions, 1u);
  driver_->AfterDurable([](Status) {}, CoreDriver::Flush::kSoon);

  core::Scheduler restored;
  Status recovered = reopen(restored);
  ASSERT_TRUE(recovered.ok()) << recovered.ToString();
  EXPECT_EQ(restored.Jobs(), (std::vector<JobId>{a, b, c, d}));
  auto state = [&](JobId job) {
    Result<core::TaskInfo> info = restored.GetTask(TaskId{job, 0});
    return info.ok() ? std::string(core::TaskStateName(info->state)) : info.status().ToString();
  };
  EXPECT_EQ(state(a), "canceled");
  EXPECT_EQ(state(b), "queued");
  EXPECT_EQ(state(c), "canceled");
  EXPECT_EQ(state(d), "queued");
  driver_.reset();
}

}  // namespace
}  // namespace drover::server
