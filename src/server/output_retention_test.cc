// Output retention on a simulated clock: a job's outputs are released to
// each worker that keeps them `keep` after the job ended, at once for a job
// past it, forgotten or unknown, never while it runs; nothing waits a day.
#include "server/output_retention.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "net/event_loop.h"
#include "proto/job_file.h"
#include "server/core_driver.h"
#include "server/lease_book.h"
#include "store/memory_env.h"
#include "store/memory_store.h"

namespace drover::server {
namespace {

constexpr Duration kDay = Seconds(24 * 3600);
constexpr Duration kWeek = 7 * kDay;

class RecordingSink final : public CommandSink {
 public:
  std::vector<core::AssignTask> assigned;
  void Assign(const core::AssignTask& a) override { assigned.push_back(a); }
  void Kill(const core::KillTask&) override {}
  void StateChanged(const core::TaskStateChanged&, Time) override {}
};

class OutputRetentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = store::MemoryStore::Open(clock_, env_, "/state/store");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    driver_ = std::make_unique<CoreDriver>(loop_, clock_, scheduler_, *store_, book_, sink_,
                                           DriverOptions{});
    ASSERT_TRUE(driver_->Recover().ok());
  }

  // An OutputRetention whose messages land in sent_ (worker 3 only while
  // three_connected_).
  std::unique_ptr<OutputRetention> Make(Duration keep_outputs, Duration keep_finished = kWeek,
                                        Duration cache_keep = Duration::zero()) {
    return std::make_unique<OutputRetention>(
        scheduler_, keep_outputs, keep_finished,
        [this](WorkerId w, const proto::ServerMessage& m) -> Status {
          if (w == 3 && !three_connected_) return Unavailable("worker 3 not connected");
          sent_.emplace_back(w, std::get<proto::ReleaseOutputs>(m).jobs);
          return Status::Ok();
        },
        cache_keep);
  }

  // A job of two tasks; with `cache`, cached (its successes become result
  // cache entries).
  JobId Submit(bool cache = false) {
    Result<core::JobSpec> spec = proto::JobSpecFromJson(
        cache ? R"({"name": "j", "task": [{"id": "t", "command": ["true"], "array": "0-1",
                    "cache": true}]})"
              : R"({"name": "j", "task": [{"id": "t", "command": ["true"], "array": "0-1"}]})");
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    Result<JobId> id = driver_->Submit(std::make_shared<const core::JobSpec>(std::move(*spec)));
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : JobId{};
  }
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
  // What was sent since the last call.
  std::vector<std::pair<WorkerId, std::vector<JobId>>> Sent() { return std::exchange(sent_, {}); }

  net::EventLoop loop_;
  SimulatedClock clock_;
  store::MemoryEnv env_;
  LeaseBook book_{"test-server"};
  RecordingSink sink_;
  static core::SchedulerConfig WithCache() {
    core::SchedulerConfig config;
    config.result_cache.digest = [](std::string_view bytes) { return std::string(bytes); };
    return config;
  }
  core::Scheduler scheduler_{WithCache()};
  std::unique_ptr<store::MemoryStore> store_;
  std::unique_ptr<CoreDriver> driver_;
  bool joined_ = false;
  bool three_connected_ = false;
  std::vector<std::pair<WorkerId, std::vector<JobId>>> sent_;
};

using Released = std::vector<std::pair<WorkerId, std::vector<JobId>>>;

TEST_F(OutputRetentionTest, AJobIsReleasedToEachHolderKeepAfterItEnded) {
  auto outputs = Make(kDay);
  const JobId ended = Submit();
  RunAssigned();
  ASSERT_TRUE(scheduler_.GetJob(ended)->done);
  const Time end = clock_.Now();
  const JobId running = Submit();  // assigned, never ends here
  ASSERT_FALSE(scheduler_.GetJob(running)->done);

  clock_.Advance(Seconds(5));
  outputs->Kept(1, {ended, running}, clock_.Now());
  outputs->Kept(2, {ended}, clock_.Now());
  outputs->Kept(3, {ended}, clock_.Now());  // not connected when it is released
  EXPECT_EQ(outputs->held_jobs(), 2u);
  EXPECT_EQ(outputs->Release(end + kDay - Seconds(1)), 0u);
  EXPECT_EQ(Sent(), Released{});
  EXPECT_EQ(outputs->ReleasedNote({ended, 0}, end + kDay - Seconds(1)), "");

  EXPECT_EQ(outputs->Release(end + kDay), 1u);
  EXPECT_EQ(Sent(), (Released{{1, {ended}}, {2, {ended}}}));
  EXPECT_EQ(outputs->Release(end + kDay), 0u) << "each holder is told once";
  EXPECT_EQ(Sent(), Released{});
  EXPECT_EQ(outputs->held_jobs(), 1u);  // the running job's
  EXPECT_EQ(outputs->ReleasedNote({ended, 1}, end + kDay),
            "outputs of 1.1 were released 1d after job 1 ended (drover server --keep-outputs)");
  EXPECT_EQ(outputs->ReleasedNote({running, 0}, end + 2 * kDay), "");

  // Worker 3 was away; attaching again, it names the job and hears at once.
  three_connected_ = true;
  outputs->Kept(3, {ended, running}, end + kDay);
  EXPECT_EQ(Sent(), (Released{{3, {ended}}}));

  // The running job, while it runs, is never due.
  EXPECT_EQ(outputs->Release(end + 30 * kDay), 0u);
  EXPECT_EQ(Sent(), Released{});
}

TEST_F(OutputRetentionTest, ForgottenOrUnknownJobsAreReleasedAtOnceAndKeepFinishedBoundsKeep) {
  auto outputs = Make(30 * kDay, kWeek);
  EXPECT_EQ(outputs->keep(), kWeek);
  EXPECT_EQ(outputs->interval(), Seconds(600));
  EXPECT_EQ(Make(30 * kDay, Duration::zero())->keep(), 30 * kDay) << "jobs kept forever";
  EXPECT_EQ(Make(Seconds(10))->interval(), Seconds(1));

  const JobId gone = Submit();
  RunAssigned();
  ASSERT_TRUE(driver_->ForgetJob(gone).ok());
  outputs->Kept(1, {gone, 77}, clock_.Now());
  EXPECT_EQ(Sent(), (Released{{1, {gone, 77}}}));
  EXPECT_EQ(outputs->held_jobs(), 0u);
}

TEST_F(OutputRetentionTest, AZeroKeepReleasesAJobAsItEnds) {
  auto outputs = Make(Duration::zero());
  const JobId job = Submit();
  outputs->Kept(1, {job}, clock_.Now());  // still queued: kept
  EXPECT_EQ(Sent(), Released{});
  RunAssigned();
  EXPECT_EQ(outputs->Release(clock_.Now()), 1u);
  EXPECT_EQ(Sent(), (Released{{1, {job}}}));
}

// A job that holds result cache entries keeps its outputs --cache-keep,
// not --keep-outputs (and never past --keep-finished).
TEST_F(OutputRetentionTest, AJobHoldingCacheEntriesKeepsItsOutputsForCacheKeep) {
  auto outputs = Make(kDay, kWeek, 3 * kDay);
  EXPECT_EQ(outputs->cache_keep(), 3 * kDay);
  EXPECT_EQ(Make(kDay, kWeek, 30 * kDay)->cache_keep(), kWeek);
  EXPECT_EQ(Make(kDay, kWeek, Seconds(1))->cache_keep(), kDay);
  const JobId cached = Submit(/*cache=*/true);
  RunAssigned();
  // Both tasks have one key (the same command, no {index}): one entry.
  ASSERT_EQ(scheduler_.GetJob(cached)->cache_entries, 1u);
  const JobId plain = Submit();
  RunAssigned();
  const Time end = clock_.Now();
  outputs->Kept(1, {cached, plain}, end);
  EXPECT_EQ(outputs->Release(end + kDay), 1u);
  EXPECT_EQ(Sent(), (Released{{1, {plain}}}));
  EXPECT_EQ(outputs->ReleasedNote({cached, 0}, end + kDay), "");
  EXPECT_EQ(outputs->Release(end + 3 * kDay), 1u);
  EXPECT_EQ(Sent(), (Released{{1, {cached}}}));
  EXPECT_EQ(outputs->ReleasedNote({cached, 0}, end + 3 * kDay),
            "outputs of 1.0 were released 3d after job 1 ended (drover server --cache-keep: it "
            "held result cache entries)");
}

}  // namespace
}  // namespace drover::server
