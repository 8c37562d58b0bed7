#include "worker/resources/nvml.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "common/quantity.h"
#include "worker/resources/resources_host.h"
#include "worker/resources/resources_test_util.h"

extern char** environ;

namespace drover::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;


GpuInfo FakeGpu(int i) {
  return GpuInfo{i, "GPU-fake-000" + std::to_string(i), "NVIDIA A100-SXM4-80GB", 80 * kGiB};
}

TEST(NvmlTest, ZeroDevices) {
  testing::ScopedEnv devices("FAKE_NVML_DEVICES", "0");
  Result<std::unique_ptr<NvmlGpuSource>> nvml = NvmlGpuSource::Open(FAKE_NVML_GOOD);
  ASSERT_TRUE(nvml.ok()) << nvml.status().ToString();
  Result<std::vector<GpuInfo>> gpus = (*nvml)->List();
  ASSERT_TRUE(gpus.ok());
  EXPECT_TRUE(gpus->empty());
  Result<std::vector<GpuSample>> samples = (*nvml)->Sample();
  ASSERT_TRUE(samples.ok());
  EXPECT_TRUE(samples->empty());
}

TEST(NvmlTest, TwoDevicesListedAndSampled) {
  testing::ScopedEnv devices("FAKE_NVML_DEVICES", "2");
  Result<std::unique_ptr<NvmlGpuSource>> nvml = NvmlGpuSource::Open(FAKE_NVML_GOOD);
  ASSERT_TRUE(nvml.ok()) << nvml.status().ToString();
  EXPECT_EQ((*nvml)->name(), "nvml");
  Result<std::vector<GpuInfo>> gpus = (*nvml)->List();
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  EXPECT_THAT(*gpus, ElementsAre(FakeGpu(0), FakeGpu(1)));
  Result<std::vector<GpuSample>> samples = (*nvml)->Sample();
  ASSERT_TRUE(samples.ok()) << samples.status().ToString();
  EXPECT_THAT(*samples, ElementsAre(GpuSample{0, 5, 0}, GpuSample{1, 15, kGiB}));
}

TEST(NvmlTest, RepeatedSamplesSeeLiveValues) {
  testing::ScopedEnv devices("FAKE_NVML_DEVICES", "4");
  Result<std::unique_ptr<NvmlGpuSource>> nvml = NvmlGpuSource::Open(FAKE_NVML_GOOD);
  ASSERT_TRUE(nvml.ok()) << nvml.status().ToString();
  for (int util : {0, 42, 100}) {
    testing::ScopedEnv set_util("FAKE_NVML_UTIL", std::to_string(util));
    Result<std::vector<GpuSample>> samples = (*nvml)->Sample();
    ASSERT_TRUE(samples.ok());
    ASSERT_EQ(samples->size(), 4u);
    for (const GpuSample& s : *samples) EXPECT_EQ(s.utilization_percent, util);
  }
}

TEST(NvmlTest, FailingInitCarriesNvmlsReason) {
  testing::ScopedEnv devices("FAKE_NVML_DEVICES", "fail-init");
  Result<std::unique_ptr<NvmlGpuSource>> nvml = NvmlGpuSource::Open(FAKE_NVML_GOOD);
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(nvml.status().message(), "nvmlInit_v2 failed: Driver Not Loaded (9)");
}

TEST(NvmlTest, MissingSymbolIsNamed) {
  Result<std::unique_ptr<NvmlGpuSource>> nvml = NvmlGpuSource::Open(FAKE_NVML_NOSYM);
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(nvml.status().message(), HasSubstr("lacks the symbol nvmlDeviceGetUtilizationRates"));
}

TEST(NvmlTest, MissingLibraryIsNotFound) {
  Result<std::unique_ptr<NvmlGpuSource>> nvml =
      NvmlGpuSource::Open("/nonexistent/drover/libnvidia-ml.so.1");
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(nvml.status().message(), HasSubstr("/nonexistent/drover/libnvidia-ml.so.1"));
}

// Run in a child process by the next test: the loader reads LD_LIBRARY_PATH
// only at start, so the default library name can only be steered there.
TEST(NvmlTest, DISABLED_DefaultNameFoundOnLdLibraryPath) {
  Result<std::unique_ptr<NvmlGpuSource>> nvml = NvmlGpuSource::Open();
  ASSERT_TRUE(nvml.ok()) << nvml.status().ToString();
  Result<std::vector<GpuInfo>> gpus = (*nvml)->List();
  ASSERT_TRUE(gpus.ok());
  EXPECT_THAT(*gpus, ElementsAre(FakeGpu(0), FakeGpu(1), FakeGpu(2)));
}

TEST(NvmlTest, DefaultNameResolvesThroughLdLibraryPath) {
  testing::TempDir dir;
  std::string log = dir.path() + "/child.log";
  std::string lib_dir = std::filesystem::path(FAKE_NVML_GOOD).parent_path().string();
  testing::ScopedEnv ld("LD_LIBRARY_PATH", lib_dir);
  testing::ScopedEnv devices("FAKE_NVML_DEVICES", "3");

  std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::string filter = "--gtest_filter=NvmlTest.DISABLED_DefaultNameFoundOnLdLibraryPath";
  std::string disabled = "--gtest_also_run_disabled_tests";
  char* argv[] = {self.data(), filter.data(), disabled.data(), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, self.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  ASSERT_EQ(rc, 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  Result<std::string> output = ReadSmallFile(log);
  ASSERT_TRUE(output.ok());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << *output;
  EXPECT_THAT(*output, HasSubstr("[  PASSED  ] 1 test."));
}

// Health: each fake hook makes exactly its GPU sick with its words; a
// critical Xid is delivered once and keeps its GPU sick; the others are
// well; a second source in the process (NVML counts its users) works too.
TEST(NvmlTest, HealthNamesEachSickGpuAndWhy) {
  const std::string dir = ::testing::TempDir() + "/nvml-health-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  testing::ScopedEnv devices("FAKE_NVML_DEVICES", "6");
  testing::ScopedEnv health("FAKE_NVML_HEALTH_DIR", dir);
  Result<std::unique_ptr<NvmlGpuSource>> nvml = NvmlGpuSource::Open(FAKE_NVML_GOOD);
  ASSERT_TRUE(nvml.ok()) << nvml.status().ToString();
  Result<std::unique_ptr<NvmlGpuSource>> second = NvmlGpuSource::Open(FAKE_NVML_GOOD);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  second->reset();  // its shutdown leaves the first one's NVML up
  EXPECT_TRUE((*nvml)->Health().empty());
  auto put = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + "/" + name) << text;
  };
  put("1.ecc", "3");
  put("2.pending", "");
  put("3.remap-failed", "");
  put("4.lost", "");
  put("5.xid", "79");
  std::map<int, std::string> sick = (*nvml)->Health();
  EXPECT_EQ(sick, (std::map<int, std::string>{{1, "3 uncorrectable ECC errors"},
                                              {2, "retired pages pending (the GPU needs a reset)"},
                                              {3, "a row remapping failed"},
                                              {4, "fallen off the bus (GPU is lost)"},
                                              {5, "Xid 79 (critical)"}}));
  EXPECT_FALSE(std::filesystem::exists(dir + "/5.xid"));  // delivered
  for (const char* f : {"1.ecc", "2.pending", "3.remap-failed", "4.lost"}) {
    std::filesystem::remove(dir + "/" + f);
  }
  EXPECT_EQ((*nvml)->Health(), (std::map<int, std::string>{{5, "Xid 79 (critical)"}}));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace drover::worker
