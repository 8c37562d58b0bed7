#include "worker/resources/resources_cgroup.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "common/quantity.h"
#include "worker/resources/resources_host.h"
#include "worker/resources/resources_test_util.h"

namespace drover::worker {
namespace {

using ::testing::HasSubstr;
using ::testing::Optional;

constexpr char kUnlimitedV1[] = "9223372036854771712\n";

class CgroupTest : public ::testing::Test {
 protected:
  std::string Proc() const { return dir_.path() + "/proc"; }
  std::string Sys() const { return dir_.path() + "/sys"; }
  std::string Cg(const std::string& rel) const { return "sys/fs/cgroup/" + rel; }

  testing::TempDir dir_;
};

// The layout of this project's build machine: cgroup v1, the memory
// controller nested two levels deep, the others at the root, and an unused
// unified tree.
TEST_F(CgroupTest, V1NestedMemoryTakesTheTightestAncestor) {
  dir_.Write("proc/self/cgroup",
             "9:name=systemd:/\n4:memory:/process_api/abc\n2:cpuacct:/\n1:cpu:/\n0::/\n");
  dir_.Write(Cg("memory/memory.limit_in_bytes"), kUnlimitedV1);
  dir_.Write(Cg("memory/process_api/memory.limit_in_bytes"), std::to_string(8 * kGiB) + "\n");
  dir_.Write(Cg("memory/process_api/abc/memory.limit_in_bytes"), std::to_string(16 * kGiB));
  dir_.Write(Cg("cpu/cpu.cfs_quota_us"), "-1\n");
  dir_.Write(Cg("cpu/cpu.cfs_period_us"), "100000\n");
  dir_.MakeDir(Cg("unified"));

  Result<CgroupLimits> limits = ReadCgroupLimits(Proc(), Sys());
  ASSERT_TRUE(limits.ok()) << limits.status().ToString();
  EXPECT_THAT(limits->memory_limit_bytes, Optional(8 * kGiB));
  EXPECT_EQ(limits->cpu_quota_milli, std::nullopt);
  EXPECT_EQ(limits->memory_dir, dir_.path() + "/" + Cg("memory/process_api/abc"));
  EXPECT_EQ(limits->memory_version, 1);
}

TEST_F(CgroupTest, V1JointCpuHierarchyQuota) {
  dir_.Write("proc/self/cgroup", "3:cpu,cpuacct:/batch/w1\n2:memory:/batch/w1\n");
  dir_.Write(Cg("cpu,cpuacct/batch/w1/cpu.cfs_quota_us"), "250000\n");
  dir_.Write(Cg("cpu,cpuacct/batch/w1/cpu.cfs_period_us"), "100000\n");
  dir_.Write(Cg("cpu,cpuacct/batch/cpu.cfs_quota_us"), "400000\n");
  dir_.Write(Cg("cpu,cpuacct/batch/cpu.cfs_period_us"), "100000\n");
  dir_.Write(Cg("memory/batch/w1/memory.limit_in_bytes"), kUnlimitedV1);

  Result<CgroupLimits> limits = ReadCgroupLimits(Proc(), Sys());
  ASSERT_TRUE(limits.ok()) << limits.status().ToString();
  EXPECT_THAT(limits->cpu_quota_milli, Optional(2500));
  EXPECT_EQ(limits->memory_limit_bytes, std::nullopt);
}

TEST_F(CgroupTest, V2UnifiedTree) {
  dir_.Write("proc/self/cgroup", "0::/user.slice/job\n");
  dir_.Write(Cg("cgroup.controllers"), "cpuset cpu io memory pids\n");
  dir_.Write(Cg("user.slice/memory.max"), "max\n");
  dir_.Write(Cg("user.slice/cpu.max"), "max 100000\n");
  dir_.Write(Cg("user.slice/job/memory.max"), std::to_string(4 * kGiB) + "\n");
  dir_.Write(Cg("user.slice/job/cpu.max"), "150000 100000\n");

  Result<CgroupLimits> limits = ReadCgroupLimits(Proc(), Sys());
  ASSERT_TRUE(limits.ok()) << limits.status().ToString();
  EXPECT_THAT(limits->memory_limit_bytes, Optional(4 * kGiB));
  EXPECT_THAT(limits->cpu_quota_milli, Optional(1500));
  EXPECT_EQ(limits->memory_version, 2);
  EXPECT_EQ(limits->memory_dir, dir_.path() + "/" + Cg("user.slice/job"));
}

TEST_F(CgroupTest, V2ControllerNotEnabledMeansNoLimit) {
  dir_.Write("proc/self/cgroup", "0::/job\n");
  dir_.Write(Cg("cgroup.controllers"), "pids\n");
  dir_.Write(Cg("job/memory.max"), "1024\n");

  Result<CgroupLimits> limits = ReadCgroupLimits(Proc(), Sys());
  ASSERT_TRUE(limits.ok());
  EXPECT_EQ(limits->memory_limit_bytes, std::nullopt);
  EXPECT_EQ(limits->memory_version, 0);
}

TEST_F(CgroupTest, ContainerSeesHostPathButMountsOnlyItsSubtree) {
  dir_.Write("proc/self/cgroup", "4:memory:/docker/0123abcd\n");
  dir_.Write(Cg("memory/memory.limit_in_bytes"), std::to_string(kGiB));

  Result<CgroupLimits> limits = ReadCgroupLimits(Proc(), Sys());
  ASSERT_TRUE(limits.ok());
  EXPECT_THAT(limits->memory_limit_bytes, Optional(kGiB));
  EXPECT_EQ(limits->memory_dir, dir_.path() + "/" + Cg("memory"));
}

TEST_F(CgroupTest, NoCgroupsAtAll) {
  Result<CgroupLimits> limits = ReadCgroupLimits(Proc(), Sys());
  ASSERT_TRUE(limits.ok());
  EXPECT_EQ(limits->memory_limit_bytes, std::nullopt);
  EXPECT_EQ(limits->cpu_quota_milli, std::nullopt);
  EXPECT_EQ(limits->memory_dir, "");
}

TEST_F(CgroupTest, MalformedLimitNamesFileAndText) {
  dir_.Write("proc/self/cgroup", "0::/job\n");
  dir_.Write(Cg("cgroup.controllers"), "cpu memory\n");
  dir_.Write(Cg("job/memory.max"), "lots\n");

  Result<CgroupLimits> limits = ReadCgroupLimits(Proc(), Sys());
  ASSERT_FALSE(limits.ok());
  EXPECT_EQ(limits.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(limits.status().message(), HasSubstr("job/memory.max"));
  EXPECT_THAT(limits.status().message(), HasSubstr("\"lots\""));

  dir_.Write(Cg("job/memory.max"), "max\n");
  dir_.Write(Cg("job/cpu.max"), "100000\n");
  limits = ReadCgroupLimits(Proc(), Sys());
  ASSERT_FALSE(limits.ok());
  EXPECT_THAT(limits.status().message(), HasSubstr("cpu.max"));
}

TEST_F(CgroupTest, MemoryUsageExcludesInactiveFileCache) {
  std::string v1 = dir_.MakeDir("v1");
  dir_.Write("v1/memory.usage_in_bytes", "1000000\n");
  dir_.Write("v1/memory.stat", "cache 500000\ninactive_file 1\ntotal_inactive_file 300000\n");
  Result<uint64_t> used = ReadCgroupMemoryUsage(v1, 1);
  ASSERT_TRUE(used.ok()) << used.status().ToString();
  EXPECT_EQ(*used, 700000u);

  std::string v2 = dir_.MakeDir("v2");
  dir_.Write("v2/memory.current", "2000000\n");
  dir_.Write("v2/memory.stat", "anon 1\ninactive_file 500000\n");
  used = ReadCgroupMemoryUsage(v2, 2);
  ASSERT_TRUE(used.ok());
  EXPECT_EQ(*used, 1500000u);

  EXPECT_EQ(ReadCgroupMemoryUsage(dir_.path() + "/none", 2).status().code(), StatusCode::kNotFound);
}

bool ContainsPid(const std::string& procs_file) {
  Result<std::string> text = ReadSmallFile(procs_file);
  if (!text.ok()) return false;
  std::istringstream in(*text);
  for (pid_t pid; in >> pid;) {
    if (pid == getpid()) return true;
  }
  return false;
}

// On the real machine, the directory found must be the one this process is
// in, and for v1 the limit must agree with the kernel's own effective
// figure, hierarchical_memory_limit.
TEST(CgroupRealTest, AgreesWithTheKernel) {
  Result<CgroupLimits> limits = ReadCgroupLimits("/proc", "/sys");
  ASSERT_TRUE(limits.ok()) << limits.status().ToString();
  if (limits->memory_version == 0) GTEST_SKIP() << "no memory controller mounted";
  ASSERT_TRUE(std::filesystem::is_directory(limits->memory_dir)) << limits->memory_dir;
  EXPECT_TRUE(ContainsPid(limits->memory_dir + "/cgroup.procs")) << limits->memory_dir;
  // A v2 root cgroup has no memory.current; the sampler reads usage only
  // where a limit applies, which is never the root.
  if (limits->memory_limit_bytes || limits->memory_version == 1) {
    Result<uint64_t> used = ReadCgroupMemoryUsage(limits->memory_dir, limits->memory_version);
    ASSERT_TRUE(used.ok()) << used.status().ToString();
    EXPECT_GT(*used, 0u);
  }
  if (limits->memory_version == 1) {
    Result<std::string> stat = ReadSmallFile(limits->memory_dir + "/memory.stat");
    ASSERT_TRUE(stat.ok());
    std::istringstream in(*stat);
    std::string key;
    uint64_t value = 0;
    std::optional<uint64_t> kernel;
    while (in >> key >> value) {
      if (key == "hierarchical_memory_limit") kernel = value;
    }
    ASSERT_TRUE(kernel.has_value());
    if (*kernel >= (uint64_t{1} << 62)) {
      EXPECT_EQ(limits->memory_limit_bytes, std::nullopt);
    } else {
      EXPECT_THAT(limits->memory_limit_bytes, Optional(*kernel));
    }
  }
}

}  // namespace
}  // namespace drover::worker
