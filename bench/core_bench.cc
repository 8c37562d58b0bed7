// B1 (BENCH.md): the scheduling core alone.
//
// Memory: one array job of --tasks tasks (90% cpus=1, 10% gpus=1, as two
// array groups) is submitted to a core with no workers, so every task stays
// queued; the heap and resident memory it took are measured.
// Speed: in a fresh core, --workers simulated workers (32 cores, 4 GPUs,
// 256 GiB) join, the same job is submitted, and a thin driver plays shell
// and workers until every task succeeded: each ClaimLeases is granted at
// once, each AssignTask is started and finished in the next round. The
// placement rate counts from Submit to the last finish. Every Handle call
// is real; the clock is simulated (one second per round, with a Tick, so
// lease renewal runs too).
//
// Baseline, in the same process: the same number of command and event
// structs (with their key and core vectors) pushed through an outbox and an
// event queue without a scheduler, i.e. the cost of the protocol itself.
//
// Each worker count runs in a child process, so resident memory starts
// clean. One JSON line per run, then a last line with all runs and the
// first run's figures at top level.
#include <malloc.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "common/time.h"
#include "core/scheduler.h"

namespace drover::bench {
namespace {

using namespace ::drover::core;  // the bench speaks the core's API throughout

using SteadyClock = std::chrono::steady_clock;

double SecondsSince(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

// CPU time of this thread: on a shared, loaded machine it is steadier than
// wall time, so both are printed.
double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

// Resident set size in bytes, from /proc/self/status.
uint64_t RssBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
  }
  return 0;
}

uint64_t HeapInUse() { return mallinfo2().uordblks + mallinfo2().hblkhd; }

std::shared_ptr<const JobSpec> ArrayJob(uint32_t tasks) {
  auto spec = std::make_shared<JobSpec>();
  spec->name = "b1";
  spec->user = "bench";
  const uint32_t gpu_tasks = tasks / 10;
  TaskGroupSpec cpu;
  cpu.name = "cpu";
  cpu.command = {"/bin/true", "{index}"};
  cpu.resources.cpus_milli = 1000;
  cpu.array = ArrayRange{0, tasks - gpu_tasks, 1};
  spec->groups.push_back(cpu);
  if (gpu_tasks > 0) {
    TaskGroupSpec gpu = cpu;
    gpu.name = "gpu";
    gpu.resources.gpus = kWholeGpu;
    gpu.array = ArrayRange{0, gpu_tasks, 1};
    spec->groups.push_back(gpu);
  }
  return spec;
}

WorkerResources BenchWorker(uint32_t n) {
  WorkerResources r;
  r.name = "sim-" + std::to_string(n);
  for (uint32_t c = 0; c < 32; ++c) r.cpu_cores.push_back(c);
  r.mem_bytes = uint64_t{256} << 30;
  for (uint32_t g = 0; g < 4; ++g) {
    r.gpus.push_back(GpuDevice{g, "GPU-" + std::to_string(n) + "-" + std::to_string(g),
                               "NVIDIA A100-SXM4-80GB", uint64_t{80} << 30});
  }
  return r;
}

// What the driver owes the core next: a grant, a start or a finish.
struct Pending {
  enum Kind : uint8_t { kGrant, kStart, kFinish } kind;
  TaskId task;
  uint32_t attempt;
};

struct RunResult {
  uint32_t workers = 0;
  uint32_t tasks = 0;
  uint64_t placements = 0;
  uint64_t events = 0;
  double join_s = 0;    // all workers joining an empty core
  double submit_s = 0;  // Submit, including the first wave of placements
  double submit_cpu_s = 0;
  double run_s = 0;
  double run_cpu_s = 0;
  double baseline_s = 0;
  double baseline_cpu_s = 0;
  uint64_t rss_delta = 0;
  uint64_t heap_delta = 0;
  uint64_t approx_bytes = 0;
  uint64_t peak_rss = 0;
};

// Moves the outbox's claims and assignments into `next`; the rest (records,
// state changes, renewals, releases) the shell would send elsewhere.
inline void Collect(Outbox& out, std::vector<Pending>& next, uint64_t& placements) {
  for (Command& c : out) {
    if (const auto* claim = std::get_if<ClaimLeases>(&c)) {
      ++placements;
      next.push_back(Pending{Pending::kGrant, claim->task, claim->attempt});
    } else if (const auto* assign = std::get_if<AssignTask>(&c)) {
      next.push_back(Pending{Pending::kStart, assign->task, assign->attempt});
      next.push_back(Pending{Pending::kFinish, assign->task, assign->attempt});
    }
  }
  out.clear();
}

// The protocol without the scheduler: per task, the commands the core emits
// (claim, 3 state changes and records, assign, release) and the 3 events
// the driver sends, through the same containers.
double Baseline(uint32_t tasks, double& cpu_s) {
  Outbox out;
  out.reserve(1024);
  std::vector<Pending> queue;
  queue.reserve(1024);
  uint64_t placements = 0;
  volatile uint64_t sink = 0;
  const auto t0 = SteadyClock::now();
  const double c0 = ThreadCpuSeconds();
  for (uint32_t i = 0; i < tasks; ++i) {
    const TaskId id{1, i};
    std::vector<LeaseKey> keys{LeaseKey{LeaseKind::kSlot, 1, 0, id}};
    out.push_back(ClaimLeases{id, 1, 1, keys, Seconds(30)});
    const TaskState path[] = {TaskState::kQueued, TaskState::kAssigned, TaskState::kRunning,
                              TaskState::kSucceeded};
    for (int s = 0; s < 3; ++s) {
      out.push_back(TaskStateChanged{id, path[s], path[s + 1], 1, {}});
      out.push_back(Persist{TaskRecord{id, path[s + 1], 1, 1, Time{}, {}, 0,
                                       s == 0 ? std::vector<uint32_t>{i % 32}
                                              : std::vector<uint32_t>{},
                                       {}}});
    }
    AssignTask assign;
    assign.task = id;
    assign.attempt = 1;
    assign.worker = 1;
    assign.cores = {i % 32};
    out.push_back(std::move(assign));
    out.push_back(ReleaseLeases{id, 1, 1, keys});
    Collect(out, queue, placements);
    for (const Pending& p : queue) sink = sink + p.attempt + p.kind;
    queue.clear();
  }
  (void)sink;
  cpu_s = ThreadCpuSeconds() - c0;
  return SecondsSince(t0);
}

// Memory of `tasks` queued array tasks: submitted to a core with no worker,
// so none is placed.
Status MeasureQueued(uint32_t tasks, RunResult& r) {
  SimulatedClock clock;
  Outbox out;
  std::shared_ptr<const JobSpec> spec = ArrayJob(tasks);
  auto scheduler = std::make_unique<Scheduler>();
  malloc_trim(0);
  const uint64_t rss0 = RssBytes();
  const uint64_t heap0 = HeapInUse();
  const uint64_t approx0 = scheduler->ApproxBytes();
  Result<JobId> job = scheduler->Submit(clock.Now(), spec, out);
  if (!job.ok()) return job.status();
  r.rss_delta = RssBytes() - rss0;
  r.heap_delta = HeapInUse() - heap0;
  r.approx_bytes = scheduler->ApproxBytes() - approx0;
  return Status::Ok();
}

// `timed_only`: skip the baseline and the memory measurement (for profiling
// the timed part alone).
Result<RunResult> RunOnce(uint32_t workers, uint32_t tasks, bool timed_only) {
  RunResult r;
  r.workers = workers;
  r.tasks = tasks;
  if (!timed_only) {
    r.baseline_s = Baseline(tasks, r.baseline_cpu_s);
    RETURN_IF_ERROR(MeasureQueued(tasks, r));
    malloc_trim(0);
  }

  SimulatedClock clock;
  Scheduler scheduler;
  Outbox out;
  out.reserve(1 << 16);
  std::vector<Pending> now_queue, next_queue;
  now_queue.reserve(1 << 20);
  next_queue.reserve(1 << 20);
  std::vector<WorkerResources> resources;
  resources.reserve(workers);
  for (uint32_t w = 1; w <= workers; ++w) resources.push_back(BenchWorker(w));
  std::shared_ptr<const JobSpec> spec = ArrayJob(tasks);

  // The pool first (nothing to place yet), then the job, then the loop.
  auto t0 = SteadyClock::now();
  for (uint32_t w = 1; w <= workers; ++w) {
    Status st = scheduler.Handle(clock.Now(), WorkerJoined{w, std::move(resources[w - 1])}, out);
    if (!st.ok()) return st;
    ++r.events;
    out.clear();
  }
  r.join_s = SecondsSince(t0);

  uint64_t finished = 0;
  t0 = SteadyClock::now();
  const double c0 = ThreadCpuSeconds();
  Result<JobId> job = scheduler.Submit(clock.Now(), spec, out);
  if (!job.ok()) return job.status();
  ++r.events;
  Collect(out, next_queue, r.placements);
  r.submit_s = SecondsSince(t0);
  r.submit_cpu_s = ThreadCpuSeconds() - c0;
  while (finished < tasks) {
    if (next_queue.empty()) return Internal("stalled with " + std::to_string(tasks - finished) + " tasks left");
    now_queue.swap(next_queue);
    clock.Advance(Seconds(1));
    Status st = scheduler.Handle(clock.Now(), Tick{}, out);
    if (!st.ok()) return st;
    out.clear();  // renewals only
    for (const Pending& p : now_queue) {
      switch (p.kind) {
        case Pending::kGrant:
          st = scheduler.Handle(clock.Now(), LeaseGranted{p.task, p.attempt}, out);
          break;
        case Pending::kStart:
          st = scheduler.Handle(clock.Now(), TaskStarted{p.task, p.attempt}, out);
          break;
        case Pending::kFinish:
          st = scheduler.Handle(clock.Now(), TaskFinished{p.task, p.attempt, {}}, out);
          ++finished;
          break;
      }
      if (!st.ok()) return st;
      Collect(out, next_queue, r.placements);
    }
    r.events += now_queue.size() + 1;
    now_queue.clear();
  }
  r.run_s = SecondsSince(t0);
  r.run_cpu_s = ThreadCpuSeconds() - c0;
  Result<JobInfo> info = scheduler.GetJob(*job);
  if (!info.ok()) return info.status();
  if (!info->done || info->counts[static_cast<int>(TaskState::kSucceeded)] != tasks) {
    return Internal("not every task succeeded");
  }
  r.peak_rss = RssBytes();
  return r;
}

std::string Json(const RunResult& r, bool with_bench) {
  char buf[1024];
  const double per_task = static_cast<double>(r.tasks);
  std::snprintf(
      buf, sizeof buf,
      "%s\"workers\":%u,\"tasks\":%u,\"placements_per_s\":%.0f,\"bytes_per_task\":%.1f,"
      "\"heap_bytes_per_task\":%.1f,\"approx_bytes_per_task\":%.1f,\"join_s\":%.3f,\"submit_s\":%.3f,"
      "\"run_s\":%.3f,\"events\":%llu,\"baseline_s\":%.3f,\"ratio_vs_baseline\":%.2f,"
      "\"peak_rss_mib\":%.0f,\"placements_per_cpu_s\":%.0f,\"run_cpu_s\":%.3f,"
      "\"baseline_cpu_s\":%.3f,\"cpu_ratio_vs_baseline\":%.2f,\"submit_cpu_s\":%.3f",
      with_bench ? "\"bench\":\"B1\"," : "", r.workers, r.tasks,
      static_cast<double>(r.placements) / r.run_s, r.rss_delta / per_task,
      r.heap_delta / per_task, r.approx_bytes / per_task, r.join_s, r.submit_s, r.run_s,
      static_cast<unsigned long long>(r.events), r.baseline_s, r.baseline_s > 0 ? r.run_s / r.baseline_s : 0.0,
      r.peak_rss / 1048576.0, static_cast<double>(r.placements) / r.run_cpu_s, r.run_cpu_s,
      r.baseline_cpu_s, r.baseline_cpu_s > 0 ? r.run_cpu_s / r.baseline_cpu_s : 0.0, r.submit_cpu_s);
  return buf;
}

// Runs one configuration in a child so its memory figures start clean;
// returns the child's JSON fields (without braces) or an error.
Result<std::string> RunInChild(uint32_t workers, uint32_t tasks) {
  int fds[2];
  if (pipe(fds) != 0) return Internal("pipe failed");
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) return Internal("fork failed");
  if (pid == 0) {
    close(fds[0]);
    Result<RunResult> r = RunOnce(workers, tasks, false);
    std::string line = r.ok() ? Json(*r, false) : "error: " + r.status().ToString();
    if (write(fds[1], line.data(), line.size()) < 0) _exit(2);
    _exit(r.ok() ? 0 : 1);
  }
  close(fds[1]);
  std::string line;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) line.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Internal("run with " + std::to_string(workers) + " workers failed: " + line);
  }
  return line;
}

int Main(int argc, char** argv) {
  CLI::App app{"B1: the scheduling core alone (BENCH.md)"};
  std::vector<uint32_t> workers{1000, 10000};
  uint32_t tasks = 1'000'000;
  app.add_option("--workers", workers, "worker counts, one run each")->delimiter(',');
  app.add_option("--tasks", tasks, "tasks in the array job (10% of them gpus=1)")
      ->check(CLI::Range(10u, 4'000'000'000u));
  bool timed_only = false;
  app.add_flag("--timed-only", timed_only,
               "run only the timed part, in this process, for a profiler (no baseline, no memory "
               "figures)");
  CLI11_PARSE(app, argc, argv);
  if (timed_only) {
    for (uint32_t w : workers) {
      Result<RunResult> r = RunOnce(w, tasks, true);
      if (!r.ok()) {
        std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
        return 1;
      }
      std::printf("{\"bench\":\"B1\",%s}\n", Json(*r, false).c_str());
    }
    return 0;
  }

  std::vector<std::string> runs;
  for (uint32_t w : workers) {
    Result<std::string> r = RunInChild(w, tasks);
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
      return 1;
    }
    std::printf("{\"bench\":\"B1\",%s}\n", r->c_str());
    runs.push_back(*r);
  }
  std::string last = "{\"bench\":\"B1\"," + runs.front() + ",\"runs\":[";
  for (size_t i = 0; i < runs.size(); ++i) last += (i ? ",{" : "{") + runs[i] + "}";
  last += "],\"goal_placements_per_s\":[1000000,300000],\"goal_bytes_per_task\":256}";
  std::printf("%s\n", last.c_str());
  return 0;
}

}  // namespace
}  // namespace drover::bench

int main(int argc, char** argv) { return drover::bench::Main(argc, argv); }
