// `drover up` on a machine with GPUs (the project's fake NVML library):
// its local workers must not offer the same GPU twice, so no GPU is ever
// given to two running tasks at once.
#include <signal.h>

#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "cluster.h"

namespace drover::testing {
namespace {

struct Interval {
  std::string task;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

// Reads the ledger the tasks wrote ("TASK DEVICES start|end NS" lines) into
// intervals per GPU; devices are CUDA_VISIBLE_DEVICES, comma separated.
std::map<std::string, std::vector<Interval>> ReadLedger(const std::string& path,
                                                        size_t* gpu_runs) {
  std::map<std::string, std::map<std::string, Interval>> open;  // gpu -> task -> interval
  std::map<std::string, std::vector<Interval>> out;
  std::ifstream in(path);
  std::string line;
  *gpu_runs = 0;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string task, devices, what;
    int64_t ns = 0;
    if (!(fields >> task >> devices >> what >> ns)) {
      ADD_FAILURE() << "bad ledger line: " << line;
      continue;
    }
    if (devices == "-") continue;  // a CPU-only task
    if (what == "start") ++*gpu_runs;
    std::stringstream list(devices);
    for (std::string gpu; std::getline(list, gpu, ',');) {
      if (what == "start") {
        open[gpu][task] = Interval{task, ns, 0};
      } else {
        Interval i = open[gpu][task];
        i.end_ns = ns;
        out[gpu].push_back(i);
        open[gpu].erase(task);
      }
    }
  }
  for (const auto& [gpu, left] : open) {
    for (const auto& [task, i] : left) ADD_FAILURE() << task << " on GPU " << gpu << " never ended";
  }
  return out;
}

TEST(GpuUpTest, LocalWorkersNeverShareAGpu) {
  Cluster c;
  Process up({c.binary(), "up", "--workers", "2", "--port", "0", "--state-dir", c.dir() + "/state",
              "--access-file", c.access_file(), "--isolation", "none"},
             {"FAKE_NVML_DEVICES=2", "LD_LIBRARY_PATH=" + std::string(FAKE_NVML_DIR),
              "DROVER_LOCK_DIR=" + c.dir()});
  ASSERT_TRUE(up.WaitForLine("drover: listening on", In(kStartTimeout))) << up.output();
  // Each local worker offers one of the two GPUs.
  EXPECT_EQ(up.output().find("2x A100"), std::string::npos) << up.output();

  const std::string ledger = c.dir() + "/ledger";
  const std::string record =
      "echo \"$DROVER_TASK_ID ${CUDA_VISIBLE_DEVICES:--} start $(date +%s%N)\" >> " + ledger +
      "; sleep 0.05; echo \"$DROVER_TASK_ID ${CUDA_VISIBLE_DEVICES:--} end $(date +%s%N)\" >> " +
      ledger;
  nlohmann::json command = {"sh", "-c", record};
  const std::string file = c.WriteFile(
      "mixed.toml", "name = \"mixed\"\n"
                    "[[task]]\nid = \"gpu\"\narray = \"0-29\"\ncommand = " + command.dump() +
                        "\nresources = { gpus = 1 }\n"
                        "[[task]]\nid = \"cpu\"\narray = \"0-19\"\ncommand = " + command.dump() +
                        "\n");
  RunResult run = c.Drover({"run", "--plain", file});
  ASSERT_EQ(run.status, 0) << run.output << up.output();

  size_t gpu_runs = 0;
  std::map<std::string, std::vector<Interval>> by_gpu = ReadLedger(ledger, &gpu_runs);
  EXPECT_EQ(gpu_runs, 30u);
  EXPECT_EQ(by_gpu.size(), 2u) << "both GPUs used";
  for (auto& [gpu, runs] : by_gpu) {
    std::sort(runs.begin(), runs.end(),
              [](const Interval& a, const Interval& b) { return a.start_ns < b.start_ns; });
    for (size_t i = 1; i < runs.size(); ++i) {
      EXPECT_GE(runs[i].start_ns, runs[i - 1].end_ns)
          << "GPU " << gpu << " given to " << runs[i - 1].task << " and " << runs[i].task
          << " at once";
    }
  }
  up.Signal(SIGTERM);
  EXPECT_EQ(up.Wait(In(kStartTimeout)), 0) << up.output();
}

// Two `drover worker` processes started by hand on one machine: the second
// does not offer the GPUs the first holds, and says so.
TEST(GpuUpTest, ASecondWorkerOnTheMachineDoesNotOfferTheFirstsGpus) {
  Cluster c;
  c.StartServer();
  const std::vector<std::string> env = {"FAKE_NVML_DEVICES=2",
                                        "LD_LIBRARY_PATH=" + std::string(FAKE_NVML_DIR),
                                        "DROVER_LOCK_DIR=" + c.dir()};
  Process& first = c.StartWorker("first", {}, env);
  EXPECT_NE(first.output().find("2x A100"), std::string::npos) << first.output();
  Process& second = c.StartWorker("second", {}, env);
  EXPECT_NE(second.output().find("no GPU"), std::string::npos) << second.output();
  EXPECT_NE(second.output().find("GPU 0 (GPU-fake-0000) is offered by another drover worker"),
            std::string::npos)
      << second.output();
  nlohmann::json workers = c.Get("/api/v1/workers");
  size_t gpus = 0;
  for (const nlohmann::json& w : workers["workers"]) gpus += w["gpus"].size();
  EXPECT_EQ(gpus, 2u) << workers.dump(2);
}

}  // namespace
}  // namespace drover::testing
