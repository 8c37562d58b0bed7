#include "worker/resources/nvidia_smi.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>

#include "common/quantity.h"
#include "worker/resources/resources_test_util.h"

namespace drover::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;


TEST(ParseNvidiaSmiCsvTest, ParsesRows) {
  Result<std::vector<NvidiaSmiRow>> rows = ParseNvidiaSmiCsv(
      "0, GPU-5f3c0000-aaaa, NVIDIA A100-SXM4-80GB, 81920, 37, 1024\n"
      "\n"
      "1, GPU-5f3c0000-bbbb, NVIDIA A100-SXM4-80GB, 81920, [N/A], [Not Supported]\n");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].info,
            (GpuInfo{0, "GPU-5f3c0000-aaaa", "NVIDIA A100-SXM4-80GB", 81920 * kMiB}));
  EXPECT_EQ((*rows)[0].sample, (GpuSample{0, 37, 1024 * kMiB}));
  EXPECT_EQ((*rows)[1].sample, (GpuSample{1, std::nullopt, std::nullopt}));
}

TEST(ParseNvidiaSmiCsvTest, EmptyOutputIsNoGpu) {
  Result<std::vector<NvidiaSmiRow>> rows = ParseNvidiaSmiCsv("");
  ASSERT_TRUE(rows.ok());
  EXPECT_TRUE(rows->empty());
}

TEST(ParseNvidiaSmiCsvTest, GarbageNamesTheLine) {
  struct Case {
    std::string text;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {"0, GPU-a, T4, 15360, 3, 10\nNo devices were found\n",
            "line 2 \"No devices were found\": 1 fields instead of 6"},
           {"x, GPU-a, T4, 15360, 3, 10", "line 1 \"x, GPU-a, T4, 15360, 3, 10\": bad index"},
           {"0, GPU-a, T4, 15 GiB, 3, 10", "bad memory.total"},
           {"0, GPU-a, T4, 15360, 300, 10", "bad utilization.gpu"},
           {"0, GPU-a, T4, 15360, 3, -1", "bad memory.used"},
           {"0, , T4, 15360, 3, 1", "no uuid"},
       }) {
    Result<std::vector<NvidiaSmiRow>> rows = ParseNvidiaSmiCsv(c.text);
    ASSERT_FALSE(rows.ok()) << c.text;
    EXPECT_EQ(rows.status().code(), StatusCode::kDataLoss);
    EXPECT_THAT(rows.status().message(), HasSubstr(c.says));
  }
}

// A fake nvidia-smi first on PATH. It checks its arguments, so the test
// also proves the query is passed as separate argv entries (no shell).
class NvidiaSmiRunTest : public ::testing::Test {
 protected:
  NvidiaSmiRunTest()
      : bin_(dir_.MakeDir("bin")),
        path_("PATH", bin_ + ":" + (getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin")) {}

  void Install(const std::string& body) {
    dir_.Write("bin/nvidia-smi",
               "#!/bin/sh\n"
               "[ \"$#\" = 2 ] && "
               "[ \"$1\" = \"--query-gpu=index,uuid,name,memory.total,utilization.gpu,"
               "memory.used\" ] && "
               "[ \"$2\" = \"--format=csv,noheader,nounits\" ] || "
               "{ echo \"unexpected arguments: $*\"; exit 64; }\n" +
                   body,
               /*executable=*/true);
  }

  testing::TempDir dir_;
  std::string bin_;
  testing::ScopedEnv path_;
};

TEST_F(NvidiaSmiRunTest, ListsAndSamplesThroughPath) {
  Install(
      "echo \"0, GPU-aaaa, NVIDIA T4, 15360, ${FAKE_UTIL:-0}, 100\"\n"
      "echo \"1, GPU-bbbb, NVIDIA T4, 15360, 1, 200\"\n");
  NvidiaSmiGpuSource source("nvidia-smi", Seconds(10));
  Result<std::vector<GpuInfo>> gpus = source.List();
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  EXPECT_THAT(*gpus, ElementsAre(GpuInfo{0, "GPU-aaaa", "NVIDIA T4", 15360 * kMiB},
                                 GpuInfo{1, "GPU-bbbb", "NVIDIA T4", 15360 * kMiB}));

  testing::ScopedEnv util("FAKE_UTIL", "64");
  Result<std::vector<GpuSample>> samples = source.Sample();
  ASSERT_TRUE(samples.ok()) << samples.status().ToString();
  EXPECT_THAT(*samples, ElementsAre(GpuSample{0, 64, 100 * kMiB}, GpuSample{1, 1, 200 * kMiB}));
}

TEST_F(NvidiaSmiRunTest, GarbageOutputIsAClearError) {
  Install("echo '0, GPU-aaaa, NVIDIA T4, 15360, 0, 100'\necho 'Segmentation fault'\n");
  NvidiaSmiGpuSource source("nvidia-smi", Seconds(10));
  Result<std::vector<GpuInfo>> gpus = source.List();
  ASSERT_FALSE(gpus.ok());
  EXPECT_EQ(gpus.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(gpus.status().message(), HasSubstr("line 2 \"Segmentation fault\""));
  // The heartbeat path reports the same thing as retryable.
  Result<std::vector<GpuSample>> samples = source.Sample();
  EXPECT_EQ(samples.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(samples.status().message(), HasSubstr("Segmentation fault"));
}

TEST_F(NvidiaSmiRunTest, NonZeroExitQuotesItsMessage) {
  Install(
      "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\"\n"
      "exit 9\n");
  Result<std::string> out = RunNvidiaSmi("nvidia-smi", Seconds(10));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(out.status().message(), HasSubstr("exited with code 9"));
  EXPECT_THAT(out.status().message(), HasSubstr("couldn't communicate with the NVIDIA driver"));
}

TEST_F(NvidiaSmiRunTest, StderrIsQuotedWhenStdoutIsEmpty) {
  Install("echo 'permission denied on /dev/nvidiactl' >&2\nexit 4\n");
  Result<std::string> out = RunNvidiaSmi("nvidia-smi", Seconds(10));
  EXPECT_THAT(out.status().message(), HasSubstr("permission denied on /dev/nvidiactl"));
}

TEST_F(NvidiaSmiRunTest, MissingProgramIsNotFound) {
  EXPECT_EQ(RunNvidiaSmi("nvidia-smi", Seconds(10)).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(RunNvidiaSmi(dir_.path() + "/nope/nvidia-smi", Seconds(10)).status().code(),
            StatusCode::kNotFound);
}

TEST_F(NvidiaSmiRunTest, NotExecutableIsFailedPrecondition) {
  dir_.Write("bin/nvidia-smi", "#!/bin/sh\n", /*executable=*/false);
  Result<std::string> out = RunNvidiaSmi(bin_ + "/nvidia-smi", Seconds(10));
  EXPECT_EQ(out.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(out.status().message(), HasSubstr("not executable"));
}

TEST_F(NvidiaSmiRunTest, HangIsKilledWithItsChildrenAtTheDeadline) {
  // The script starts a grandchild and records its pid, then hangs.
  std::string pid_file = dir_.path() + "/grandchild.pid";
  Install("sleep 600 &\necho $! > " + pid_file + "\nwait\n");
  Result<std::string> out = RunNvidiaSmi("nvidia-smi", Millis(1000));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kDeadlineExceeded);

  std::ifstream in(pid_file);
  pid_t grandchild = 0;
  ASSERT_TRUE(in >> grandchild) << "the fake did not start within the deadline";
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, grandchild, 0));
  if (pidfd < 0) {
    EXPECT_EQ(errno, ESRCH);  // already gone and reaped
    return;
  }
  pollfd fd = {pidfd, POLLIN, 0};
  EXPECT_EQ(poll(&fd, 1, 10000), 1) << "grandchild " << grandchild << " survived the kill";
  close(pidfd);
}

TEST_F(NvidiaSmiRunTest, RunawayOutputIsCut) {
  Install("exec yes '0, GPU-aaaa, NVIDIA T4, 15360, 0, 100'\n");
  Result<std::string> out = RunNvidiaSmi("nvidia-smi", Seconds(10));
  EXPECT_EQ(out.status().code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace drover::worker
