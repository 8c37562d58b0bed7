// Cluster: the workers a trace is replayed on, read from a JSON file
// (docs/sim.md).
//
//   {"workers": [
//     {"name": "gpu", "count": 4, "cpus": 32, "mem": "256GiB",
//      "gpus": 4, "gpu_model": "NVIDIA A100-SXM4-80GB", "gpu_mem": "80GiB"}
//   ]}
//
// An entry with `count` N stands for N identical workers named name-1 ..
// name-N. Workers become core::WorkerResources with core ids 0..cpus-1 and
// GPU indices 0..gpus-1, exactly what a real worker would report.
//
// Thread safety: plain values; the parse functions are pure.
#ifndef DROVER_SIM_CLUSTER_H_
#define DROVER_SIM_CLUSTER_H_

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "core/resources.h"

namespace drover::sim {

struct Cluster {
  std::vector<core::WorkerResources> workers;  // worker id = index + 1

  uint64_t TotalCores() const;
  uint64_t TotalMemBytes() const;
  uint64_t TotalGpus() const;
};

// Parses the JSON text. `name` prefixes errors, which name the field path:
// "cluster.json: workers[1].mem: memory quantity \"4G\" is ambiguous ...".
// Errors (kInvalidArgument): invalid JSON, unknown or mistyped field, bad
// quantity, no workers, duplicate names.
Result<Cluster> ParseCluster(std::string_view text, std::string_view name);
// Reads `path` and parses it; kNotFound when it cannot be opened.
Result<Cluster> LoadCluster(const std::string& path);

// The cluster of the standard synthetic comparison (bench/sim_bench and
// docs/sim.md): 4 workers, each 32 cores, 256 GiB and 4 A100
// GPUs of 80 GiB.
Cluster StandardCluster();

}  // namespace drover::sim

#endif  // DROVER_SIM_CLUSTER_H_
