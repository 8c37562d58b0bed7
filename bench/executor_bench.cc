// B2a (BENCH.md): spawn and reap N /bin/true through the worker's executor,
// one at a time, with isolation none, rlimit and cgroup1, each against a
// bare posix_spawn + waitpid loop in the same process (batches of 50 of
// each, alternating, so that changing load on a shared machine weighs on
// both alike).
//
//   build/bench/executor_bench [TASKS]        (default 2000; run as root
//                                              for cgroup1)
//
// Prints a line per isolation, a JSON line per isolation, and as its last
// line one JSON object with all of them. An isolation that cannot be set
// up here (cgroup1 without root) is reported as skipped with the reason.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "worker/exec/event_loop.h"
#include "worker/exec/executor.h"
#include "worker/exec/isolator.h"

extern char** environ;

namespace drover::worker {
namespace {

using Clock = std::chrono::steady_clock;

// Total µs for `n` bare posix_spawn + waitpid of /bin/true.
double BareBatchUs(int n) {
  char arg0[] = "/bin/true";
  char* argv[] = {arg0, nullptr};
  auto start = Clock::now();
  for (int i = 0; i < n; ++i) {
    pid_t pid;
    if (posix_spawn(&pid, "/bin/true", nullptr, nullptr, argv, environ) != 0) {
      perror("posix_spawn");
      exit(1);
    }
    int status;
    waitpid(pid, &status, 0);
  }
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

struct Figures {
  double exec_us = 0;  // per task
  double bare_us = 0;  // per task
  // From the child's first step (StartTimes::spawned, the worker's
  // started_at) to Spawn returning after its setup and execve
  // (StartTimes::exec_done): how much earlier started_at is than the
  // "exec returned" time it replaced. Nearest-rank percentiles.
  int64_t spawn_to_exec_p50_us = 0;
  int64_t spawn_to_exec_p99_us = 0;
};

int64_t Percentile(std::vector<int64_t> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(q * static_cast<double>(v.size()) + 0.999999);
  return v[std::min(v.size(), std::max<size_t>(rank, 1)) - 1];
}

// Runs `tasks` /bin/true through a fresh executor, one at a time, in
// batches alternating with batches of the bare loop, so that load that
// comes and goes on a shared machine weighs on both sides alike.
Result<Figures> Measure(IsolationMode mode, int tasks, const std::string& workdir) {
  IsolatorOptions iso;
  iso.mode = mode;
  ASSIGN_OR_RETURN(std::unique_ptr<Isolator> isolator, MakeIsolator(iso));
  ASSIGN_OR_RETURN(std::unique_ptr<EpollLoop> loop, EpollLoop::Create());
  ExecutorOptions options;
  options.workdir = workdir;
  options.run_as_root = true;
  ASSIGN_OR_RETURN(std::unique_ptr<Executor> executor,
                   Executor::Create(options, loop.get(), std::move(isolator)));
  TaskSpec spec;
  spec.id = TaskId{1, 0};
  spec.argv = {"/bin/true"};
  int done = 0;
  int failed = 0;
  auto on_done = [&](const TaskResult& r) {
    ++done;
    if (r.outcome != TaskOutcome::kSucceeded) ++failed;
  };
  constexpr int kBatch = 50;
  double exec_total = 0;
  double bare_total = 0;
  std::vector<int64_t> spawn_to_exec;
  spawn_to_exec.reserve(tasks);
  for (int first = 0; first < tasks; first += kBatch) {
    const int n = std::min(kBatch, tasks - first);
    bare_total += BareBatchUs(n);
    auto start = Clock::now();
    for (int i = first; i < first + n; ++i) {
      spec.id.index = static_cast<uint32_t>(i);
      StartTimes times;
      ASSIGN_OR_RETURN(pid_t pid, executor->Start(spec, on_done, &times));
      (void)pid;
      spawn_to_exec.push_back((times.exec_done - times.spawned).count());
      RETURN_IF_ERROR(loop->RunUntil([&] { return done == i + 1; }, Seconds(60)));
    }
    exec_total += std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  }
  if (failed > 0) return Internal(std::to_string(failed) + " tasks failed");
  return Figures{exec_total / tasks, bare_total / tasks, Percentile(spawn_to_exec, 0.5),
                 Percentile(spawn_to_exec, 0.99)};
}

int Main(int argc, char** argv) {
  int tasks = 2000;
  if (argc > 2 || (argc == 2 && (std::sscanf(argv[1], "%d", &tasks) != 1 || tasks <= 0))) {
    std::fprintf(stderr, "usage: executor_bench [TASKS]  (TASKS: a positive count, default 2000; got '%s')\n",
                 argc > 1 ? argv[1] : "");
    return 2;
  }
  // Task directories go under $TMPDIR (default /tmp): directory creation is
  // part of each task's cost, and its speed depends on the file system.
  const char* tmpdir = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmpdir != nullptr && *tmpdir ? tmpdir : "/tmp") +
                     "/drover-executor-bench-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) {
    std::fprintf(stderr, "executor_bench: cannot create %s: %s\n", tmpl.c_str(), strerror(errno));
    return 1;
  }
  const std::string root = tmpl;
  std::string combined;
  for (IsolationMode mode :
       {IsolationMode::kNone, IsolationMode::kRlimit, IsolationMode::kCgroup1}) {
    const std::string name(IsolationModeName(mode));
    const std::string workdir = root + "/" + name;
    Result<Figures> figures = Measure(mode, tasks, workdir);
    std::error_code ec;
    std::filesystem::remove_all(workdir, ec);
    if (!figures.ok()) {
      printf("%-8s skipped: %s\n", name.c_str(), figures.status().ToString().c_str());
      continue;
    }
    const double exec = figures->exec_us;
    const double bare = figures->bare_us;
    const double ratio = exec / bare;
    printf("%-8s executor %8.1f us/task   bare posix_spawn %8.1f us/task   ratio %.3f   "
           "spawned->exec done p50 %lld us p99 %lld us\n",
           name.c_str(), exec, bare, ratio, static_cast<long long>(figures->spawn_to_exec_p50_us),
           static_cast<long long>(figures->spawn_to_exec_p99_us));
    char json[384];
    snprintf(json, sizeof json,
             "{\"bench\":\"B2a\",\"isolation\":\"%s\",\"tasks\":%d,\"per_task_us\":%.1f,"
             "\"bare_per_task_us\":%.1f,\"ratio_vs_bare\":%.3f,\"spawn_to_exec_p50_us\":%lld,"
             "\"spawn_to_exec_p99_us\":%lld}",
             name.c_str(), tasks, exec, bare, ratio,
             static_cast<long long>(figures->spawn_to_exec_p50_us),
             static_cast<long long>(figures->spawn_to_exec_p99_us));
    printf("%s\n", json);
    combined += (combined.empty() ? "" : ",") + std::string(json);
  }
  std::error_code ec;
  std::filesystem::remove_all(root, ec);
  printf("{\"bench\":\"B2a\",\"tasks\":%d,\"results\":[%s]}\n", tasks, combined.c_str());
  fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace drover::worker

int main(int argc, char** argv) { return drover::worker::Main(argc, argv); }
