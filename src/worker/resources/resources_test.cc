#include "worker/resources/resources.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "common/quantity.h"
#include "worker/resources/resources_host.h"
#include "worker/resources/resources_test_util.h"

namespace drover::worker {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Optional;
using ::testing::Pair;


TEST(FormatSummaryTest, CoresMemoryAndGpuGroups) {
  WorkerResources r;
  for (int i = 0; i < 32; ++i) r.cpu_ids.push_back(i);
  r.memory_bytes = static_cast<uint64_t>(251.4 * static_cast<double>(kGiB));
  for (int i = 0; i < 4; ++i) {
    r.gpus.push_back(GpuInfo{i, "GPU-" + std::to_string(i), "NVIDIA A100-SXM4-80GB", 80 * kGiB});
  }
  EXPECT_EQ(FormatSummary(r), "32 cores, 251.4 GiB, 4x A100 80 GiB");

  r.gpus.push_back(GpuInfo{4, "GPU-4", "Tesla T4", 15 * kGiB});
  EXPECT_EQ(FormatSummary(r), "32 cores, 251.4 GiB, 4x A100 80 GiB + 1x T4 15 GiB");
}

TEST(FormatSummaryTest, QuotaAndNoGpu) {
  WorkerResources r;
  r.cpu_ids = {0};
  r.memory_bytes = 512 << 20;
  EXPECT_EQ(FormatSummary(r), "1 core, 512 MiB, no GPU");
  r.cpu_ids = {0, 1, 2, 3};
  r.cpu_quota_milli = 2500;
  EXPECT_EQ(FormatSummary(r), "4 cores (quota 2.5), 512 MiB, no GPU");
}

// A fake machine: cgroup v2 with an 8 GiB memory limit and a 1.5-cpu quota,
// 16 GiB of RAM, and the fake NVML with four GPUs.
class DetectResourcesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    affinity_ = ReadAffinity().value();
    dir_.Write("proc/meminfo", "MemTotal: 16777216 kB\nMemAvailable: 8388608 kB\n");
    dir_.Write("proc/self/cgroup", "0::/drover/worker\n");
    dir_.Write("proc/stat", "cpu  1 0 0 1 0 0 0 0 0 0\n" + PerCoreStat(0, 100));
    dir_.Write("sys/fs/cgroup/cgroup.controllers", "cpu memory pids\n");
    dir_.Write("sys/fs/cgroup/drover/worker/memory.max", std::to_string(8 * kGiB) + "\n");
    dir_.Write("sys/fs/cgroup/drover/worker/memory.current", std::to_string(kGiB) + "\n");
    dir_.Write("sys/fs/cgroup/drover/worker/cpu.max", "150000 100000\n");
    options_.proc_root = dir_.path() + "/proc";
    options_.sys_root = dir_.path() + "/sys";
    options_.hostname = "gpu-box-7";
    options_.nvml_library = FAKE_NVML_GOOD;
    options_.nvidia_smi = "";
  }

  // One "cpuN" line per core this process may use, each with these ticks.
  std::string PerCoreStat(int busy, int idle) const {
    std::string out;
    for (int id : affinity_) {
      out += "cpu" + std::to_string(id) + " " + std::to_string(busy) + " 0 0 " +
             std::to_string(idle) + " 0 0 0 0 0 0\n";
    }
    return out;
  }

  testing::TempDir dir_;
  DetectOptions options_;
  std::vector<int> affinity_;
};

// drover up's local workers: each keeps its own contiguous share of the
// detected GPUs, and together they offer each GPU exactly once.
TEST_F(DetectResourcesTest, GpuPartsShareTheDetectedGpusWithoutOverlap) {
  testing::ScopedEnv devices("FAKE_NVML_DEVICES", "5");
  std::vector<int> seen;
  std::vector<size_t> sizes;
  options_.gpu_parts = 3;
  for (int part = 0; part < 3; ++part) {
    options_.gpu_part = part;
    Result<WorkerResources> r = DetectResources(options_);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    sizes.push_back(r->gpus.size());
    for (const GpuInfo& gpu : r->gpus) seen.push_back(gpu.index);
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{2, 2, 1}));
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2, 3, 4}));

  // More parts than GPUs: the last parts offer none.
  testing::ScopedEnv one("FAKE_NVML_DEVICES", "1");
  options_.gpu_parts = 2;
  options_.gpu_part = 1;
  Result<WorkerResources> r = DetectResources(options_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->gpus.empty());

  options_.gpu_part = 2;
  EXPECT_EQ(DetectResources(options_).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(DetectResourcesTest, EverythingFromTheFakeTree) {
  testing::ScopedEnv devices("FAKE_NVML_DEVICES", "4");
  options_.labels = {"zone=lab2"};
  options_.counters = {"licenses=2"};
  std::unique_ptr<UtilizationSampler> sampler;
  Result<WorkerResources> r = DetectResources(options_, &sampler);
  ASSERT_TRUE(r.ok()) << r.status().ToString();

  EXPECT_EQ(r->hostname, "gpu-box-7");
  EXPECT_EQ(r->cpu_ids, affinity_);
  int64_t cores_milli = static_cast<int64_t>(affinity_.size()) * 1000;
  EXPECT_EQ(r->cpu_milli, std::min<int64_t>(cores_milli, 1500));
  EXPECT_EQ(r->cpu_quota_milli.has_value(), cores_milli > 1500);
  EXPECT_EQ(r->host_memory_bytes, 16 * kGiB);
  EXPECT_EQ(r->memory_bytes, 8 * kGiB);
  EXPECT_THAT(r->memory_limit_bytes, Optional(8 * kGiB));
  EXPECT_EQ(r->gpu_source, "nvml");
  ASSERT_EQ(r->gpus.size(), 4u);
  EXPECT_EQ(r->gpus[3], (GpuInfo{3, "GPU-fake-0003", "NVIDIA A100-SXM4-80GB", 80 * kGiB}));
  EXPECT_THAT(r->labels, Contains(Pair("os", "linux")));
  EXPECT_THAT(r->labels, Contains(Pair("zone", "lab2")));
  EXPECT_EQ(r->labels.count("arch"), 1u);
  EXPECT_THAT(r->counters, Contains(Pair("licenses", 2)));
  EXPECT_THAT(r->notes, Contains(HasSubstr("cgroup memory limit 8 GiB (host has 16 GiB)")));

  std::string cores =
      std::to_string(affinity_.size()) + (affinity_.size() == 1 ? " core" : " cores");
  std::string quota = cores_milli > 1500 ? " (quota 1.5)" : "";
  EXPECT_EQ(FormatSummary(*r), cores + quota + ", 8 GiB, 4x A100 80 GiB");

  // The sampler reads the same tree: the cgroup's usage, the worker's
  // cores (each +60 busy and +40 idle ticks), and NVML.
  ASSERT_NE(sampler, nullptr);
  dir_.Write("proc/stat", "cpu  1 0 0 1 0 0 0 0 0 0\n" + PerCoreStat(60, 140));
  Result<Utilization> u = sampler->SampleUtilization();
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_DOUBLE_EQ(u->cpu_percent, 60.0);
  EXPECT_EQ(u->memory_used_bytes, kGiB);
  ASSERT_EQ(u->gpus.size(), 4u);
  EXPECT_EQ(u->gpus[2], (GpuSample{2, 25, 2 * kGiB}));
}

TEST_F(DetectResourcesTest, ManualGpusSkipDetection) {
  options_.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  options_.gpus = "0,1";
  options_.gpu_type = "A100";
  options_.gpu_mem = "80GiB";
  Result<WorkerResources> r = DetectResources(options_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->gpu_source, "manual");
  EXPECT_EQ(r->gpus.size(), 2u);
  EXPECT_THAT(FormatSummary(*r), HasSubstr(", 2x A100 80 GiB"));
  EXPECT_TRUE(r->notes.size() <= 2u);  // only cgroup notes; no GPU probing happened
  for (const std::string& note : r->notes) EXPECT_THAT(note, HasSubstr("cgroup"));
}

TEST_F(DetectResourcesTest, CpusFlagNarrowsTheCores) {
  options_.cpus = std::to_string(affinity_.back());
  Result<WorkerResources> r = DetectResources(options_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->cpu_ids, std::vector<int>{affinity_.back()});
  EXPECT_EQ(r->cpu_milli, 1000);
  EXPECT_EQ(r->cpu_quota_milli, std::nullopt);  // 1.5 cpus is more than 1 core

  options_.cpus = "4095";
  r = DetectResources(options_);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("core 4095 is not in this process's affinity mask"));
}

TEST_F(DetectResourcesTest, BadFlagValuesFailFirst) {
  options_.labels = {"zone"};
  EXPECT_EQ(DetectResources(options_).status().code(), StatusCode::kInvalidArgument);
  options_.labels = {};
  options_.counters = {"licenses=many"};
  EXPECT_THAT(DetectResources(options_).status().message(), HasSubstr("licenses=many"));
  options_.counters = {};
  options_.gpus = "0";
  options_.gpu_mem = "80G";
  EXPECT_THAT(DetectResources(options_).status().message(), HasSubstr("--gpu-mem"));
  options_.gpus = "";
  options_.gpu_mem = "";
  options_.cpus = "0-";
  EXPECT_THAT(DetectResources(options_).status().message(), HasSubstr("--cpus"));
}

TEST_F(DetectResourcesTest, UnreadableMeminfoNamesTheFile) {
  dir_.Write("proc/meminfo", "garbage\n");
  Result<WorkerResources> r = DetectResources(options_);
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(), HasSubstr("proc/meminfo"));
}

// This machine, as it is. Whatever GPUs it has, detection must succeed and
// agree with what the kernel says directly.
TEST(DetectResourcesRealTest, ThisMachine) {
  std::unique_ptr<UtilizationSampler> sampler;
  Result<WorkerResources> r = DetectResources(DetectOptions{}, &sampler);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->cpu_ids, ReadAffinity().value());
  EXPECT_GT(r->cpu_milli, 0);
  uint64_t ram = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                 static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  EXPECT_EQ(r->host_memory_bytes, ram);
  EXPECT_LE(r->memory_bytes, ram);
  EXPECT_GT(r->memory_bytes, 0u);
  EXPECT_EQ(r->hostname, ReadHostname());
  EXPECT_EQ(r->gpus.empty(), r->gpu_source == "none");
  std::cout << "summary: " << FormatSummary(*r) << "\n";
  for (const std::string& note : r->notes) std::cout << "note: " << note << "\n";

  ASSERT_NE(sampler, nullptr);
  Result<Utilization> u = sampler->SampleUtilization();
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_GT(u->memory_used_bytes, 0u);
  EXPECT_EQ(u->gpu_error, "");
  EXPECT_EQ(u->gpus.size(), r->gpus.size());
}

}  // namespace
}  // namespace drover::worker
