// The ledger's checks must be able to fail: hand-written command sequences
// that break one invariant each, next to a correct one that passes.
#include "core_sim/ledger.h"

#include "gtest/gtest.h"

namespace drover::core_sim {
namespace {

using core::TaskState;

class LedgerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    core::WorkerResources w;
    w.cpu_cores = {0, 1};
    w.mem_bytes = 1 << 30;
    w.gpus = {core::GpuDevice{0, "GPU-0", "NVIDIA A100-SXM4-80GB", 80ull << 30}};
    ledger_.WorkerJoined(1, w);
    auto spec = std::make_shared<core::JobSpec>();
    core::TaskGroupSpec g;
    g.name = "a";
    g.command = {"true"};
    g.resources.cpus_milli = 1000;
    g.array = core::ArrayRange{0, 2, 1};
    spec->groups.push_back(g);
    core::TaskGroupSpec gpu = g;
    gpu.name = "gpu";
    gpu.resources.gpus = 100;
    gpu.array = core::ArrayRange{0, 2, 1};
    spec->groups.push_back(gpu);
    spec_ = spec;
    ledger_.OnCommand(core::Persist{core::JobRecord{1, spec_, TimeFromMicros(0)}});
  }

  // Claim, the queued->assigned change and its record, as Place emits them.
  void Place(uint32_t index, std::vector<uint32_t> cores, std::vector<core::GpuGrant> gpus = {}) {
    const TaskId id{1, index};
    std::vector<core::LeaseKey> keys{{core::LeaseKind::kSlot, 1, 0, id}};
    for (const auto& g : gpus) keys.push_back({core::LeaseKind::kGpu, 1, g.index, TaskId{}});
    ledger_.OnCommand(core::ClaimLeases{id, 1, 1, keys, Seconds(30)});
    ledger_.ClaimAnswered(id, 1, true);
    ledger_.OnCommand(core::TaskStateChanged{id, TaskState::kQueued, TaskState::kAssigned, 1, ""});
    ledger_.OnCommand(core::Persist{core::TaskRecord{id, TaskState::kAssigned, 1, 1, TimeFromMicros(0),
                                                     "", 0, cores, gpus}});
  }

  core::AssignTask AssignOf(uint32_t index, std::vector<uint32_t> cores) {
    core::AssignTask a;
    a.task = TaskId{1, index};
    a.attempt = 1;
    a.worker = 1;
    a.cores = std::move(cores);
    a.array_index = index;
    a.job = spec_.get();
    return a;
  }

  Ledger ledger_;
  std::shared_ptr<const core::JobSpec> spec_;
};

TEST_F(LedgerTest, CorrectSequencePasses) {
  Place(0, {0});
  Place(1, {1});
  ledger_.GrantDelivered(TaskId{1, 0}, 1);
  ledger_.OnCommand(AssignOf(0, {0}));
  ledger_.OnCommand(core::TaskStateChanged{TaskId{1, 0}, TaskState::kAssigned, TaskState::kRunning, 1, ""});
  ledger_.OnCommand(core::TaskStateChanged{TaskId{1, 0}, TaskState::kRunning, TaskState::kSucceeded, 1, ""});
  Place(2, {0}, {core::GpuGrant{0, 100, 0}});  // core 0 is free again
  EXPECT_FALSE(ledger_.failed()) << ledger_.violation();
}

TEST_F(LedgerTest, CoreGivenTwiceIsCaught) {
  Place(0, {0});
  Place(1, {0});
  ASSERT_TRUE(ledger_.failed());
  EXPECT_NE(ledger_.violation().find("core 0 on worker 1 given to 1.1#1 while 1.0 holds it"),
            std::string::npos)
      << ledger_.violation();
}

TEST_F(LedgerTest, WholeGpuGivenTwiceIsCaught) {
  Place(2, {0}, {core::GpuGrant{0, 100, 0}});
  Place(3, {1}, {core::GpuGrant{0, 100, 0}});
  ASSERT_TRUE(ledger_.failed());
  EXPECT_NE(ledger_.violation().find("GPU 0 on worker 1 given whole"), std::string::npos)
      << ledger_.violation();
}

TEST_F(LedgerTest, AssignBeforeGrantDeliveredIsCaught) {
  Place(0, {0});
  ledger_.OnCommand(AssignOf(0, {0}));
  ASSERT_TRUE(ledger_.failed());
  EXPECT_NE(ledger_.violation().find("before LeaseGranted arrived"), std::string::npos)
      << ledger_.violation();
}

TEST_F(LedgerTest, PlacementOnLostWorkerIsCaught) {
  ledger_.WorkerLost(1);
  Place(0, {0});
  ASSERT_TRUE(ledger_.failed());
  EXPECT_NE(ledger_.violation().find("placed on lost worker 1"), std::string::npos);
}

TEST_F(LedgerTest, RequeueWhileLeaseHeldIsCaught) {
  Place(0, {0});
  LeaseTable leases;
  ASSERT_TRUE(leases.Claim(core::ClaimLeases{TaskId{1, 0}, 1, 1,
                                             {{core::LeaseKind::kSlot, 1, 0, TaskId{1, 0}}},
                                             Seconds(30)},
                           TimeFromMicros(0)));
  ledger_.WorkerLost(1);
  ledger_.OnCommand(core::TaskStateChanged{TaskId{1, 0}, TaskState::kAssigned, TaskState::kQueued, 1,
                                           "worker lost"});
  EXPECT_FALSE(ledger_.failed());
  core::Scheduler scheduler;
  ledger_.EndOfEvent(scheduler, leases);
  ASSERT_TRUE(ledger_.failed());
  EXPECT_NE(ledger_.violation().find("ended while its lease is still held"), std::string::npos)
      << ledger_.violation();
}

TEST_F(LedgerTest, TransitionFromWrongStateIsCaught) {
  Place(0, {0});
  ledger_.OnCommand(core::TaskStateChanged{TaskId{1, 0}, TaskState::kRunning, TaskState::kSucceeded, 1, ""});
  ASSERT_TRUE(ledger_.failed());
  EXPECT_NE(ledger_.violation().find("the ledger has it assigned"), std::string::npos)
      << ledger_.violation();
}

}  // namespace
}  // namespace drover::core_sim
