#include "worker/state/agent_convert.h"

#include <gtest/gtest.h>

#include <csignal>

#include "core/reasons.h"

namespace drover::worker {
namespace {

TEST(ParseServerAddressTest, HostAndPort) {
  Result<ServerAddress> a = ParseServerAddress("10.0.0.5:7300");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->host, "10.0.0.5");
  EXPECT_EQ(a->port, 7300);
}

TEST(ParseServerAddressTest, BareHostUsesTheDefaultPort) {
  Result<ServerAddress> a = ParseServerAddress("gpu-box");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "gpu-box");
  EXPECT_EQ(a->port, 7210);
}

TEST(ParseServerAddressTest, BracketedIpv6) {
  Result<ServerAddress> a = ParseServerAddress("[::1]:8000");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "::1");
  EXPECT_EQ(a->port, 8000);
}

TEST(ParseServerAddressTest, RejectsBadPortsAndEmptyHosts) {
  for (const char* bad : {"host:", "host:0", "host:70000", "host:12x", ":7210", "[::1", "[::1]x"}) {
    Result<ServerAddress> a = ParseServerAddress(bad);
    ASSERT_FALSE(a.ok()) << bad;
    EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(a.status().message().find(bad), std::string::npos) << a.status().message();
  }
}

TEST(AgentConvertTest, ResourcesKeepConcreteIndices) {
  WorkerResources detected;
  detected.cpu_ids = {2, 3};
  detected.memory_bytes = 1 << 30;
  detected.gpus = {GpuInfo{1, "GPU-abc", "NVIDIA A100", 80ull << 30}};
  detected.labels = {{"os", "linux"}};
  detected.counters = {{"licenses", 2}};
  core::WorkerResources r = ToCoreResources(detected, "w1");
  EXPECT_EQ(r.name, "w1");
  EXPECT_EQ(r.cpu_cores, (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(r.mem_bytes, 1u << 30);
  ASSERT_EQ(r.gpus.size(), 1u);
  EXPECT_EQ(r.gpus[0], (core::GpuDevice{1, "GPU-abc", "NVIDIA A100", 80ull << 30}));
  EXPECT_EQ(r.labels.at("os"), "linux");
  EXPECT_EQ(r.counters.at("licenses"), 2);
}

TEST(AgentConvertTest, UtilizationRoundsAndFillsUnknownGpuFigures) {
  Utilization u;
  u.cpu_percent = 42.6;
  u.memory_used_bytes = 123;
  u.gpus = {GpuSample{0, 55, std::nullopt}};
  core::WorkerUtilization out = ToCoreUtilization(u);
  EXPECT_EQ(out.cpu_percent, 43u);
  EXPECT_EQ(out.mem_used_bytes, 123u);
  ASSERT_EQ(out.gpus.size(), 1u);
  EXPECT_EQ(out.gpus[0].util_percent, 55u);
  EXPECT_EQ(out.gpus[0].mem_used_bytes, 0u);
}

TEST(AgentConvertTest, AssignmentBecomesSlotRequestAndSpec) {
  proto::Assignment a;
  a.task = TaskId{12, 3};
  a.attempt = 2;
  a.cores = {1, 2};
  a.cpu_quota_milli = 1500;
  a.mem_limit_bytes = 4096;
  a.gpus = {core::GpuGrant{0, 25, 0}};
  a.argv = {"python", "train.py"};
  a.env = {{"SEED", "7"}};
  a.array_index = 5;
  a.user = "ana";
  SlotRequest slot = ToSlotRequest(a);
  EXPECT_EQ(slot.milli_cpus, 1500);
  EXPECT_EQ(slot.cores, (std::vector<int>{1, 2}));
  EXPECT_EQ(slot.memory_bytes, 4096u);
  ASSERT_EQ(slot.gpus.size(), 1u);
  EXPECT_EQ(slot.gpus[0].index, 0);
  EXPECT_EQ(slot.gpus[0].hundredths, 25);
  TaskSpec spec = ToTaskSpec(a);
  EXPECT_EQ(spec.id, (TaskId{12, 3}));
  EXPECT_EQ(spec.attempt, 2u);
  EXPECT_EQ(spec.task_index, 5);
  EXPECT_EQ(spec.argv, a.argv);
  EXPECT_EQ(spec.user, "ana");
  EXPECT_EQ(spec.env, (std::vector<std::pair<std::string, std::string>>{{"SEED", "7"}}));
  EXPECT_EQ(spec.cores, (std::vector<int>{1, 2}));
  EXPECT_EQ(spec.gpus, (std::vector<int>{0}));
  EXPECT_EQ(spec.milli_cpus, 1500);
  EXPECT_EQ(spec.memory_bytes, 4096u);
}

TEST(AgentConvertTest, OutcomeOfASignalHasNoExitCode) {
  TaskResult r;
  r.signal = SIGKILL;
  r.exit_code = 0;
  r.oom_killed = true;
  r.peak_memory = 99;
  r.wall = Seconds(3);
  r.result_text = std::string(core::kMaxResultBytes + 10, 'x');
  core::TaskOutcome out = ToOutcome(r);
  EXPECT_EQ(out.signal, SIGKILL);
  EXPECT_EQ(out.exit_code, -1);
  EXPECT_TRUE(out.oom_killed);
  EXPECT_EQ(out.usage.peak_mem_bytes, 99u);
  EXPECT_EQ(out.usage.wall, Seconds(3));
  // Cut to the limit, and saying so.
  EXPECT_EQ(out.result.size(), core::kMaxResultBytes);
  EXPECT_TRUE(out.result.ends_with("x\n[drover: result truncated at 64 KiB]\n")) << out.result;
  // A result of exactly the limit is kept whole.
  r.result_text = std::string(core::kMaxResultBytes, 'y');
  EXPECT_EQ(ToOutcome(r).result, r.result_text);
}

// A task the worker stopped for holding more than its `disk` ends with the
// worker's reason alone: the SIGKILL was the worker's, not the program's,
// and the core's reason is then exactly the worker's words.
TEST(AgentConvertTest, ATaskStoppedForItsDiskEndsWithTheReasonAlone) {
  TaskResult r;
  r.signal = SIGKILL;
  r.stopped_for_disk = true;
  r.disk_error = "disk: 21.3 GiB written under its directory, more than disk 20 GiB";
  core::TaskOutcome out = ToOutcome(r);
  EXPECT_EQ(out.signal, 0);
  EXPECT_EQ(out.exit_code, -1);
  EXPECT_EQ(out.reason, r.disk_error);
  EXPECT_EQ(core::why::Failed(out, 0).text, r.disk_error);
}

// A process made ahead whose execve failed is reported as a failed start,
// as when the worker could not make the process at all.
TEST(AgentConvertTest, AStartErrorIsReportedAsAFailedStart) {
  TaskResult r;
  r.exit_code = 127;
  r.start_error = "command not found: trian.py";
  core::TaskOutcome out = ToOutcome(r);
  core::TaskOutcome start = FailureOutcome("command not found: trian.py");
  EXPECT_EQ(out.exit_code, start.exit_code);
  EXPECT_EQ(out.exit_code, -1);
  EXPECT_EQ(out.reason, "command not found: trian.py");
  EXPECT_EQ(out.result, "");
}

TEST(AgentConvertTest, FenceReasonSaysHowLong) {
  EXPECT_EQ(core::why::FencedText(Seconds(26)), "fenced: no contact with the server for 26 s");
  EXPECT_EQ(core::why::FencedText(Millis(1250)), "fenced: no contact with the server for 1.2 s");
  core::TaskOutcome out = FailureOutcome("command not found: trian.py");
  EXPECT_EQ(out.exit_code, -1);
  EXPECT_EQ(out.reason, "command not found: trian.py");
  EXPECT_EQ(out.result, "");
}

}  // namespace
}  // namespace drover::worker
