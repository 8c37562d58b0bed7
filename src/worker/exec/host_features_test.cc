// A task's private network (`network = "none"`) for real, where this
// process may create network namespaces, and the block device that disk
// I/O limits name.
#include "worker/exec/host_features.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "common/unique_fd.h"
#include "worker/exec/exec_test_util.h"
#include "worker/exec/executor.h"

namespace drover::worker {
namespace {

using testing::Describe;
using testing::Harness;
using testing::Task;

TEST(BlockDeviceOfTest, NamesTheWholeDiskOfARealFileSystemAndRefusesVirtualOnes) {
  Result<std::string> root = BlockDeviceOf("/");
  if (root.ok()) {
    // "major:minor" of a whole disk: sysfs has it, and it is no partition.
    ASSERT_NE(root->find(':'), std::string::npos) << *root;
    EXPECT_EQ(access(("/sys/dev/block/" + *root).c_str(), F_OK), 0) << *root;
    EXPECT_NE(access(("/sys/dev/block/" + *root + "/partition").c_str(), F_OK), 0) << *root;
  }
  Result<std::string> proc = BlockDeviceOf("/proc");
  ASSERT_FALSE(proc.ok());
  EXPECT_NE(proc.status().message().find("/proc is on device 0:"), std::string::npos)
      << proc.status().ToString();
  EXPECT_NE(proc.status().message().find("no block device"), std::string::npos);
  EXPECT_FALSE(BlockDeviceOf("/no/such/dir").ok());
}

// A listener on 127.0.0.1 in this process's network, and what a task's
// probe reports about reaching it and its own loopback.
class PrivateNetworkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CanMakePrivateNetwork()) GTEST_SKIP() << "may not create network namespaces (not root)";
    listener_.Reset(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(listener_.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_EQ(listen(listener_.fd(), 8), 0);
    socklen_t len = sizeof addr;
    ASSERT_EQ(getsockname(listener_.fd(), reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port_ = ntohs(addr.sin_port);
  }

  // "worker=reached|refused own=reached|refused".
  TaskSpec Probe(uint32_t index) const {
    const std::string script =
        "import os, socket\n"
        "def reach(port):\n"
        "    try:\n"
        "        socket.create_connection(('127.0.0.1', port), timeout=10).close()\n"
        "        return 'reached'\n"
        "    except OSError:\n"
        "        return 'refused'\n"
        "own = socket.socket()\n"
        "own.bind(('127.0.0.1', 0))\n"
        "own.listen(1)\n"
        "text = 'worker=%s own=%s' % (reach(" +
        std::to_string(port_) +
        "), reach(own.getsockname()[1]))\n"
        "open(os.environ['DROVER_RESULT'], 'w').write(text)\n";
    return Task(index, {"python3", "-c", script});
  }

  UniqueFd listener_;
  uint16_t port_ = 0;
};

TEST_F(PrivateNetworkTest, ATaskWithItsOwnNetworkReachesOnlyItsOwnLoopback) {
  Harness h(MakeNoIsolator());
  TaskSpec own = Probe(1);
  own.private_network = true;
  TaskResult r = h.Run(own);
  ASSERT_EQ(r.outcome, TaskOutcome::kSucceeded) << Describe(r);
  EXPECT_EQ(r.result_text, "worker=refused own=reached");

  r = h.Run(Probe(2));  // the worker's network, as by default
  ASSERT_EQ(r.outcome, TaskOutcome::kSucceeded) << Describe(r);
  EXPECT_EQ(r.result_text, "worker=reached own=reached");
}

// The process made ahead of a prepared start enters its namespace in its
// setup, before the start; one made for the worker's network is not used
// for a task that wants its own.
TEST_F(PrivateNetworkTest, AProcessMadeAheadGetsItsNetworkBeforeItsStart) {
  if (!ParkSupported()) GTEST_SKIP() << "no parked starts on this architecture";
  Harness h(MakeNoIsolator());
  TaskSpec own = Probe(3);
  own.private_network = true;
  ASSERT_TRUE(h.executor().PrepareStart(own).ok());
  ASSERT_TRUE(testing::WaitParked(h.executor(), own.id));
  TaskResult r = h.Run(own);
  ASSERT_EQ(r.outcome, TaskOutcome::kSucceeded) << Describe(r);
  EXPECT_EQ(r.result_text, "worker=refused own=reached");

  TaskSpec host = Probe(4);
  ASSERT_TRUE(h.executor().PrepareStart(host).ok());
  ASSERT_TRUE(testing::WaitParked(h.executor(), host.id));
  host.private_network = true;  // asked for at the start only
  r = h.Run(host);
  ASSERT_EQ(r.outcome, TaskOutcome::kSucceeded) << Describe(r);
  EXPECT_EQ(r.result_text, "worker=refused own=reached");
}

TEST(DiskIoLimitsTest, WithoutCgroupsATaskWithLimitsDoesNotStartAndSaysWhy) {
  Harness h(MakeNoIsolator());
  TaskSpec spec = Task(1, {"true"});
  spec.io.write_bps = 10 << 20;
  Result<pid_t> started = h.Start(spec);
  ASSERT_FALSE(started.ok());
  // Either reason names the missing part: the work directory's disk, or
  // the cgroups.
  const std::string& message = started.status().message();
  EXPECT_TRUE(message.find("disk I/O limits") != std::string::npos) << message;
  spec.io = {};
  EXPECT_EQ(h.Run(spec).outcome, TaskOutcome::kSucceeded);
}

// A task whose directory holds more than its `disk` is killed at the next
// measurement and fails saying how much it held; one under it runs on.
TEST(DiskLimitTest, ATaskHoldingMoreThanItsDiskIsStoppedAndFailsSayingSo) {
  ExecutorOptions options;
  options.disk_check_every = Millis(50);
  Harness h(MakeNoIsolator(), options);
  TaskSpec over = Task(1, {"sh", "-c", "head -c 31457280 /dev/zero > big && exec sleep 60"});
  over.disk_bytes = 10 << 20;
  TaskResult r = h.Run(over);
  EXPECT_EQ(r.outcome, TaskOutcome::kFailed) << Describe(r);
  EXPECT_EQ(r.signal, SIGKILL) << Describe(r);
  EXPECT_TRUE(r.stopped_for_disk);
  // What it held when measured: over the limit, at most what it writes (the
  // measurement may come while it still writes).
  ASSERT_EQ(r.disk_error.rfind("disk: ", 0), 0u) << r.disk_error;
  const double held = std::stod(r.disk_error.substr(6));
  EXPECT_GT(held, 10.0) << r.disk_error;
  EXPECT_LE(held, 30.0) << r.disk_error;
  EXPECT_TRUE(r.disk_error.ends_with(" MiB written under its directory, more than disk 10 MiB"))
      << r.disk_error;

  TaskSpec under = Task(2, {"sh", "-c", "head -c 1048576 /dev/zero > small && sleep 0.3"});
  under.disk_bytes = 10 << 20;
  r = h.Run(under);
  EXPECT_EQ(r.outcome, TaskOutcome::kSucceeded) << Describe(r);
  EXPECT_EQ(r.disk_error, "");

  // Its inputs (fetched by the worker, not written by it) do not count.
  TaskSpec fed = Task(3, {"sh", "-c", "sleep 0.3"});
  fed.disk_bytes = 10 << 20;
  Result<TaskDirs> dirs = h.executor().PrepareDirs(fed.id, fed.attempt, true, "");
  ASSERT_TRUE(dirs.ok()) << dirs.status().ToString();
  testing::Put(dirs->inputs + "/big", std::string(30 << 20, 'i'));
  r = h.Run(fed);
  EXPECT_EQ(r.outcome, TaskOutcome::kSucceeded) << Describe(r) << " " << r.disk_error;
}

}  // namespace
}  // namespace drover::worker
