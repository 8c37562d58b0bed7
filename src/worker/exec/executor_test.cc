// The executor with isolation none: environment, directories, output,
// results, exit reasons, exec failures, user switch, kill.
#include "worker/exec/executor.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string_view>
#include <tuple>

#include "worker/exec/cgroup_files.h"
#include "worker/exec/exec_test_util.h"
#include "worker/exec/rlimit.h"

namespace drover::worker {
namespace {

using testing::Describe;
using testing::Harness;
using testing::ReadFile;
using testing::Task;
using testing::WaitParked;

TEST(ExecutorTest, RunsATaskWithItsEnvironmentDirectoriesAndResult) {
  Harness h(MakeNoIsolator());
  TaskSpec spec =
      Task(3, {"sh", "-c",
               "env | grep -E '^(DROVER_|OMP_NUM|CUDA_DEVICE_ORDER|CUDA_VISIBLE|NVIDIA_VISIBLE|EXTRA=)' | sort; pwd; "
               "echo oops >&2; echo 42 > $DROVER_RESULT"});
  spec.attempt = 2;
  spec.task_index = 11;
  spec.cores = {1};
  spec.gpus = {0, 1};
  // A task may not reorder its GPUs: the indices are in PCI bus order.
  spec.env = {{"EXTRA", "yes"}, {"CUDA_DEVICE_ORDER", "FASTEST_FIRST"}};
  TaskResult r = h.Run(spec);
  EXPECT_EQ(r.outcome, TaskOutcome::kSucceeded);
  EXPECT_EQ(r.signal, 0);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.result_text, "42\n");
  const std::string job = h.dir() + "/work/7";
  const std::string task = job + "/3.2";
  EXPECT_EQ(r.dirs.task, task);
  EXPECT_EQ(ReadFile(task + "/stdout"),
            "CUDA_DEVICE_ORDER=PCI_BUS_ID\n"
            "CUDA_VISIBLE_DEVICES=0,1\n"
            "DROVER_ATTEMPT=2\n"
            "DROVER_CHECKPOINT_DIR=" +
                job +
                "/3.checkpoint\n"
                "DROVER_CPUS=1\n"
                "DROVER_INPUTS=" +
                h.dir() +
                "/work/.no-inputs\n"
                "DROVER_JOB_ID=7\n"
                "DROVER_OUTPUT_DIR=" +
                task +
                "/output\n"
                "DROVER_RESULT=" +
                task +
                "/result\n"
                "DROVER_TASK_ID=7.3\n"
                "DROVER_TASK_INDEX=11\n"
                "EXTRA=yes\n"
                "NVIDIA_VISIBLE_DEVICES=0,1\n"
                "OMP_NUM_THREADS=1\n" +
                task + "\n");
  EXPECT_EQ(ReadFile(task + "/stderr"), "oops\n");
  EXPECT_TRUE(std::filesystem::is_directory(task + "/output"));
  EXPECT_TRUE(std::filesystem::is_directory(job + "/3.checkpoint"));
  // A task without inputs gets the shared empty directory, and no inputs/.
  EXPECT_TRUE(std::filesystem::is_directory(h.dir() + "/work/.no-inputs"));
  EXPECT_FALSE(std::filesystem::exists(task + "/inputs"));
  EXPECT_EQ(h.executor().running(), 0u);
}

TEST(ExecutorTest, CheckpointDirIsKeptAcrossAttempts) {
  Harness h(MakeNoIsolator());
  TaskSpec first = Task(1, {"sh", "-c", "echo saved > $DROVER_CHECKPOINT_DIR/state"});
  ASSERT_EQ(h.Run(first).outcome, TaskOutcome::kSucceeded);
  TaskSpec second = Task(1, {"sh", "-c", "cat $DROVER_CHECKPOINT_DIR/state > $DROVER_RESULT"});
  second.attempt = 2;
  EXPECT_EQ(h.Run(second).result_text, "saved\n");
}

// PrepareStart finds the program on PATH ahead of the start, and a Start
// of the same command uses that; another command is looked up afresh.
TEST(ExecutorTest, PrepareStartResolvesTheCommandAheadOfTheStart) {
  Harness h(MakeNoIsolator());
  const std::string first = h.dir() + "/first";
  const std::string second = h.dir() + "/second";
  ASSERT_TRUE(std::filesystem::create_directory(first));
  ASSERT_TRUE(std::filesystem::create_directory(second));
  auto write_script = [](const std::string& path, const std::string& text) {
    std::ofstream(path) << "#!/bin/sh\necho " << text << " > \"$DROVER_RESULT\"\n";
    ASSERT_EQ(::chmod(path.c_str(), 0755), 0);
  };
  write_script(second + "/drover-prep-test", "second");
  TaskSpec spec = Task(1, {"drover-prep-test"});
  spec.env = {{"PATH", first + ":" + second}};

  Result<TaskDirs> dirs = h.executor().PrepareStart(spec);
  ASSERT_TRUE(dirs.ok()) << dirs.status().ToString();
  EXPECT_TRUE(std::filesystem::is_directory(dirs->output));
  // Earlier on PATH now, but the start uses what was found before.
  write_script(first + "/drover-prep-test", "first");
  EXPECT_EQ(h.Run(spec).result_text, "second\n");

  // The next attempt is not prepared: looked up at its start. (A program
  // found before is remembered while it is still there, CommandCache: the
  // one found first goes, so that the lookup must find the other.)
  spec.attempt = 2;
  std::filesystem::remove(second + "/drover-prep-test");
  EXPECT_EQ(h.Run(spec).result_text, "first\n");
  // Prepared, but started with another command: looked up afresh.
  write_script(second + "/drover-prep-test", "second");
  spec.attempt = 3;
  ASSERT_TRUE(h.executor().PrepareStart(spec).ok());
  spec.argv.push_back("an-argument");
  std::filesystem::remove(first + "/drover-prep-test");
  EXPECT_EQ(h.Run(spec).result_text, "second\n");

  TaskSpec missing = Task(2, {"drover-no-such-command"});
  Result<TaskDirs> failed = h.executor().PrepareStart(missing);
  EXPECT_EQ(failed.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(failed.status().message(), "command not found: drover-no-such-command");
}

// An attempt prepared and then dropped leaves no task directory behind;
// the checkpoint directory, shared by the attempts, stays.
TEST(ExecutorTest, DiscardPreparedRemovesWhatPrepareMade) {
  Harness h(MakeNoIsolator());
  TaskSpec spec = Task(4, {"true"});
  Result<TaskDirs> dirs = h.executor().PrepareStart(spec, /*with_inputs=*/true);
  ASSERT_TRUE(dirs.ok()) << dirs.status().ToString();
  std::optional<Executor::ParkedInfo> parked = h.executor().ParkedProcessOf(spec.id);
  EXPECT_EQ(parked.has_value(), ParkSupported());
  std::ofstream(dirs->inputs + "/7.1") << "input\n";
  h.executor().DiscardPrepared(spec.id, /*attempt=*/2);  // another attempt: kept
  EXPECT_TRUE(std::filesystem::exists(dirs->inputs + "/7.1"));
  h.executor().DiscardPrepared(spec.id, spec.attempt);
  EXPECT_FALSE(std::filesystem::exists(dirs->task));
  // The process made ahead is ended and reaped.
  if (parked) {
    EXPECT_EQ(kill(parked->pid, 0), -1);
  }
  EXPECT_TRUE(std::filesystem::is_directory(dirs->checkpoint));
}

TEST(ExecutorTest, ReportsExitCodesAndSignals) {
  Harness h(MakeNoIsolator());
  TaskResult r = h.Run(Task(1, {"sh", "-c", "exit 3"}));
  EXPECT_EQ(r.outcome, TaskOutcome::kFailed);
  EXPECT_EQ(r.exit_code, 3);
  r = h.Run(Task(2, {"sh", "-c", "kill -9 $$"}));
  EXPECT_EQ(r.signal, 9);
  EXPECT_EQ(r.signal, 9);
}

TEST(ExecutorTest, ResultTextIsCappedWithANote) {
  ExecutorOptions options;
  options.result_cap_bytes = 100;
  Harness h(MakeNoIsolator(), options);
  TaskResult r = h.Run(Task(1, {testing::Helper(), "result", "150"}));
  EXPECT_EQ(r.result_text, std::string(100, 'r') + "\n[drover: result truncated at 100 B]\n");
}

TEST(ExecutorTest, ResultSymlinkIsNotFollowed) {
  Harness h(MakeNoIsolator());
  TaskResult r = h.Run(Task(1, {"sh", "-c", "ln -s /etc/hostname $DROVER_RESULT"}));
  EXPECT_EQ(r.outcome, TaskOutcome::kSucceeded);
  EXPECT_EQ(r.result_text, "");
}

TEST(ExecutorTest, CapsOutputAndTheTaskStillSucceeds) {
  Harness h(MakeNoIsolator());
  TaskSpec spec = Task(1, {testing::Helper(), "spew", "50"});
  spec.output_cap_bytes = 1 << 20;
  TaskResult r = h.Run(spec);
  EXPECT_EQ(r.outcome, TaskOutcome::kSucceeded) << Describe(r);
  EXPECT_TRUE(r.stdout_truncated);
  EXPECT_FALSE(r.stderr_truncated);
  const std::string marker = "\n[drover: output truncated at 1 MiB]\n";
  std::string out = ReadFile(r.dirs.stdout_path);
  EXPECT_EQ(out.size(), (1u << 20) + marker.size());
  EXPECT_EQ(out.substr(out.size() - marker.size()), marker);
  EXPECT_EQ(out.find_first_not_of('x'), 1u << 20);
}

// A prepared start runs the process PrepareStart made: Start only lets it
// go on, and the task runs, reports and is captured as any other.
TEST(ExecutorTest, APreparedStartRunsTheProcessMadeAhead) {
  if (!ParkSupported()) GTEST_SKIP() << "no parked starts on this architecture";
  Harness h(MakeNoIsolator());
  TaskSpec spec = Task(5, {"sh", "-c", "echo out; echo $DROVER_TASK_ID > \"$DROVER_RESULT\""});
  ASSERT_TRUE(h.executor().PrepareStart(spec).ok());
  std::optional<Executor::ParkedInfo> parked = h.executor().ParkedProcessOf(spec.id);
  ASSERT_TRUE(parked.has_value());
  ASSERT_TRUE(WaitParked(h.executor(), spec.id));
  Result<pid_t> pid = h.Start(spec);
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  EXPECT_EQ(*pid, parked->pid);
  EXPECT_FALSE(h.executor().ParkedProcessOf(spec.id).has_value());
  h.WaitFor(1);
  const TaskResult& r = h.results()[5];
  EXPECT_EQ(r.outcome, TaskOutcome::kSucceeded) << Describe(r);
  EXPECT_EQ(ReadFile(r.dirs.stdout_path), "out\n");
  EXPECT_EQ(r.result_text, "7.5\n");
}

// A start with other limits than the prepared one gets a process of its
// own; the one made ahead is ended without running.
TEST(ExecutorTest, AStartWithOtherLimitsDoesNotUseTheProcessMadeAhead) {
  if (!ParkSupported()) GTEST_SKIP() << "no parked starts on this architecture";
  Harness h(MakeNoIsolator());
  TaskSpec spec = Task(6, {"true"});
  ASSERT_TRUE(h.executor().PrepareStart(spec).ok());
  ASSERT_TRUE(WaitParked(h.executor(), spec.id));
  const pid_t made_ahead = h.executor().ParkedProcessOf(spec.id)->pid;
  spec.max_pids = 64;
  Result<pid_t> pid = h.Start(spec);
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  EXPECT_NE(*pid, made_ahead);
  EXPECT_EQ(kill(made_ahead, 0), -1);  // ended and reaped
  h.WaitFor(1);
  EXPECT_EQ(h.results()[6].outcome, TaskOutcome::kSucceeded) << Describe(h.results()[6]);
}

// The program made ready ahead went away before the start: the task fails
// with the reason a start names, not an exit code of the worker's.
TEST(ExecutorTest, AProgramGoneBeforeAPreparedStartFailsWithTheReason) {
  if (!ParkSupported()) GTEST_SKIP() << "no parked starts on this architecture";
  Harness h(MakeNoIsolator());
  testing::TempDir scripts;
  const std::string script = scripts.path() + "/run.sh";
  std::ofstream(script) << "#!/bin/sh\necho hi\n";
  ASSERT_EQ(chmod(script.c_str(), 0755), 0);
  TaskSpec spec = Task(7, {"./run.sh"});
  spec.working_dir = scripts.path();
  ASSERT_TRUE(h.executor().PrepareStart(spec).ok());
  ASSERT_TRUE(WaitParked(h.executor(), spec.id));
  ASSERT_EQ(chmod(script.c_str(), 0644), 0);
  ASSERT_TRUE(h.Start(spec).ok());
  h.WaitFor(1);
  const TaskResult& r = h.results()[7];
  EXPECT_EQ(r.outcome, TaskOutcome::kFailed);
  EXPECT_EQ(r.start_error, "permission denied: ./run.sh");
  EXPECT_EQ(r.exit_code, -1);
}

TEST(ExecutorTest, ExecFailuresHaveClearMessages) {
  Harness h(MakeNoIsolator());
  auto r = h.executor().Start(Task(1, {"trian.py"}), nullptr);
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "command not found: trian.py");

  testing::TempDir scripts;
  std::ofstream(scripts.path() + "/run.sh") << "#!/bin/sh\necho hi\n";
  TaskSpec spec = Task(2, {"./run.sh"});
  spec.working_dir = scripts.path();
  r = h.executor().Start(spec, nullptr);
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(r.status().message(), "permission denied: ./run.sh");

  spec = Task(3, {"true"});
  spec.working_dir = "/x-drover-missing";
  r = h.executor().Start(spec, nullptr);
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "working directory missing: /x-drover-missing");
  EXPECT_EQ(h.executor().running(), 0u);

  // The same script, once executable, runs from its working directory.
  chmod((scripts.path() + "/run.sh").c_str(), 0755);
  spec = Task(4, {"./run.sh"});
  spec.working_dir = scripts.path();
  TaskResult done = h.Run(spec);
  EXPECT_EQ(done.outcome, TaskOutcome::kSucceeded) << Describe(done);
  EXPECT_EQ(ReadFile(done.dirs.stdout_path), "hi\n");
}

// The reaper (the ProcessWatch) must know a task's process group before
// its program can run: a worker killed between the execve and the watch's
// Started would otherwise leave the task running (isolation none/rlimit
// has no cgroup for the reaper to empty). So when Started is called the
// task's process has not yet become its program.
class CommAtStarted : public ProcessWatch {
 public:
  void Started(pid_t pid, const std::string& name) override {
    names.push_back(name);
    comms.push_back(ReadFile("/proc/" + std::to_string(pid) + "/comm"));
  }
  void Ended(pid_t) override { ++ended; }
  std::vector<std::string> names;
  std::vector<std::string> comms;
  int ended = 0;
};

TEST(ExecutorTest, TheWatchIsToldBeforeTheProgramRuns) {
  CommAtStarted watch;
  ExecutorOptions options;
  options.watch = &watch;
  Harness h(MakeNoIsolator(), options);
  // A start with nothing made ahead, and one made ahead by PrepareStart.
  TaskResult r = h.Run(Task(1, {"sleep", "0"}));
  EXPECT_EQ(r.outcome, TaskOutcome::kSucceeded) << Describe(r);
  ASSERT_EQ(watch.comms.size(), 1u);
  EXPECT_NE(watch.comms[0], "sleep\n") << "the watch learned of the task after its execve";
  EXPECT_EQ(watch.names[0], "7.1.1");

  // A setup step that fails is still reported, by the exit.
  TaskSpec spec = Task(2, {"true"});
  spec.working_dir = "/x-drover-missing";
  Result<pid_t> started =
      h.executor().Start(spec, [&](const TaskResult& done) { h.results()[2] = done; });
  if (started.ok()) {
    h.WaitFor(2);
    EXPECT_EQ(h.results()[2].start_error, "working directory missing: /x-drover-missing");
  } else {
    EXPECT_EQ(started.status().message(), "working directory missing: /x-drover-missing");
  }
}

TEST(ExecutorTest, RootWithoutTaskUserOrFlagIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: the check is about a worker running as root";
  auto loop = EpollLoop::Create();
  ASSERT_TRUE(loop.ok());
  testing::TempDir dir;
  ExecutorOptions options;
  options.workdir = dir.path();
  auto e = Executor::Create(options, loop->get(), MakeNoIsolator());
  EXPECT_EQ(e.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(e.status().message(),
            "the worker runs as root: name a task user (task_user) to run tasks as, run each "
            "task as its user's account (per_user), or allow running them as root explicitly "
            "(run_as_root)");
  options.task_user = "no-such-drover-user";
  EXPECT_EQ(Executor::Create(options, loop->get(), MakeNoIsolator()).status().message(),
            "task user \"no-such-drover-user\" does not exist");
  options.task_user = "nobody";
  options.per_user = true;
  EXPECT_EQ(Executor::Create(options, loop->get(), MakeNoIsolator()).status().message(),
            "running tasks as one user (task_user \"nobody\") and as each task's user "
            "(per_user) exclude each other");
}

// Per-user mode: each task runs as its job user's account, the
// map's or the same name's, and owns what it makes; a user that cannot be
// run is refused by the start, with the reason, before anything is made.
TEST(ExecutorTest, PerUserRunsEachTaskAsItsUsersAccount) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch users";
  passwd* nobody = getpwnam("nobody");
  if (nobody == nullptr) GTEST_SKIP() << "no user \"nobody\" on this machine";
  if (nobody->pw_uid < kFirstUserUid) GTEST_SKIP() << "\"nobody\" is a system account here";
  const uid_t uid = nobody->pw_uid;
  const gid_t gid = nobody->pw_gid;
  ExecutorOptions options;
  options.per_user = true;
  options.run_as_root = true;  // per user: only allows a user whose account is root
  options.user_map = {{"ana", "nobody"}, {"boss", "root"}};
  options.worker_name = "w1";
  Harness h(MakeNoIsolator(), options);
  auto as = [](uint32_t index, const std::string& user) {
    TaskSpec spec =
        Task(index, {"sh", "-c", "id -u; id -g; echo $USER; touch $DROVER_OUTPUT_DIR/made"});
    spec.user = user;
    return spec;
  };
  const std::string nobody_says = std::to_string(uid) + "\n" + std::to_string(gid) + "\nnobody\n";
  for (const auto& [index, user, want_uid, says] :
       {std::tuple{1u, "ana", uid, nobody_says}, std::tuple{2u, "nobody", uid, nobody_says},
        std::tuple{3u, "boss", uid_t{0}, std::string("0\n0\nroot\n")}}) {
    TaskResult r = h.Run(as(index, user));
    EXPECT_EQ(r.outcome, TaskOutcome::kSucceeded)
        << user << ": " << Describe(r) << ReadFile(r.dirs.stderr_path);
    EXPECT_EQ(ReadFile(r.dirs.stdout_path), says) << user;
    for (const std::string& path : {r.dirs.task, r.dirs.output, r.dirs.checkpoint,
                                    r.dirs.stdout_path, r.dirs.output + "/made"}) {
      struct stat st {};
      ASSERT_EQ(stat(path.c_str(), &st), 0) << path;
      EXPECT_EQ(st.st_uid, want_uid) << user << ": " << path;
    }
  }

  // A process made ahead switches to its own task's account.
  TaskSpec queued = as(4, "ana");
  ASSERT_TRUE(h.executor().PrepareStart(queued).ok());
  if (ParkSupported()) {
    ASSERT_TRUE(testing::WaitParked(h.executor(), queued.id));
    struct stat st {};
    const pid_t pid = h.executor().ParkedProcessOf(queued.id)->pid;
    ASSERT_EQ(stat(("/proc/" + std::to_string(pid)).c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, uid);
  }
  TaskResult r = h.Run(queued);
  EXPECT_EQ(ReadFile(r.dirs.stdout_path), nobody_says);

  for (const auto& [index, user, why] : std::vector<std::tuple<uint32_t, std::string, std::string>>{
           {5, "carol-drover-none",
            "user carol-drover-none has no account on worker w1 (map it with --user-map "
            "carol-drover-none=ACCOUNT, or run every task as one account with --user)"},
           {6, "",
            "the task has no user (its server sends none: it is older than this worker), and "
            "worker w1 runs each task as its user's account (run every task as one account "
            "with --user)"},
           {7, "daemon",
            "user daemon names a system account (uid 1) on worker w1: only --user-map "
            "daemon=daemon can run tasks as it"}}) {
    if (user == "daemon" && (getpwnam("daemon") == nullptr || getpwnam("daemon")->pw_uid != 1)) {
      continue;
    }
    Result<pid_t> refused = h.Start(as(index, user));
    ASSERT_FALSE(refused.ok()) << user;
    EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(refused.status().message(), why);
    EXPECT_EQ(h.executor().PrepareStart(as(index, user)).status().message(), why);
    EXPECT_EQ(h.executor().PrepareDirs(TaskId{7, index}, 1, true, user).status().message(), why);
    EXPECT_FALSE(std::filesystem::exists(h.dir() + "/work/7/" + std::to_string(index) + ".1"))
        << "a refused task had its directory made";
  }
}

TEST(ExecutorTest, PerUserRefusesAUserWhoseAccountIsRootUnlessAllowed) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: per-user mode runs as root";
  ExecutorOptions options;
  options.per_user = true;
  options.user_map = {{"boss", "root"}};
  options.worker_name = "w1";
  Harness h(MakeNoIsolator(), options);
  for (const std::string& user : {std::string("boss"), std::string("root")}) {
    TaskSpec spec = Task(1, {"true"});
    spec.user = user;
    Result<pid_t> refused = h.Start(spec);
    ASSERT_FALSE(refused.ok()) << user;
    const std::string why =
        "user " + user + " maps to root on worker w1: running tasks as root needs --run-as-root";
    EXPECT_EQ(refused.status().message(), why);
  }
}

TEST(ExecutorTest, RunsTasksAsTheConfiguredUser) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch users";
  passwd* nobody = getpwnam("nobody");
  if (nobody == nullptr) GTEST_SKIP() << "no user \"nobody\" on this machine";
  const uid_t uid = nobody->pw_uid;
  ExecutorOptions options;
  options.task_user = "nobody";
  Harness h(MakeNoIsolator(), options);
  TaskResult r = h.Run(Task(1, {"sh", "-c", "id -u; id -g; touch $DROVER_OUTPUT_DIR/made"}));
  EXPECT_EQ(r.outcome, TaskOutcome::kSucceeded) << Describe(r) << ReadFile(r.dirs.stderr_path);
  EXPECT_EQ(ReadFile(r.dirs.stdout_path),
            std::to_string(uid) + "\n" + std::to_string(nobody->pw_gid) + "\n");
  struct stat st;
  ASSERT_EQ(stat(r.dirs.task.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, uid);
  ASSERT_EQ(stat((r.dirs.output + "/made").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, uid);

  // A process made ahead switches user before it waits, and still starts
  // (its gate and lifeline were open before the switch).
  TaskSpec queued = Task(2, {"sh", "-c", "id -u"});
  ASSERT_TRUE(h.executor().PrepareStart(queued).ok());
  if (ParkSupported()) {
    ASSERT_TRUE(testing::WaitParked(h.executor(), queued.id));
    const pid_t pid = h.executor().ParkedProcessOf(queued.id)->pid;
    ASSERT_EQ(stat(("/proc/" + std::to_string(pid)).c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, uid);
  }
  r = h.Run(queued);
  EXPECT_EQ(r.outcome, TaskOutcome::kSucceeded) << Describe(r) << ReadFile(r.dirs.stderr_path);
  EXPECT_EQ(ReadFile(r.dirs.stdout_path), std::to_string(uid) + "\n");
}

TEST(ExecutorTest, KillSendsTermToTheGroupAndEndsAsCanceled) {
  Harness h(MakeNoIsolator());
  // The shell and its sleep child share the task's process group.
  ASSERT_TRUE(h.Start(Task(1, {"sh", "-c", "sleep 100; echo never"})).ok());
  ASSERT_TRUE(h.executor().Kill(TaskId{7, 1}, Seconds(30)).ok());
  h.WaitFor(1);
  TaskResult r = h.results()[1];
  EXPECT_EQ(r.outcome, TaskOutcome::kCanceled);
  EXPECT_EQ(r.signal, 15);
  EXPECT_LT(r.wall, Seconds(20));  // TERM worked; no need for the grace
  EXPECT_EQ(h.executor().Kill(TaskId{7, 1}).code(), StatusCode::kNotFound);
}

TEST(ExecutorTest, KillEscalatesToSigkillAfterTheGrace) {
  Harness h(MakeNoIsolator());
  testing::Fifo ready;
  ASSERT_TRUE(h.Start(Task(1, {testing::Helper(), "ignoreterm", ready.path()})).ok());
  ASSERT_EQ(ready.Read(), "ready\n");  // SIGTERM is ignored from here on
  ASSERT_TRUE(h.executor().Kill(TaskId{7, 1}, Millis(200)).ok());
  h.WaitFor(1);
  TaskResult r = h.results()[1];
  EXPECT_EQ(r.outcome, TaskOutcome::kCanceled);
  EXPECT_EQ(r.signal, 9);
  EXPECT_GE(r.wall, Millis(200));
}

TEST(ExecutorTest, RefusesASecondStartOfARunningTask) {
  Harness h(MakeNoIsolator());
  ASSERT_TRUE(h.Start(Task(1, {"sleep", "100"})).ok());
  EXPECT_EQ(h.Start(Task(1, {"true"})).status().code(), StatusCode::kAlreadyExists);
  ASSERT_TRUE(h.executor().Kill(TaskId{7, 1}, Duration(0)).ok());
  h.WaitFor(1);
  EXPECT_EQ(h.results()[1].outcome, TaskOutcome::kCanceled);
  EXPECT_EQ(h.results()[1].signal, 9);
}

TEST(ExecutorTest, BackgroundJobsOfAFinishedTaskAreKilledWithItsGroup) {
  Harness h(MakeNoIsolator());
  testing::Fifo fifo;
  ASSERT_TRUE(h.Start(Task(1, {"sh", "-c", "sleep 100 & echo $! > " + fifo.path()})).ok());
  const pid_t bg = atoi(fifo.Read().c_str());
  ASSERT_GT(bg, 0);
  int fd = PidfdOpen(bg);
  ASSERT_GE(fd, 0);
  h.WaitFor(1);
  EXPECT_EQ(h.results()[1].outcome, TaskOutcome::kSucceeded);
  pollfd p{fd, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 10000), 1) << "background job survived its task";
  close(fd);
}

TEST(ExecutorTest, DestroyingTheExecutorKillsItsTasks) {
  auto h = std::make_unique<Harness>(MakeNoIsolator());
  auto pid = h->Start(Task(1, {"sleep", "100"}));
  ASSERT_TRUE(pid.ok());
  int fd = PidfdOpen(*pid);
  ASSERT_GE(fd, 0);
  h.reset();
  pollfd p{fd, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 10000), 1) << "task survived its executor";
  close(fd);
}

// The scheduling states (/proc/PID/stat: R, S, D, T...) of the processes
// in process group `pgid`, one letter each, in pid order.
std::string GroupStates(pid_t pgid) {
  std::map<pid_t, char> states;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const pid_t pid = atoi(e.path().filename().c_str());
    if (pid <= 0 || getpgid(pid) != pgid) continue;
    const std::string stat = ReadFile(e.path().string() + "/stat");
    const size_t paren = stat.rfind(')');
    if (paren != std::string::npos && paren + 2 < stat.size()) states[pid] = stat[paren + 2];
  }
  std::string out;
  for (const auto& [pid, state] : states) out += state;
  return out;
}

// Waits (10 s at most) until every process of group `pgid` is in one of
// `states` (a zombie counts as any); returns what they were in last.
std::string WaitGroupStates(pid_t pgid, std::string_view states) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    const std::string now = GroupStates(pgid);
    const bool all = std::all_of(now.begin(), now.end(), [&](char c) {
      return c == 'Z' || states.find(c) != std::string_view::npos;
    });
    if ((all && !now.empty()) || std::chrono::steady_clock::now() > deadline) return now;
    sched_yield();
  }
}

// Without a freezer (rlimit, none) a task is stopped with SIGSTOP to its
// process group, and goes on with SIGCONT to finish as it would have.
TEST(ExecutorSuspendTest, WithoutAFreezerSigstopStopsTheGroupAndResumeLetsItFinish) {
  Harness h(MakeRlimitIsolator());
  testing::Fifo fifo;
  // A shell with a child in its group; it exits 0 once the child has ended.
  // (No loop of short commands: a shell waiting in vfork for a stopped
  // child shows as D, not T.)
  const std::string script = "sleep 1000 & echo $! > " + fifo.path() + "; wait $!; exit 0";
  auto pid = h.Start(Task(1, {"sh", "-c", script}));
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  const pid_t child = atoi(fifo.Read().c_str());
  ASSERT_GT(child, 0);
  const TaskId id{7, 1};

  Result<SuspendHow> how = h.executor().Suspend(id);
  ASSERT_TRUE(how.ok()) << how.status().ToString();
  EXPECT_EQ(*how, SuspendHow::kStopSignal);
  const std::string stopped = WaitGroupStates(*pid, "T");
  EXPECT_GE(std::count(stopped.begin(), stopped.end(), 'T'), 2) << stopped;  // shell, sleep
  EXPECT_EQ(stopped.find_first_not_of("TZ"), std::string::npos) << stopped;
  // Suspended already: it stays so, and says how.
  how = h.executor().Suspend(id);
  ASSERT_TRUE(how.ok());
  EXPECT_EQ(*how, SuspendHow::kStopSignal);

  ASSERT_TRUE(h.executor().Resume(id).ok());
  const std::string running = WaitGroupStates(*pid, "SRD");
  EXPECT_EQ(running.find('T'), std::string::npos) << running;
  EXPECT_TRUE(h.executor().Resume(id).ok());  // not suspended: nothing to do
  ASSERT_EQ(kill(child, SIGTERM), 0);
  h.WaitFor(1);
  const TaskResult& r = h.results()[1];
  EXPECT_EQ(r.outcome, TaskOutcome::kSucceeded) << Describe(r);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.signal, 0);

  EXPECT_EQ(h.executor().Suspend(id).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(h.executor().Resume(id).code(), StatusCode::kNotFound);
}

// The first signal of a kill is the caller's; a stopped task gets it as it
// goes on, and its handler runs.
TEST(ExecutorSuspendTest, AStoppedTaskKilledWithSigusr1RunsItsHandler) {
  Harness h(MakeNoIsolator());
  testing::Fifo fifo;
  const std::string script =
      "trap 'echo got usr1 > $DROVER_OUTPUT_DIR/../x; exit 7' USR1; sleep 1000 & echo ready > " +
      fifo.path() + "; wait";
  auto pid = h.Start(Task(1, {"sh", "-c", script}));
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  ASSERT_EQ(fifo.Read(), "ready\n");  // the trap is set
  ASSERT_TRUE(h.executor().Suspend(TaskId{7, 1}).ok());
  const std::string stopped = WaitGroupStates(*pid, "T");
  ASSERT_EQ(stopped.find_first_not_of("TZ"), std::string::npos) << stopped;

  ASSERT_TRUE(h.executor().Kill(TaskId{7, 1}, Seconds(30), SIGUSR1).ok());
  h.WaitFor(1);
  const TaskResult& r = h.results()[1];
  EXPECT_EQ(r.outcome, TaskOutcome::kCanceled);
  EXPECT_EQ(r.exit_code, 7) << Describe(r);
  EXPECT_EQ(ReadFile(r.dirs.task + "/x"), "got usr1\n");
  EXPECT_LT(r.wall, Seconds(20));  // the handler ended it, not the grace
}

TEST(ExecutorSuspendTest, AStoppedTaskKilledWithoutGraceDiesWithItsGroup) {
  Harness h(MakeNoIsolator());
  testing::Fifo fifo;
  auto pid = h.Start(Task(1, {"sh", "-c", "sleep 1000 & echo $! > " + fifo.path() + "; wait"}));
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  const pid_t child = atoi(fifo.Read().c_str());
  ASSERT_GT(child, 0);
  const int fd = PidfdOpen(child);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(h.executor().Suspend(TaskId{7, 1}).ok());
  ASSERT_TRUE(h.executor().Kill(TaskId{7, 1}, Duration(0)).ok());
  h.WaitFor(1);
  EXPECT_EQ(h.results()[1].outcome, TaskOutcome::kCanceled);
  EXPECT_EQ(h.results()[1].signal, 9);
  pollfd p{fd, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 10000), 1) << "the stopped child survived";
  close(fd);
  const std::string left = GroupStates(*pid);
  EXPECT_EQ(left.find_first_not_of('Z'), std::string::npos) << left;  // dead, if not yet reaped
}

}  // namespace
}  // namespace drover::worker

namespace drover::worker {
namespace {

using testing::Harness;
using testing::ReadFile;
using testing::Task;

TEST(ExecutorDirsTest, EveryDirectoryInTheEnvironmentExistsWhenTheTaskStarts) {
  Harness h(MakeNoIsolator());
  // Without inputs: the shared empty inputs directory.
  const std::string probe =
      "for d in \"$DROVER_OUTPUT_DIR\" \"$DROVER_CHECKPOINT_DIR\" \"$DROVER_INPUTS\" \"$PWD\"; do "
      "test -d \"$d\" && test -w \"$(dirname \"$DROVER_RESULT\")\" || { echo missing $d; exit 1; }; "
      "done; ls -A \"$DROVER_INPUTS\" | wc -l";
  TaskResult r = h.Run(Task(1, {"sh", "-c", probe}));
  EXPECT_EQ(r.outcome, TaskOutcome::kSucceeded) << ReadFile(r.dirs.stdout_path);
  EXPECT_EQ(ReadFile(r.dirs.stdout_path), "0\n");
  EXPECT_EQ(r.dirs.inputs, h.dir() + "/work/.no-inputs");

  // With inputs: its own inputs/, filled before Start.
  Result<TaskDirs> dirs = h.executor().PrepareDirs(TaskId{7, 2}, 1, /*with_inputs=*/true);
  ASSERT_TRUE(dirs.ok()) << dirs.status().ToString();
  EXPECT_EQ(dirs->inputs, dirs->task + "/inputs");
  std::ofstream(dirs->inputs + "/7.1") << "seven\n";
  r = h.Run(Task(2, {"sh", "-c", "cat $DROVER_INPUTS/7.1"}));
  EXPECT_EQ(r.outcome, TaskOutcome::kSucceeded);
  EXPECT_EQ(r.dirs.inputs, dirs->inputs);
  EXPECT_EQ(ReadFile(r.dirs.stdout_path), "seven\n");
}

TEST(ExecutorDirsTest, AJobDirectoryRemovedMeanwhileIsMadeAgain) {
  Harness h(MakeNoIsolator());
  ASSERT_EQ(h.Run(Task(1, {"true"})).outcome, TaskOutcome::kSucceeded);
  std::filesystem::remove_all(h.dir() + "/work/7");
  TaskResult r = h.Run(Task(2, {"sh", "-c", "echo here"}));
  EXPECT_EQ(r.outcome, TaskOutcome::kSucceeded) << Describe(r);
  EXPECT_EQ(ReadFile(r.dirs.stdout_path), "here\n");
}

TEST(ExecutorDirsTest, OutputFilesAppearWithTheFirstByte) {
  Harness h(MakeNoIsolator());
  TaskResult r = h.Run(Task(1, {"true"}));
  EXPECT_EQ(r.outcome, TaskOutcome::kSucceeded);
  EXPECT_FALSE(std::filesystem::exists(r.dirs.stdout_path));
  EXPECT_FALSE(std::filesystem::exists(r.dirs.stderr_path));

  r = h.Run(Task(2, {"sh", "-c", "printf x >&2"}));
  EXPECT_FALSE(std::filesystem::exists(r.dirs.stdout_path));
  EXPECT_EQ(ReadFile(r.dirs.stderr_path), "x");

  // A one-byte cap: the byte, then the marker for what came after it.
  TaskSpec capped = Task(3, {"sh", "-c", "printf xy"});
  capped.output_cap_bytes = 1;
  r = h.Run(capped);
  EXPECT_TRUE(r.stdout_truncated);
  EXPECT_EQ(ReadFile(r.dirs.stdout_path), "x\n[drover: output truncated at 1 B]\n");
}

TEST(ExecutorDirsTest, OpenOutputFilesMakesARunningTasksFilesNow) {
  Harness h(MakeNoIsolator());
  testing::Fifo ready;
  testing::TempDir gate;
  const std::string go = gate.path() + "/go";
  mkfifo(go.c_str(), 0600);
  // The task says it runs, then waits (silent) until the test opens `go`.
  ASSERT_TRUE(
      h.Start(Task(1, {"sh", "-c", "echo ready > " + ready.path() + "; read x < " + go +
                                       "; echo late"}))
          .ok());
  ASSERT_EQ(ready.Read(), "ready\n");
  const std::string task = h.dir() + "/work/7/1.1";
  EXPECT_FALSE(std::filesystem::exists(task + "/stdout"));
  ASSERT_TRUE(h.executor().OpenOutputFiles(TaskId{7, 1}).ok());
  EXPECT_TRUE(std::filesystem::exists(task + "/stdout"));
  EXPECT_TRUE(std::filesystem::exists(task + "/stderr"));
  EXPECT_EQ(ReadFile(task + "/stdout"), "");
  int fd = open(go.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "\n", 1), 1);
  close(fd);
  h.WaitFor(1);
  EXPECT_EQ(ReadFile(task + "/stdout"), "late\n");
  EXPECT_EQ(h.executor().OpenOutputFiles(TaskId{7, 1}).code(), StatusCode::kNotFound);
}

TEST(ExecutorDirsTest, ATaskUserOwnsItsLateFilesButNotTheSharedInputs) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch users";
  passwd* nobody = getpwnam("nobody");
  if (nobody == nullptr) GTEST_SKIP() << "no user \"nobody\" on this machine";
  ExecutorOptions options;
  options.task_user = "nobody";
  Harness h(MakeNoIsolator(), options);
  TaskResult r = h.Run(Task(1, {"sh", "-c", "echo hi; touch $DROVER_INPUTS/x 2>/dev/null || echo no"}));
  EXPECT_EQ(r.outcome, TaskOutcome::kSucceeded);
  EXPECT_EQ(ReadFile(r.dirs.stdout_path), "hi\nno\n");
  struct stat st;
  ASSERT_EQ(stat(r.dirs.stdout_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, nobody->pw_uid);
  ASSERT_EQ(stat(r.dirs.checkpoint.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, nobody->pw_uid);
}

// Task data is its user's alone: nobody else may list or read a
// task's directories, output or results.
TEST(ExecutorDirsTest, TaskDataIsReadableByTheTasksUserOnly) {
  Harness h(MakeNoIsolator());
  TaskSpec spec = Task(1, {"sh", "-c", "echo out; echo err >&2; echo 1 > $DROVER_RESULT"});
  TaskResult r = h.Run(spec);
  ASSERT_EQ(r.outcome, TaskOutcome::kSucceeded) << Describe(r);
  auto mode = [](const std::string& path) {
    struct stat st {};
    EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
    return st.st_mode & 07777;
  };
  EXPECT_EQ(mode(r.dirs.task), 0700u);
  EXPECT_EQ(mode(r.dirs.output), 0700u);
  EXPECT_EQ(mode(r.dirs.checkpoint), 0700u);
  EXPECT_EQ(mode(r.dirs.stdout_path), 0600u);
  EXPECT_EQ(mode(r.dirs.stderr_path), 0600u);
  // Above them: passable, not listable.
  EXPECT_EQ(mode(h.dir() + "/work/7"), 0711u);
  EXPECT_EQ(mode(h.dir() + "/work"), 0711u);
  Result<TaskDirs> with_inputs = h.executor().PrepareDirs(TaskId{7, 2}, 1, /*with_inputs=*/true);
  ASSERT_TRUE(with_inputs.ok()) << with_inputs.status().ToString();
  EXPECT_EQ(mode(with_inputs->inputs), 0700u);
}

TEST(ExecutorDirsTest, ATaskUsersDataIsItsOwnAndNoOneElsesToRead) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch users";
  passwd* nobody = getpwnam("nobody");
  if (nobody == nullptr) GTEST_SKIP() << "no user \"nobody\" on this machine";
  ExecutorOptions options;
  options.task_user = "nobody";
  Harness h(MakeNoIsolator(), options);
  TaskResult r = h.Run(Task(1, {"sh", "-c", "echo hi; echo 1 > $DROVER_RESULT"}));
  ASSERT_EQ(r.outcome, TaskOutcome::kSucceeded) << Describe(r);
  for (const std::string& path : {r.dirs.task, r.dirs.output, r.dirs.checkpoint,
                                  r.dirs.stdout_path}) {
    struct stat st {};
    ASSERT_EQ(stat(path.c_str(), &st), 0) << path;
    EXPECT_EQ(st.st_uid, nobody->pw_uid) << path;
    EXPECT_EQ(st.st_mode & 077, 0u) << path << " is open to others";
  }
}

}  // namespace
}  // namespace drover::worker
