// Tests for gpu.h (manual flags, names) and gpu_detect.h (the NVML ->
// nvidia-smi -> none chain), using the fake NVML library and a fake
// nvidia-smi script.
#include "worker/resources/gpu.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "common/quantity.h"
#include "worker/resources/gpu_detect.h"
#include "worker/resources/resources_test_util.h"

namespace drover::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;


TEST(ManualGpusTest, IndicesTypeAndMemory) {
  Result<std::vector<GpuInfo>> gpus = ParseManualGpus("0,1", "A100", "80GiB");
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  EXPECT_THAT(*gpus,
              ElementsAre(GpuInfo{0, "", "A100", 80 * kGiB}, GpuInfo{1, "", "A100", 80 * kGiB}));

  gpus = ParseManualGpus("2-3", "", "");
  ASSERT_TRUE(gpus.ok());
  EXPECT_THAT(*gpus, ElementsAre(GpuInfo{2, "", "GPU", 0}, GpuInfo{3, "", "GPU", 0}));
}

TEST(ManualGpusTest, NoneAndUnset) {
  EXPECT_TRUE(ParseManualGpus("none", "", "")->empty());
  EXPECT_TRUE(ParseManualGpus("", "", "")->empty());
}

TEST(ManualGpusTest, Errors) {
  Result<std::vector<GpuInfo>> gpus = ParseManualGpus("0,x", "A100", "80GiB");
  EXPECT_EQ(gpus.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(gpus.status().message(), HasSubstr("--gpus \"0,x\""));

  gpus = ParseManualGpus("0", "A100", "80G");
  EXPECT_EQ(gpus.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(gpus.status().message(), HasSubstr("--gpu-mem"));
  EXPECT_THAT(gpus.status().message(), HasSubstr("80G"));

  gpus = ParseManualGpus("", "A100", "");
  EXPECT_EQ(gpus.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(gpus.status().message(), HasSubstr("need --gpus"));
}

TEST(ShortGpuNameTest, KeepsTheModel) {
  EXPECT_EQ(ShortGpuName("NVIDIA A100-SXM4-80GB"), "A100");
  EXPECT_EQ(ShortGpuName("NVIDIA GeForce RTX 4090"), "GeForce RTX 4090");
  EXPECT_EQ(ShortGpuName("Tesla T4"), "T4");
  EXPECT_EQ(ShortGpuName("A100"), "A100");
}

// Each test gets a fake nvidia-smi that leaves a mark when it runs.
class DetectGpusTest : public ::testing::Test {
 protected:
  DetectGpusTest() {
    options_.nvml_library = FAKE_NVML_GOOD;
    options_.nvidia_smi = dir_.path() + "/nvidia-smi";
    options_.nvidia_smi_timeout = Seconds(10);
  }

  void InstallSmi(const std::string& body) {
    dir_.Write("nvidia-smi", "#!/bin/sh\ntouch " + Mark() + "\n" + body, /*executable=*/true);
  }
  std::string Mark() const { return dir_.path() + "/smi-ran"; }
  bool SmiRan() const { return std::filesystem::exists(Mark()); }

  testing::TempDir dir_;
  GpuDetectOptions options_;
};

TEST_F(DetectGpusTest, NvmlFirst) {
  testing::ScopedEnv devices("FAKE_NVML_DEVICES", "2");
  InstallSmi("exit 1\n");
  Result<GpuDetection> found = DetectGpus(options_);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->source, "nvml");
  EXPECT_EQ(found->gpus.size(), 2u);
  EXPECT_TRUE(found->notes.empty());
  ASSERT_NE(found->sampler, nullptr);
  EXPECT_EQ(found->sampler->Sample()->size(), 2u);
  EXPECT_FALSE(SmiRan());
}

TEST_F(DetectGpusTest, NvmlWithNoDeviceIsZeroGpusWithoutFallback) {
  testing::ScopedEnv devices("FAKE_NVML_DEVICES", "0");
  InstallSmi("exit 1\n");
  Result<GpuDetection> found = DetectGpus(options_);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->source, "none");
  EXPECT_TRUE(found->gpus.empty());
  EXPECT_EQ(found->sampler, nullptr);
  EXPECT_FALSE(SmiRan());
}

TEST_F(DetectGpusTest, BrokenNvmlFallsBackToNvidiaSmiAndKeepsTheReason) {
  testing::ScopedEnv devices("FAKE_NVML_DEVICES", "fail-init");
  InstallSmi("echo '0, GPU-abc, NVIDIA H100 80GB HBM3, 81559, 12, 300'\n");
  Result<GpuDetection> found = DetectGpus(options_);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->source, "nvidia-smi");
  EXPECT_THAT(found->gpus,
              ElementsAre(GpuInfo{0, "GPU-abc", "NVIDIA H100 80GB HBM3", 81559ULL << 20}));
  EXPECT_THAT(found->notes, ElementsAre("NVML: nvmlInit_v2 failed: Driver Not Loaded (9)"));
  ASSERT_NE(found->sampler, nullptr);
  EXPECT_EQ(found->sampler->name(), "nvidia-smi");
}

TEST_F(DetectGpusTest, MissingSymbolFallsBackToo) {
  options_.nvml_library = FAKE_NVML_NOSYM;
  InstallSmi("echo '0, GPU-abc, Tesla T4, 15360, 0, 0'\n");
  Result<GpuDetection> found = DetectGpus(options_);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->source, "nvidia-smi");
  ASSERT_EQ(found->notes.size(), 1u);
  EXPECT_THAT(found->notes[0], HasSubstr("nvmlDeviceGetUtilizationRates"));
}

TEST_F(DetectGpusTest, NothingInstalledIsZeroGpus) {
  options_.nvml_library = dir_.path() + "/libnvidia-ml.so.1";
  Result<GpuDetection> found = DetectGpus(options_);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->source, "none");
  EXPECT_TRUE(found->gpus.empty());
  ASSERT_EQ(found->notes.size(), 2u);
  EXPECT_THAT(found->notes[0], HasSubstr("NVML: cannot load"));
  EXPECT_THAT(found->notes[1], HasSubstr("nvidia-smi: "));
  EXPECT_THAT(found->notes[1], HasSubstr("not found"));
}

TEST_F(DetectGpusTest, NvidiaSmiWithoutDriverIsZeroGpus) {
  options_.nvml_library = dir_.path() + "/libnvidia-ml.so.1";
  InstallSmi("echo 'No devices were found'\nexit 6\n");
  Result<GpuDetection> found = DetectGpus(options_);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->source, "none");
  EXPECT_THAT(found->notes[1], HasSubstr("No devices were found"));
}

TEST_F(DetectGpusTest, GarbageFromNvidiaSmiIsAnError) {
  options_.nvml_library = dir_.path() + "/libnvidia-ml.so.1";
  InstallSmi("echo 'Failed to initialize NVML: Unknown Error'\n");
  Result<GpuDetection> found = DetectGpus(options_);
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(found.status().message(), HasSubstr("\"Failed to initialize NVML: Unknown Error\""));
  EXPECT_THAT(found.status().message(), HasSubstr("--gpus"));
}

}  // namespace
}  // namespace drover::worker
