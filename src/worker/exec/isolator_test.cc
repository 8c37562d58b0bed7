#include "worker/exec/isolator.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "worker/exec/cgroup_files.h"
#include "worker/exec/exec_test_util.h"

namespace drover::worker {
namespace {

// A kept counter file is re-read from its start each time, follows a
// rewrite, and opens again after Close (as after a cage's removal).
TEST(KeptFileTest, RereadsFromTheStartAndReopensAfterClose) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/memory.oom_control";
  KeptFile missing(dir.path() + "/absent");
  EXPECT_EQ(missing.Read(), std::nullopt);
  std::ofstream(path) << "oom_kill_disable 0\noom_kill 1\n";
  KeptFile kept(path);
  std::optional<std::string> text = kept.Read();
  ASSERT_TRUE(text.has_value());
  EXPECT_EQ(ParseKeyedValue(*text, "oom_kill"), 1u);
  std::ofstream(path) << "oom_kill_disable 0\noom_kill 23\n";
  text = kept.Read();
  ASSERT_TRUE(text.has_value());
  EXPECT_EQ(ParseKeyedValue(*text, "oom_kill"), 23u);
  EXPECT_EQ(ParseKeyedValue(*text, "oom"), std::nullopt);
  kept.Close();
  std::filesystem::remove(path);
  EXPECT_EQ(kept.Read(), std::nullopt);
  std::ofstream(path) << "4096\n";
  text = kept.Read();
  ASSERT_TRUE(text.has_value());
  EXPECT_EQ(ParseNumber(*text), 4096u);
  KeptFile moved(std::move(kept));
  EXPECT_EQ(moved.Read(), "4096\n");
}

TEST(IsolationModeTest, ParsesTheFiveWords) {
  for (auto mode : {IsolationMode::kAuto, IsolationMode::kCgroup2, IsolationMode::kCgroup1,
                    IsolationMode::kRlimit, IsolationMode::kNone}) {
    auto parsed = ParseIsolationMode(IsolationModeName(mode));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, mode);
  }
  auto bad = ParseIsolationMode("docker");
  EXPECT_EQ(bad.status().message(),
            "unknown isolation \"docker\": expected auto, cgroup2, cgroup1, rlimit or none");
}

TEST(MakeIsolatorTest, AutoPrefersAUsableCgroup2Root) {
  testing::TempDir dir;
  std::string root = dir.path() + "/v2";
  std::filesystem::create_directory(root);
  std::ofstream(root + "/cgroup.controllers") << "cpu memory pids\n";
  IsolatorOptions options;
  options.cgroup2_root = root;
  auto isolator = MakeIsolator(options);
  ASSERT_TRUE(isolator.ok());
  EXPECT_EQ((*isolator)->mode(), IsolationMode::kCgroup2);
}

TEST(MakeIsolatorTest, AutoFallsBackToRlimitWhenNoCgroupIsUsable) {
  testing::TempDir dir;
  IsolatorOptions options;
  options.cgroup2_root = dir.path() + "/no-v2";
  options.cgroup1_mounts = dir.path() + "/no-v1";
  auto isolator = MakeIsolator(options);
  ASSERT_TRUE(isolator.ok());
  EXPECT_EQ((*isolator)->mode(), IsolationMode::kRlimit);

  options.mode = IsolationMode::kCgroup1;
  auto v1 = MakeIsolator(options);
  EXPECT_EQ(v1.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(v1.status().message(),
            "cgroup v1 controller \"memory\" is not mounted at " + dir.path() + "/no-v1/memory");
}

TEST(RlimitIsolatorTest, SetsDataAndProcessLimits) {
  IsolatorOptions options;
  options.mode = IsolationMode::kRlimit;
  auto isolator = MakeIsolator(options);
  ASSERT_TRUE(isolator.ok());
  auto cage = (*isolator)->CreateCage(CageSpec{"1.1.1", 500, 64ull << 20, 10, {}, {}});
  ASSERT_TRUE(cage.ok());
  ASSERT_EQ((*cage)->rlimits().size(), 2u);
  EXPECT_EQ((*cage)->rlimits()[0].resource, RLIMIT_DATA);
  EXPECT_EQ((*cage)->rlimits()[0].soft, 64ull << 20);
  EXPECT_EQ((*cage)->rlimits()[1].resource, RLIMIT_NPROC);
  EXPECT_EQ((*cage)->rlimits()[1].hard, 10u);
  EXPECT_FALSE((*cage)->contains_tree());
}

TEST(RlimitIsolatorTest, AllocationBeyondTheLimitFailsTheTask) {
  IsolatorOptions options;
  options.mode = IsolationMode::kRlimit;
  testing::Harness h(std::move(MakeIsolator(options)).value());
  TaskSpec spec = testing::Task(1, {testing::Helper(), "alloc", "200"});
  spec.memory_bytes = 64ull << 20;
  TaskResult r = h.Run(spec);
  EXPECT_EQ(r.outcome, TaskOutcome::kFailed);
  EXPECT_EQ(r.exit_code, 3);  // malloc failed; rlimits cannot tell OOM
  EXPECT_FALSE(r.oom_killed);
}

}  // namespace
}  // namespace drover::worker
