// The worker's health checks on their own: the work directory's file
// system (read-only, below the floor), the program's verdict (its first
// line, its exit, its timeout), and the monitor's reports on a loop.
#include "worker/agent/health_monitor.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace drover::worker {
namespace {

class ScratchDir {
 public:
  ScratchDir() {
    char tmpl[] = "/tmp/drover-health-test-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(DiskTroubleTest, AReadOnlyFileSystemAndOneBelowTheFloorAreUnhealthy) {
  ScratchDir dir;
  EXPECT_EQ(DiskTrouble(dir.path(), 1), "");
  const std::string trouble = DiskTrouble(dir.path(), 1ull << 50);
  EXPECT_EQ(trouble.rfind("the work directory's file system has ", 0), 0u) << trouble;
  EXPECT_TRUE(trouble.ends_with(" free, below 1024 TiB (" + dir.path() + ")")) << trouble;

  if (geteuid() != 0) GTEST_SKIP() << "needs root to mount a read-only file system";
  const std::string ro = dir.path() + "/ro";
  ASSERT_EQ(mkdir(ro.c_str(), 0755), 0);
  if (mount("tmpfs", ro.c_str(), "tmpfs", MS_RDONLY, "size=1m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here: " << strerror(errno);
  }
  const std::string read_only = DiskTrouble(ro, 0);
  umount2(ro.c_str(), MNT_DETACH);
  EXPECT_EQ(read_only, "the work directory's file system is read-only (" + ro + ")");
}

TEST(ProgramTroubleTest, ItsFirstLineItsExitOrItsTimeoutIsTheReason) {
  EXPECT_EQ(ProgramTrouble("true", Seconds(30)), "");
  EXPECT_EQ(ProgramTrouble("echo; echo ' /scratch not mounted '; echo more; exit 3", Seconds(30)),
            "/scratch not mounted");
  EXPECT_EQ(ProgramTrouble("echo gpu 1 fell off the bus >&2; exit 1", Seconds(30)),
            "gpu 1 fell off the bus");
  EXPECT_EQ(ProgramTrouble("exit 4", Seconds(30)), "the health check exited with code 4 (exit 4)");
  // A huge line is cut; bytes that are not UTF-8 pass (the wire replaces them).
  const std::string cut = ProgramTrouble("head -c 100000 /dev/zero | tr '\\0' x; exit 1", Seconds(30));
  EXPECT_EQ(cut, std::string(kMaxReasonBytes, 'x') + "...");
  EXPECT_EQ(ProgramTrouble("printf 'bad \\377\\376 bytes'; exit 1", Seconds(30)), "bad \xff\xfe bytes");
  EXPECT_EQ(ProgramTrouble("sleep 100", Millis(200)),
            "the health check did not finish within 200ms (sleep 100)");
}

TEST(HealthMonitorTest, ReportsEachRoundOnTheLoopAndStopsWithIt) {
  ScratchDir dir;
  const std::string flag = dir.path() + "/sick";
  net::EventLoop loop;
  std::vector<std::string> reports;
  HealthOptions options;
  options.program = "test ! -e " + flag + " || { echo sick; exit 1; }";
  options.interval = Millis(20);
  options.workdir = dir.path();
  options.min_free_bytes = 1;
  {
    HealthMonitor monitor(options, loop, [&](HealthVerdict verdict) {
      reports.push_back(verdict.unhealthy);
      EXPECT_TRUE(verdict.sick_gpus.empty());  // no GPU checks asked for
      if (reports.size() == 2) {
        std::ofstream(flag) << "1";
      }
      if (!verdict.unhealthy.empty()) loop.Stop();
    });
    loop.Run();
  }
  ASSERT_GE(reports.size(), 3u);
  EXPECT_EQ(reports.front(), "");
  EXPECT_EQ(reports.back(), "sick");
}

}  // namespace
}  // namespace drover::worker
