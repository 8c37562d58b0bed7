// Warm interpreters in the Executor (warm_interpreter.h, executor_warm.cc),
// with a small python3 program that speaks the worker's side of the
// protocol in place of the Python client's runner: reuse and its key, each
// call's own output, directory and exit code, the interpreter stopped
// between calls, the idle count (a reply sent early does not let the call run on), a
// reply that does not parse, a kill in the middle of a call, the idle
// timeout and the executor's end. The reply parser on hostile bytes, and
// the call message, over a socket pair.
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "worker/exec/cgroup_files.h"
#include "worker/exec/cgroup_v1.h"
#include "worker/exec/exec_test_util.h"
#include "worker/exec/host_features.h"
#include "worker/exec/warm_interpreter.h"

namespace drover::worker::testing {
namespace {

constexpr char kPython[] = "/usr/bin/python3";

// The interpreter: each call writes "pid PID cwd DIR task ID" to the
// call's stdout and replies with $CODE; MODE=hold keeps 32 MiB and writes
// its /proc/self/cgroup to the call's stderr; MODE=child leaves a child
// running; MODE=spin replies and then keeps a thread spinning, MODE=garbage replies nonsense,
// MODE=hang never replies.
constexpr char kServe[] = R"PY(
import os, socket, threading
sock = socket.socket(fileno=os.dup(0))
os.dup2(os.open(os.devnull, os.O_RDWR), 0)
while True:
    msg, fds, _, _ = socket.recv_fds(sock, 1 << 20, 2)
    if not msg:
        break
    parts = msg.split(b"\0")
    env = dict(kv.split(b"=", 1) for kv in parts[1:] if b"=" in kv)
    os.write(fds[0], b"pid %d cwd %s task %s" % (os.getpid(), parts[0], env[b"DROVER_TASK_ID"]))
    mode = env.get(b"MODE", b"")
    if mode == b"hold":
        held = [b"x" * (32 << 20)]
        with open("/proc/self/cgroup", "rb") as f:
            os.write(fds[1], f.read())
    for fd in fds:
        os.close(fd)
    if mode == b"hang":
        threading.Event().wait()
    if mode == b"garbage":
        sock.send(b"nonsense")
        continue
    if mode == b"child":
        import subprocess
        subprocess.Popen(["sleep", "60"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if mode == b"spin":
        threading.Thread(target=lambda: [None for _ in iter(int, 1)], daemon=True).start()
    sock.send(b"exit %d 1000 2048 0" % int(env.get(b"CODE", b"0")))
)PY";

TaskSpec Call(uint32_t index, std::vector<std::pair<std::string, std::string>> env = {}) {
  TaskSpec spec = Task(index, {kPython, "-c", kServe});
  spec.env = std::move(env);
  spec.env.emplace_back("DROVER_WARM", "1");
  return spec;
}

// "pid PID ..." of a call's stdout: the interpreter that ran it.
pid_t PidOf(const TaskResult& r) {
  const std::string out = ReadFile(r.dirs.stdout_path);
  return out.rfind("pid ", 0) == 0 ? std::atoi(out.c_str() + 4) : -1;
}

// The state letter of /proc/PID/stat ('T': stopped); '?' when gone.
char StateOf(pid_t pid) {
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() ? '?' : stat[close + 2];
}

// Waits (10 s at most) until SIGSTOP, which the kernel delivers a moment
// after it is sent, has stopped `pid` (a child of this process: the
// executor's spawn), then checks that every thread of it is stopped.
bool Stopped(pid_t pid) {
  const Deadline deadline(Seconds(10));
  siginfo_t info{};
  for (;;) {
    info.si_pid = 0;
    if (waitid(P_PID, pid, &info, WSTOPPED | WNOHANG | WNOWAIT) != 0) return false;
    if (info.si_pid == pid) break;
    if (deadline.Passed()) return false;
    sched_yield();
  }
  std::error_code ec;
  int threads = 0;
  for (const auto& t : std::filesystem::directory_iterator(
           "/proc/" + std::to_string(pid) + "/task", ec)) {
    const std::string stat = ReadFile(t.path().string() + "/stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos || stat.compare(close, 4, ") T ") != 0) return false;
    ++threads;
  }
  return !ec && threads > 0;
}

class ExecutorWarmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(kPython, X_OK) != 0) GTEST_SKIP() << "needs " << kPython;
  }
};

TEST_F(ExecutorWarmTest, SuccessiveCallsShareAnInterpreterEachWithItsOwnOutputAndDirectory) {
  Harness h(MakeNoIsolator());
  const TaskResult first = h.Run(Call(1));
  ASSERT_EQ(first.outcome, TaskOutcome::kSucceeded) << Describe(first);
  const pid_t pid = PidOf(first);
  ASSERT_GT(pid, 0) << ReadFile(first.dirs.stdout_path);
  EXPECT_EQ(ReadFile(first.dirs.stdout_path),
            "pid " + std::to_string(pid) + " cwd " + first.dirs.task + " task 7.1");
  EXPECT_EQ(first.cpu, Duration(1000));  // the interpreter's own figures without cgroups
  EXPECT_EQ(first.peak_memory, 2048u * 1024);
  // Stopped while it waits: nothing of the call runs on.
  EXPECT_TRUE(Stopped(pid));

  const TaskResult second = h.Run(Call(2, {{"CODE", "3"}}));
  EXPECT_EQ(second.exit_code, 3) << Describe(second);
  EXPECT_EQ(second.outcome, TaskOutcome::kFailed);
  EXPECT_EQ(PidOf(second), pid);
  EXPECT_EQ(ReadFile(second.dirs.stdout_path),
            "pid " + std::to_string(pid) + " cwd " + second.dirs.task + " task 7.2");

  // Another preload list is another key: another interpreter.
  const TaskResult other = h.Run(Call(3, {{"DROVER_PRELOAD", "json"}}));
  EXPECT_EQ(other.outcome, TaskOutcome::kSucceeded) << Describe(other);
  EXPECT_NE(PidOf(other), pid);
  EXPECT_GT(PidOf(other), 0);
}

// Of the idle interpreters of a key, one whose last call ran on the next
// call's cores is taken first (its cpuset need not change), else the one
// used last.
TEST_F(ExecutorWarmTest, AnIdleInterpreterThatLastRanOnTheCallsCoresIsTakenFirst) {
  Harness h(MakeNoIsolator());
  TaskSpec on0 = Call(1);
  on0.cores = {0};
  TaskSpec on1 = Call(2);
  on1.cores = {1};
  // Both at once: two interpreters.
  ASSERT_TRUE(h.Start(on0).ok());
  ASSERT_TRUE(h.Start(on1).ok());
  h.WaitFor(2);
  const pid_t first = PidOf(h.results()[1]), second = PidOf(h.results()[2]);
  ASSERT_GT(first, 0);
  ASSERT_GT(second, 0);
  ASSERT_NE(first, second);
  for (uint32_t i = 3; i < 7; ++i) {
    TaskSpec next = Call(i);
    next.cores = {static_cast<int>(i % 2)};  // 1, 0, 1, 0
    const TaskResult r = h.Run(next);
    ASSERT_EQ(r.outcome, TaskOutcome::kSucceeded) << Describe(r);
    EXPECT_EQ(PidOf(r), i % 2 == 0 ? first : second) << "call " << i;
  }
}

// An interpreter lives in the worker's network: a call that wants a
// network of its own is not given to one; it starts its own process (here
// the serving script alone, which has no call to serve and fails).
TEST_F(ExecutorWarmTest, ACallWithItsOwnNetworkIsNotGivenToAWarmInterpreter) {
  if (!CanMakePrivateNetwork()) GTEST_SKIP() << "may not create network namespaces";
  Harness h(MakeNoIsolator());
  const TaskResult first = h.Run(Call(1));
  ASSERT_EQ(first.outcome, TaskOutcome::kSucceeded) << Describe(first);
  const pid_t pid = PidOf(first);
  ASSERT_GT(pid, 0);
  TaskSpec own = Call(2);
  own.private_network = true;
  const TaskResult second = h.Run(own);
  EXPECT_NE(PidOf(second), pid) << ReadFile(second.dirs.stdout_path);
  EXPECT_EQ(second.outcome, TaskOutcome::kFailed) << Describe(second);
  // The interpreter is still there for the next call that may have it.
  const TaskResult third = h.Run(Call(3));
  EXPECT_EQ(PidOf(third), pid);
}

TEST_F(ExecutorWarmTest, ACallThatRepliesEarlyDoesNotRunOnBetweenCalls) {
  Harness h(MakeNoIsolator());
  const TaskResult r = h.Run(Call(1, {{"MODE", "spin"}}));
  ASSERT_EQ(r.outcome, TaskOutcome::kSucceeded) << Describe(r);
  const pid_t pid = PidOf(r);
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(Stopped(pid));  // its spinning thread too: the whole process
  EXPECT_GE(std::distance(std::filesystem::directory_iterator("/proc/" + std::to_string(pid) +
                                                              "/task"),
                          std::filesystem::directory_iterator()),
            2);
}

TEST_F(ExecutorWarmTest, AReplyThatDoesNotParseEndsTheInterpreter) {
  Harness h(MakeNoIsolator());
  const TaskResult bad = h.Run(Call(1, {{"MODE", "garbage"}}));
  EXPECT_EQ(bad.outcome, TaskOutcome::kFailed);
  EXPECT_EQ(bad.signal, SIGKILL) << Describe(bad);
  const pid_t pid = PidOf(bad);
  const TaskResult next = h.Run(Call(2));
  EXPECT_EQ(next.outcome, TaskOutcome::kSucceeded) << Describe(next);
  EXPECT_NE(PidOf(next), pid);
}

TEST_F(ExecutorWarmTest, AKillInTheMiddleOfACallEndsItsInterpreter) {
  Harness h(MakeNoIsolator());
  const TaskResult first = h.Run(Call(1));
  const pid_t pid = PidOf(first);
  ASSERT_TRUE(h.Start(Call(2, {{"MODE", "hang"}})).ok());
  // Its output says it has the call.
  Status s = h.loop().RunUntil(
      [&] { return ReadFile(h.dir() + "/work/7/2.1/stdout").find("task 7.2") != std::string::npos; },
      Seconds(30));
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(h.executor().Kill(TaskId{7, 2}, Duration(0)).ok());
  h.WaitFor(2);
  EXPECT_EQ(h.results()[2].outcome, TaskOutcome::kCanceled) << Describe(h.results()[2]);
  EXPECT_EQ(StateOf(pid), '?');  // reaped
  const TaskResult next = h.Run(Call(3));
  EXPECT_EQ(next.outcome, TaskOutcome::kSucceeded) << Describe(next);
  EXPECT_NE(PidOf(next), pid);
}

TEST_F(ExecutorWarmTest, AnIdleInterpreterEndsAfterTheIdleTimeAndWithTheExecutor) {
  ExecutorOptions options;
  options.warm_idle = Millis(50);
  pid_t timed_out = -1;
  {
    Harness h(MakeNoIsolator(), options);
    timed_out = PidOf(h.Run(Call(1)));
    ASSERT_GT(timed_out, 0);
    Status s = h.loop().RunUntil([&] { return StateOf(timed_out) == '?'; }, Seconds(30));
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  pid_t kept = -1;
  {
    Harness h(MakeNoIsolator());
    kept = PidOf(h.Run(Call(1)));
    ASSERT_GT(kept, 0);
    EXPECT_TRUE(Stopped(kept));
  }
  EXPECT_EQ(StateOf(kept), '?');  // killed and reaped by the executor's end
}

TEST_F(ExecutorWarmTest, OverTheIdleCountTheOneIdleLongestEnds) {
  ExecutorOptions options;
  options.warm_max_idle = 1;
  Harness h(MakeNoIsolator(), options);
  const pid_t first = PidOf(h.Run(Call(1, {{"DROVER_PRELOAD", "a"}})));
  const pid_t second = PidOf(h.Run(Call(2, {{"DROVER_PRELOAD", "b"}})));
  ASSERT_GT(first, 0);
  ASSERT_GT(second, 0);
  Status s = h.loop().RunUntil([&] { return StateOf(first) == '?'; }, Seconds(30));
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(Stopped(second));
  EXPECT_EQ(PidOf(h.Run(Call(3, {{"DROVER_PRELOAD", "b"}}))), second);
}

// controller -> cgroup path, from /proc/PID/cgroup's "N:ctl,ctl:path" lines.
std::map<std::string, std::string> CgroupsIn(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::istringstream ctls(line.substr(a + 1, b - a - 1));
    for (std::string ctl; std::getline(ctls, ctl, ',');) out[ctl] = line.substr(b + 1);
  }
  return out;
}

// A v1 cgroup file of the cgroup `path` of controller `ctl`, trimmed.
std::string CgroupFile(const std::string& ctl, const std::string& path, const std::string& file) {
  std::string text = ReadFile("/sys/fs/cgroup/" + ctl + path + "/" + file);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

std::unique_ptr<Isolator> CgroupV1OrNull() {
  auto isolator = MakeCgroupV1Isolator(CgroupV1Options{"/sys/fs/cgroup", /*gpu_count=*/0});
  return isolator.ok() ? std::move(isolator).value() : nullptr;
}

TEST_F(ExecutorWarmTest, UnderCgroupV1AnInterpreterWaitsInItsCallsCageRefittedForTheNextCall) {
  std::unique_ptr<Isolator> isolator = CgroupV1OrNull();
  if (!isolator) GTEST_SKIP() << "cgroup v1 is not usable here";
  Harness h(std::move(isolator));
  TaskSpec first = Call(1, {{"MODE", "hold"}});
  first.cores = {0};
  first.milli_cpus = 500;  // a quota: the cpu hierarchy too
  first.max_pids = 64;
  first.memory_bytes = 256 << 20;
  const TaskResult held = h.Run(first);
  ASSERT_EQ(held.outcome, TaskOutcome::kSucceeded) << Describe(held);
  const pid_t pid = PidOf(held);
  const auto during = CgroupsIn(ReadFile(held.dirs.stderr_path));
  const auto after = CgroupsIn(ReadFile("/proc/" + std::to_string(pid) + "/cgroup"));
  for (const char* ctl : {"memory", "cpuacct", "freezer", "cpuset", "pids", "cpu"}) {
    ASSERT_TRUE(during.count(ctl)) << ctl;
    EXPECT_NE(during.at(ctl).find("/drover/w"), std::string::npos) << ctl << " " << during.at(ctl);
    EXPECT_EQ(after.at(ctl), during.at(ctl)) << ctl << ": it waits in its call's cgroups";
  }
  EXPECT_EQ(CgroupFile("cpuset", during.at("cpuset"), "cpuset.cpus"), "0");
  EXPECT_EQ(CgroupFile("cpu", during.at("cpu"), "cpu.cfs_quota_us"), "50000");
  EXPECT_EQ(CgroupFile("pids", during.at("pids"), "pids.max"), "64");
  // No later task is given its cage: a command after it counts only its
  // own memory, not the 32 MiB the interpreter holds.
  TaskSpec command = Task(3, {Helper(), "alloc", "1"});
  command.memory_bytes = 256 << 20;
  const TaskResult alone = h.Run(command);
  ASSERT_EQ(alone.outcome, TaskOutcome::kSucceeded) << Describe(alone);
  EXPECT_LT(alone.peak_memory, 16u << 20);

  // The next call, without pinned cores, quota or process limit, and with
  // a memory limit of 40 MiB: the same interpreter in the same cgroups,
  // their limits the call's. What the interpreter held before the call
  // (its 32 MiB and more) counts neither against the limit nor in the
  // peak: the call's own 32 MiB fit, and its peak is about them.
  TaskSpec second = Call(2, {{"MODE", "hold"}});
  second.memory_bytes = 40 << 20;
  const TaskResult next = h.Run(second);
  ASSERT_EQ(next.outcome, TaskOutcome::kSucceeded) << Describe(next);
  EXPECT_EQ(PidOf(next), pid);
  const auto during_next = CgroupsIn(ReadFile(next.dirs.stderr_path));
  for (const char* ctl : {"memory", "cpuacct", "freezer", "cpuset", "pids", "cpu"}) {
    EXPECT_EQ(during_next.at(ctl), during.at(ctl)) << ctl;
  }
  const std::string parent = during.at("cpuset").substr(0, during.at("cpuset").rfind('/'));
  EXPECT_EQ(CgroupFile("cpuset", during.at("cpuset"), "cpuset.cpus"),
            CgroupFile("cpuset", parent, "cpuset.cpus"));
  EXPECT_EQ(CgroupFile("cpu", during.at("cpu"), "cpu.cfs_quota_us"), "-1");
  EXPECT_EQ(CgroupFile("pids", during.at("pids"), "pids.max"), "max");
  const uint64_t limit =
      std::stoull(CgroupFile("memory", during.at("memory"), "memory.limit_in_bytes"));
  EXPECT_GT(limit, (40u << 20) + (32u << 20));  // the call's, and what was held
  EXPECT_LT(limit, 160u << 20);
  EXPECT_GE(next.peak_memory, 30u << 20);
  EXPECT_LT(next.peak_memory, 56u << 20);
}

TEST_F(ExecutorWarmTest, UnderCgroupV1ACallNeedingACgroupItsInterpretersCageLacksMovesIt) {
  std::unique_ptr<Isolator> isolator = CgroupV1OrNull();
  if (!isolator) GTEST_SKIP() << "cgroup v1 is not usable here";
  Harness h(std::move(isolator));
  const TaskResult first = h.Run(Call(1, {{"MODE", "hold"}}));
  ASSERT_EQ(first.outcome, TaskOutcome::kSucceeded) << Describe(first);
  const auto during = CgroupsIn(ReadFile(first.dirs.stderr_path));
  TaskSpec limited = Call(2, {{"MODE", "hold"}});
  limited.max_pids = 64;
  const TaskResult next = h.Run(limited);
  ASSERT_EQ(next.outcome, TaskOutcome::kSucceeded) << Describe(next);
  EXPECT_EQ(PidOf(next), PidOf(first));
  const auto during_next = CgroupsIn(ReadFile(next.dirs.stderr_path));
  EXPECT_NE(during_next.at("memory"), during.at("memory"));
  ASSERT_NE(during_next.at("pids").find("/drover/w"), std::string::npos) << during_next.at("pids");
  EXPECT_EQ(CgroupFile("pids", during_next.at("pids"), "pids.max"), "64");
  const auto after = CgroupsIn(ReadFile("/proc/" + std::to_string(PidOf(next)) + "/cgroup"));
  EXPECT_EQ(after.at("memory"), during_next.at("memory"));
}

TEST_F(ExecutorWarmTest, UnderCgroupV1ACallThatLeavesAProcessIsEmptiedAndItsInterpreterMovedOut) {
  std::unique_ptr<Isolator> isolator = CgroupV1OrNull();
  if (!isolator) GTEST_SKIP() << "cgroup v1 is not usable here";
  Harness h(std::move(isolator));
  const TaskResult left = h.Run(Call(1, {{"MODE", "child"}}));
  ASSERT_EQ(left.outcome, TaskOutcome::kSucceeded) << Describe(left);
  EXPECT_EQ(left.leftovers_killed, 1u);
  const pid_t pid = PidOf(left);
  const TaskResult next = h.Run(Call(2, {{"MODE", "hold"}}));
  ASSERT_EQ(next.outcome, TaskOutcome::kSucceeded) << Describe(next);
  EXPECT_EQ(PidOf(next), pid);
  // Its next call was given a cage of its own, not the emptied one.
  const auto during_next = CgroupsIn(ReadFile(next.dirs.stderr_path));
  EXPECT_NE(during_next.at("freezer").find("/drover/w"), std::string::npos);
  EXPECT_EQ(ReadFile("/sys/fs/cgroup/freezer" + during_next.at("freezer") + "/cgroup.procs"),
            std::to_string(pid) + "\n");
}

// A blkio cgroup keeps its throttles: a call after one with disk limits
// is moved out of it (to the warm cgroup, which has one in every
// hierarchy), not given it refitted.
TEST_F(ExecutorWarmTest, UnderCgroupV1ACallAfterOneWithDiskLimitsHasNoneOfThem) {
  std::unique_ptr<Isolator> isolator = CgroupV1OrNull();
  if (!isolator) GTEST_SKIP() << "cgroup v1 is not usable here";
  if (access("/sys/fs/cgroup/blkio", W_OK) != 0) GTEST_SKIP() << "no writable blkio hierarchy";
  Harness h(std::move(isolator));
  if (!BlockDeviceOf(h.dir()).ok()) GTEST_SKIP() << "the work directory's disk is not found";
  TaskSpec limited = Call(1, {{"MODE", "hold"}});
  limited.io.write_bps = 10 << 20;
  const TaskResult first = h.Run(limited);
  ASSERT_EQ(first.outcome, TaskOutcome::kSucceeded) << Describe(first);
  const auto during = CgroupsIn(ReadFile(first.dirs.stderr_path));
  ASSERT_NE(during.at("blkio").find("/drover/w"), std::string::npos) << during.at("blkio");
  const TaskResult next = h.Run(Call(2, {{"MODE", "hold"}}));
  ASSERT_EQ(next.outcome, TaskOutcome::kSucceeded) << Describe(next);
  EXPECT_EQ(PidOf(next), PidOf(first));
  const auto during_next = CgroupsIn(ReadFile(next.dirs.stderr_path));
  EXPECT_NE(during_next.at("blkio"), during.at("blkio"));
  EXPECT_EQ(CgroupFile("blkio", during_next.at("blkio"), "blkio.throttle.write_bps_device"), "");
}

TEST(WarmProtocolTest, ReplyParsingRefusesWhatIsNotAReply) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, fds), 0);
  UniqueFd mine(fds[0]), theirs(fds[1]);
  EXPECT_EQ(ReadReply(mine.fd()).status().code(), StatusCode::kUnavailable);
  for (const char* bad : {"exit", "exit 0 1 2", "quit 0 0 0 0", "exit x 0 0 0",
                          "exit 0 -5 0 0", "signal 9 0 -1 0", "\xff\xfe\x00garbage"}) {
    ASSERT_GE(send(theirs.fd(), bad, strlen(bad), 0), 0);
    Result<WarmReply> r = ReadReply(mine.fd());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << "\"" << bad << "\"";
  }
  const std::string big(4096, '7');
  ASSERT_GE(send(theirs.fd(), big.data(), big.size(), 0), 0);
  EXPECT_FALSE(ReadReply(mine.fd()).ok());

  ASSERT_GE(send(theirs.fd(), "signal 9 2500 100 1", 19, 0), 0);
  Result<WarmReply> r = ReadReply(mine.fd());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->signal, 9);
  EXPECT_EQ(r->exit_code, -1);
  EXPECT_EQ(r->cpu, Duration(2500));
  EXPECT_EQ(r->peak_memory, 100u * 1024);
  EXPECT_TRUE(r->last);
  EXPECT_FALSE(r->result);  // no result with it: the file has it

  // The result after the status line, when the call was asked for it so;
  // an empty one is a result too. One over the limit is refused.
  for (const std::string& result : {std::string("drover-call:v1:value:gAR9lC4="), std::string(),
                                    std::string("two\nlines\0and a NUL")}) {
    const std::string reply = "exit 0 10 20 0\n" + result;
    ASSERT_GE(send(theirs.fd(), reply.data(), reply.size(), 0), 0);
    r = ReadReply(mine.fd());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->exit_code, 0);
    ASSERT_TRUE(r->result);
    EXPECT_EQ(*r->result, result);
  }
  const std::string over = "exit 0 10 20 0\n" + std::string(kMaxReplyBytes, 'r');
  ASSERT_GE(send(theirs.fd(), over.data(), over.size(), 0), 0);
  EXPECT_EQ(ReadReply(mine.fd()).status().code(), StatusCode::kInvalidArgument);

  theirs.Reset();
  EXPECT_EQ(ReadReply(mine.fd()).status().code(), StatusCode::kAborted);
}

TEST(WarmProtocolTest, ACallMayAskForItsResultWithTheReply) {
  Result<std::pair<UniqueFd, UniqueFd>> pair = MakeWarmSocket();
  ASSERT_TRUE(pair.ok()) << pair.status().ToString();
  ASSERT_TRUE(SendCall(pair->first.fd(), "/w", {"A=1"}, 1, 2, /*reply_result=*/true).ok());
  char buf[256];
  const ssize_t n = recv(pair->second.fd(), buf, sizeof(buf), 0);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, n), std::string("/w\0A=1\0", 7) + kReplyResult);
}

TEST(WarmProtocolTest, ACallCarriesItsDirectoryEnvironmentAndTwoDescriptors) {
  Result<std::pair<UniqueFd, UniqueFd>> pair = MakeWarmSocket();
  ASSERT_TRUE(pair.ok()) << pair.status().ToString();
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  UniqueFd r(out[0]), w(out[1]);
  ASSERT_TRUE(SendCall(pair->first.fd(), "/work/7/1.1", {"A=1", "B=two words"}, w.fd(), w.fd()).ok());
  char buf[256];
  alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))];
  iovec iov{buf, sizeof(buf)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const ssize_t n = recvmsg(pair->second.fd(), &msg, MSG_CMSG_CLOEXEC);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, n), std::string("/work/7/1.1\0A=1\0B=two words", 27));
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->cmsg_type, SCM_RIGHTS);
  int got[2];
  memcpy(got, CMSG_DATA(c), sizeof(got));
  ASSERT_EQ(write(got[0], "x", 1), 1);  // the pipe's write end
  close(got[0]);
  close(got[1]);
  char x = 0;
  EXPECT_EQ(read(r.fd(), &x, 1), 1);
  EXPECT_EQ(x, 'x');
}

}  // namespace
}  // namespace drover::worker::testing
