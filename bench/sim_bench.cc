// drover sim's benchmark (bench/README.md).
//
// Quality: the standard synthetic trace (seed 1, 2,000 tasks, load 1.2 for
// 16 GPUs) is replayed on the standard cluster (4 workers x 32 cores,
// 256 GiB, 4 A100 80 GiB) under every policy, each against the makespan
// lower bound of the same trace (the baseline: no schedule can be shorter).
// One JSON line per policy.
//
// Speed: a trace of --big-tasks tasks (1,000,000) from the same generator is
// written to a scratch file, then read and replayed as `drover sim` does.
// The baseline, in the same run, is reading the trace alone; the replay is
// printed beside it, and as a fraction of the 30 s it may take. CPU
// time is printed too: on a shared machine it is steadier than wall time.
//
// The last line has the default policy's figures at top level:
//   {"bench":"sim","makespan_ratio_to_bound":...,"idle_while_waiting_gpu_s":...,
//    "reservation_idle_gpu_s":...,"big_tasks":...,"big_total_s":...,...}
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/placement.h"
#include "sim/bound.h"
#include "sim/cluster.h"
#include "sim/generate.h"
#include "sim/report.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace drover::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;
using Json = nlohmann::ordered_json;

double SecondsSince(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

int Fail(const std::string& what, const Status& s) {
  std::cerr << "sim_bench: " << what << ": " << s.ToString() << "\n";
  return 1;
}

struct Args {
  uint64_t seed = 1;
  uint64_t tasks = 2000;
  uint64_t big_tasks = 1'000'000;
  std::string scratch = "/tmp";
};

int Run(const Args& args) {
  const sim::Cluster cluster = sim::StandardCluster();
  const uint32_t gpus = static_cast<uint32_t>(cluster.TotalGpus());

  // Quality on the standard trace, every policy.
  std::ostringstream text;
  if (Status s = sim::WriteSyntheticTrace(sim::GenerateOptions{args.seed, args.tasks, gpus, 1.2},
                                          text);
      !s.ok()) {
    return Fail("generate", s);
  }
  std::istringstream in(text.str());
  Result<sim::Trace> trace = sim::ParseTrace(in, "standard");
  if (!trace.ok()) return Fail("parse", trace.status());
  const sim::MakespanBound bound = sim::ComputeBound(*trace, cluster);
  Json standard;
  for (core::PolicyKind policy :
       {core::PolicyKind::kSpread, core::PolicyKind::kPack, core::PolicyKind::kRoundRobin}) {
    const auto t0 = SteadyClock::now();
    Result<sim::SimResult> r = sim::Simulate(*trace, cluster, sim::SimOptions{policy, true});
    if (!r.ok()) return Fail("replay", r.status());
    Json line = Json::parse(sim::FormatJson(*r, bound));
    line["wall_s"] = SecondsSince(t0);
    std::cout << line.dump() << std::endl;
    if (policy == core::PolicyKind::kSpread) standard = line;
  }

  // Speed on a big trace, read from a file as `drover sim` reads it.
  Json out;
  out["bench"] = "sim";
  out["policy"] = standard["policy"];
  out["tasks"] = args.tasks;
  out["makespan_s"] = standard["makespan_s"];
  out["lower_bound_s"] = standard["lower_bound_s"];
  out["makespan_ratio_to_bound"] = standard["makespan_ratio_to_bound"];
  out["plain_bound_s"] = standard["plain_bound_s"];
  out["makespan_ratio_to_plain_bound"] = standard["makespan_ratio_to_plain_bound"];
  out["idle_while_waiting_gpu_s"] = standard["idle_while_waiting_gpu_s"];
  out["reservation_idle_gpu_s"] = standard["reservation_idle_gpu_s"];
  out["wait_mean_s"] = standard["wait_mean_s"];
  out["gpu_utilization"] = standard["gpu_utilization"];
  if (args.big_tasks > 0) {
    const std::string path =
        args.scratch + "/drover-sim-bench-" + std::to_string(getpid()) + ".jsonl";
    {
      std::ofstream file(path, std::ios::trunc);
      if (!file) return Fail("scratch", Unavailable("cannot write " + path));
      Status s =
          sim::WriteSyntheticTrace(sim::GenerateOptions{args.seed, args.big_tasks, gpus, 1.2}, file);
      if (!s.ok()) return Fail("generate", s);
    }
    const auto t0 = SteadyClock::now();
    const double c0 = ProcessCpuSeconds();
    Result<sim::Trace> big = sim::LoadTrace(path);
    std::remove(path.c_str());
    if (!big.ok()) return Fail("load", big.status());
    const double load_s = SecondsSince(t0);
    const double load_cpu_s = ProcessCpuSeconds() - c0;
    const auto t1 = SteadyClock::now();
    const double c1 = ProcessCpuSeconds();
    Result<sim::SimResult> r = sim::Simulate(*big, cluster, sim::SimOptions{});
    if (!r.ok()) return Fail("replay", r.status());
    const double replay_s = SecondsSince(t1);
    const double replay_cpu_s = ProcessCpuSeconds() - c1;
    const double total_s = load_s + replay_s;
    out["big_tasks"] = args.big_tasks;
    out["big_events"] = r->events;
    out["big_load_s"] = load_s;
    out["big_replay_s"] = replay_s;
    out["big_total_s"] = total_s;
    out["big_cpu_s"] = load_cpu_s + replay_cpu_s;
    out["big_replay_vs_load"] = load_s > 0 ? replay_s / load_s : 0;
    out["big_total_vs_30s_limit"] = total_s / 30.0;
    out["big_makespan_ratio_to_bound"] =
        r->makespan_s / sim::ComputeBound(*big, cluster).value_s();
    out["big_idle_while_waiting_gpu_s"] = r->idle_other_gpu_s;
  }
  std::cout << out.dump() << std::endl;
  return 0;
}

}  // namespace
}  // namespace drover::bench

int main(int argc, char** argv) {
  drover::bench::Args args;
  CLI::App app("drover sim benchmark: the standard trace against its bound, and a big replay");
  app.add_option("--seed", args.seed, "Seed of both traces")->capture_default_str();
  app.add_option("--tasks", args.tasks, "Tasks of the standard trace")->capture_default_str();
  app.add_option("--big-tasks", args.big_tasks, "Tasks of the timed replay (0: skip it)")
      ->capture_default_str();
  app.add_option("--scratch", args.scratch, "Directory for the big trace file")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return drover::bench::Run(args);
}
