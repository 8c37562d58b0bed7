#include "worker/desktop/outside_load.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "worker/resources/resources_test_util.h"

namespace drover::worker {
namespace {

using ::testing::HasSubstr;

// /proc/stat of a 2-cpu machine: user nice system idle iowait irq softirq
// steal guest guest_nice, busy time split between user and system.
std::string Stat(uint64_t busy0, uint64_t idle0, uint64_t busy1, uint64_t idle1) {
  auto line = [](const std::string& name, uint64_t busy, uint64_t idle) {
    return name + " " + std::to_string(busy - busy / 4) + " 0 " + std::to_string(busy / 4) + " " +
           std::to_string(idle) + " 0 0 0 0 0 0\n";
  };
  return line("cpu ", busy0 + busy1, idle0 + idle1) + line("cpu0", busy0, idle0) +
         line("cpu1", busy1, idle1) + "intr 12345\nctxt 999\nbtime 1700000000\n";
}

class OutsideLoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The figures below are in jiffies of 1/100 s.
    ASSERT_EQ(::sysconf(_SC_CLK_TCK), 100);
    dir_.Write("proc/stat", Stat(100, 900, 500, 500));
  }
  std::string Proc() const { return dir_.path() + "/proc"; }

  testing::TempDir dir_;
};

TEST_F(OutsideLoadTest, BusyCoresLessDroversShare) {
  OutsideLoad load(Proc());
  // 1 s on 2 cpus (200 jiffies): 120 busy = 1.2 cores, 0.5 s of it Drover's.
  dir_.Write("proc/stat", Stat(180, 940, 540, 540));
  Result<double> cores = load.Sample(Millis(500));
  ASSERT_TRUE(cores.ok()) << cores.status().ToString();
  EXPECT_DOUBLE_EQ(*cores, 0.7);

  // From the previous sample on: 2 s, 100 busy jiffies, none Drover's.
  dir_.Write("proc/stat", Stat(200, 1100, 620, 680));
  cores = load.Sample(Duration(0));
  ASSERT_TRUE(cores.ok());
  EXPECT_DOUBLE_EQ(*cores, 0.5);
}

TEST_F(OutsideLoadTest, NeverBelowZeroNorDividedByZero) {
  OutsideLoad load(Proc());
  // Drover's counters run a little ahead of /proc/stat's.
  dir_.Write("proc/stat", Stat(150, 950, 550, 550));
  Result<double> cores = load.Sample(Millis(1200));
  ASSERT_TRUE(cores.ok());
  EXPECT_DOUBLE_EQ(*cores, 0.0);
  // No time passed.
  cores = load.Sample(Duration(0));
  ASSERT_TRUE(cores.ok());
  EXPECT_DOUBLE_EQ(*cores, 0.0);
  // A cpu went offline: counters went back; the next interval starts there.
  dir_.Write("proc/stat", Stat(10, 10, 10, 10));
  cores = load.Sample(Duration(0));
  ASSERT_TRUE(cores.ok());
  EXPECT_DOUBLE_EQ(*cores, 0.0);
  dir_.Write("proc/stat", Stat(110, 10, 10, 110));
  cores = load.Sample(Duration(0));
  ASSERT_TRUE(cores.ok());
  EXPECT_DOUBLE_EQ(*cores, 1.0);
}

TEST_F(OutsideLoadTest, ErrorsNameTheFile) {
  OutsideLoad missing(dir_.path() + "/nowhere");
  Result<double> cores = missing.Sample(Duration(0));
  ASSERT_FALSE(cores.ok());
  EXPECT_EQ(cores.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(cores.status().message(), HasSubstr(dir_.path() + "/nowhere/stat"));

  OutsideLoad load(Proc());
  dir_.Write("proc/stat", "cpu  12 x 3\ncpu0 12 0 3 4 0 0 0 0\n");
  cores = load.Sample(Duration(0));
  ASSERT_FALSE(cores.ok());
  EXPECT_EQ(cores.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(cores.status().message(), HasSubstr(Proc() + "/stat: malformed line \"cpu  12 x"));

  dir_.Write("proc/stat", "intr 1\n");
  cores = load.Sample(Duration(0));
  ASSERT_FALSE(cores.ok());
  EXPECT_EQ(cores.status().code(), StatusCode::kDataLoss);
}

TEST(CgroupCpuTimeTest, SumsV1AndV2CountersAndSkipsTheRest) {
  testing::TempDir dir;
  dir.Write("v1/cpuacct.usage", "1500000999\n");                      // ns
  dir.Write("v2/cpu.stat", "usage_usec 250000\nuser_usec 200000\n");  // µs
  dir.Write("v2-other/cpu.stat", "user_usec 1\nusage_usec 40\n");
  dir.MakeDir("empty");
  dir.Write("garbage/cpuacct.usage", "lots\n");
  const std::string root = dir.path() + "/";
  EXPECT_EQ(CgroupCpuTime({root + "v1", root + "v2", root + "v2-other", root + "empty",
                           root + "absent", root + "garbage"}),
            Micros(1500000 + 250000 + 40));
  EXPECT_EQ(CgroupCpuTime({}), Duration(0));
  // cgroup v1's cpu and cpuacct: two names for one hierarchy.
  ASSERT_EQ(::symlink((root + "v1").c_str(), (root + "cpuacct").c_str()), 0);
  EXPECT_EQ(CgroupCpuTime({root + "v1", root + "cpuacct"}), Micros(1500000));
}

}  // namespace
}  // namespace drover::worker
