#include "worker/resources/resources_usage.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "worker/resources/resources_test_util.h"

namespace drover::worker {
namespace {

using ::testing::HasSubstr;

// A GpuSource whose samples the test sets.
class FakeGpuSource final : public GpuSource {
 public:
  explicit FakeGpuSource(Result<std::vector<GpuSample>>* next) : next_(next) {}
  std::string_view name() const override { return "fake"; }
  Result<std::vector<GpuInfo>> List() override { return std::vector<GpuInfo>(); }
  Result<std::vector<GpuSample>> Sample() override { return *next_; }

 private:
  Result<std::vector<GpuSample>>* next_;
};

// /proc/stat with per-core lines: user nice system idle iowait irq softirq steal.
std::string Stat(uint64_t busy0, uint64_t idle0, uint64_t busy1, uint64_t idle1) {
  auto line = [](const std::string& name, uint64_t busy, uint64_t idle) {
    return name + " " + std::to_string(busy) + " 0 0 " + std::to_string(idle) + " 0 0 0 0 0 0\n";
  };
  return line("cpu ", busy0 + busy1, idle0 + idle1) + line("cpu0", busy0, idle0) +
         line("cpu1", busy1, idle1) + "intr 12345\nctxt 999\n";
}

class UsageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.Write("proc/stat", Stat(100, 900, 500, 500));
    dir_.Write("proc/meminfo", "MemTotal: 1000 kB\nMemAvailable: 250 kB\n");
  }
  std::string Proc() const { return dir_.path() + "/proc"; }

  testing::TempDir dir_;
};

TEST_F(UsageTest, CpuShareFromDeltasOverTheWorkersCores) {
  SamplerConfig config;
  config.proc_root = Proc();
  config.cpu_ids = {1};
  UtilizationSampler sampler(config, nullptr);
  // Core 1: +30 busy, +70 idle -> 30%. Core 0 changes must not count.
  dir_.Write("proc/stat", Stat(200, 900, 530, 570));
  Result<Utilization> u = sampler.SampleUtilization();
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_DOUBLE_EQ(u->cpu_percent, 30.0);
  EXPECT_EQ(u->memory_used_bytes, 750u * 1024);
  EXPECT_TRUE(u->gpus.empty());
  EXPECT_EQ(u->gpu_error, "");

  // The next sample is relative to the previous one: +10 busy, +10 idle.
  dir_.Write("proc/stat", Stat(200, 900, 540, 580));
  u = sampler.SampleUtilization();
  ASSERT_TRUE(u.ok());
  EXPECT_DOUBLE_EQ(u->cpu_percent, 50.0);

  // No time passed: 0, not a division by zero.
  u = sampler.SampleUtilization();
  ASSERT_TRUE(u.ok());
  EXPECT_DOUBLE_EQ(u->cpu_percent, 0.0);
}

TEST_F(UsageTest, WholeMachineWhenNoCoresGiven) {
  SamplerConfig config;
  config.proc_root = Proc();
  UtilizationSampler sampler(config, nullptr);
  dir_.Write("proc/stat", Stat(180, 920, 500, 500));  // +80 busy, +20 idle overall
  Result<Utilization> u = sampler.SampleUtilization();
  ASSERT_TRUE(u.ok());
  EXPECT_DOUBLE_EQ(u->cpu_percent, 80.0);
}

TEST_F(UsageTest, MemoryFromTheCgroupWhenLimited) {
  std::string cg = dir_.MakeDir("cg");
  dir_.Write("cg/memory.current", "4096\n");
  SamplerConfig config;
  config.proc_root = Proc();
  config.memory_cgroup_dir = cg;
  config.memory_cgroup_version = 2;
  UtilizationSampler sampler(config, nullptr);
  Result<Utilization> u = sampler.SampleUtilization();
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->memory_used_bytes, 4096u);
}

TEST_F(UsageTest, GpuSamplesAndGpuErrors) {
  Result<std::vector<GpuSample>> next = std::vector<GpuSample>{{0, 55, 1024}, {1, std::nullopt, 0}};
  SamplerConfig config;
  config.proc_root = Proc();
  UtilizationSampler sampler(config, std::make_unique<FakeGpuSource>(&next));
  Result<Utilization> u = sampler.SampleUtilization();
  ASSERT_TRUE(u.ok());
  ASSERT_EQ(u->gpus.size(), 2u);
  EXPECT_EQ(u->gpus[0], (GpuSample{0, 55, 1024}));
  EXPECT_EQ(u->gpus[1].utilization_percent, std::nullopt);

  // A GPU failure does not fail the sample; it says why.
  next = Unavailable("GPU 1 fell off the bus");
  u = sampler.SampleUtilization();
  ASSERT_TRUE(u.ok());
  EXPECT_TRUE(u->gpus.empty());
  EXPECT_EQ(u->gpu_error, "fake: GPU 1 fell off the bus");
}

TEST_F(UsageTest, UnreadableStatFails) {
  SamplerConfig config;
  config.proc_root = Proc();
  config.cpu_ids = {7};  // no cpu7 line
  UtilizationSampler sampler(config, nullptr);
  Result<Utilization> u = sampler.SampleUtilization();
  ASSERT_FALSE(u.ok());
  EXPECT_EQ(u.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(u.status().message(), HasSubstr("/stat"));
}

TEST(UsageRealTest, RealProcGivesSaneFigures) {
  UtilizationSampler sampler(SamplerConfig{}, nullptr);
  Result<Utilization> u = sampler.SampleUtilization();
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_GE(u->cpu_percent, 0.0);
  EXPECT_LE(u->cpu_percent, 100.0);
  EXPECT_GT(u->memory_used_bytes, 0u);
}

}  // namespace
}  // namespace drover::worker
