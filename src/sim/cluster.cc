#include "sim/cluster.h"

#include <fstream>
#include <set>
#include <sstream>

#include "common/quantity.h"
#include "sim/json_fields.h"

namespace drover::sim {

namespace {

using internal::Json;

// Far beyond any real machine; keeps a typo from allocating millions of ids.
constexpr int64_t kMaxCores = 4096;
constexpr int64_t kMaxGpus = 64;
constexpr int64_t kMaxCount = 100000;

Result<std::vector<core::WorkerResources>> ReadEntry(const Json& entry) {
  RETURN_IF_ERROR(internal::CheckKeys(
      entry, {"name", "count", "cpus", "mem", "gpus", "gpu_model", "gpu_mem"}));
  std::string name = "w";
  if (auto it = entry.find("name"); it != entry.end()) {
    ASSIGN_OR_RETURN(name, internal::ReadString(*it, "name"));
    if (name.empty()) return InvalidArgument("name: must not be empty");
  }
  int64_t count = 1;
  if (auto it = entry.find("count"); it != entry.end()) {
    ASSIGN_OR_RETURN(count, internal::ReadInt(*it, "count", 1, kMaxCount));
  }
  auto cpus = entry.find("cpus");
  if (cpus == entry.end()) return InvalidArgument("cpus: missing (number of cores)");
  ASSIGN_OR_RETURN(int64_t cores, internal::ReadInt(*cpus, "cpus", 1, kMaxCores));
  auto mem = entry.find("mem");
  if (mem == entry.end()) return InvalidArgument("mem: missing");
  ASSIGN_OR_RETURN(uint64_t mem_bytes, internal::ReadBytes(*mem, "mem"));
  int64_t gpus = 0;
  if (auto it = entry.find("gpus"); it != entry.end()) {
    ASSIGN_OR_RETURN(gpus, internal::ReadInt(*it, "gpus", 0, kMaxGpus));
  }
  std::string model = "GPU";
  if (auto it = entry.find("gpu_model"); it != entry.end()) {
    ASSIGN_OR_RETURN(model, internal::ReadString(*it, "gpu_model"));
  }
  uint64_t gpu_mem = 80 * kGiB;
  if (auto it = entry.find("gpu_mem"); it != entry.end()) {
    ASSIGN_OR_RETURN(gpu_mem, internal::ReadBytes(*it, "gpu_mem"));
  }

  std::vector<core::WorkerResources> out;
  for (int64_t n = 1; n <= count; ++n) {
    core::WorkerResources w;
    w.name = count == 1 ? name : name + "-" + std::to_string(n);
    for (int64_t c = 0; c < cores; ++c) w.cpu_cores.push_back(static_cast<uint32_t>(c));
    w.mem_bytes = mem_bytes;
    for (int64_t g = 0; g < gpus; ++g) {
      w.gpus.push_back(core::GpuDevice{static_cast<uint32_t>(g),
                                       "GPU-" + w.name + "-" + std::to_string(g), model, gpu_mem});
    }
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace

uint64_t Cluster::TotalCores() const {
  uint64_t n = 0;
  for (const auto& w : workers) n += w.cpu_cores.size();
  return n;
}

uint64_t Cluster::TotalMemBytes() const {
  uint64_t n = 0;
  for (const auto& w : workers) n += w.mem_bytes;
  return n;
}

uint64_t Cluster::TotalGpus() const {
  uint64_t n = 0;
  for (const auto& w : workers) n += w.gpus.size();
  return n;
}

Result<Cluster> ParseCluster(std::string_view text, std::string_view name) {
  const std::string where(name);
  Result<Json> json = internal::ParseJsonText(text);
  if (!json.ok()) return json.status().WithContext(where);
  if (Status s = internal::CheckKeys(*json, {"workers"}); !s.ok()) return s.WithContext(where);
  auto list = json->find("workers");
  if (list == json->end() || !list->is_array() || list->empty()) {
    return InvalidArgument(where + ": workers: expected a non-empty list of workers");
  }
  Cluster cluster;
  std::set<std::string> names;
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string path = where + ": workers[" + std::to_string(i) + "]";
    Result<std::vector<core::WorkerResources>> entry = ReadEntry((*list)[i]);
    if (!entry.ok()) return entry.status().WithContext(path);
    for (core::WorkerResources& w : *entry) {
      if (!names.insert(w.name).second) {
        return InvalidArgument(path + ": name: worker \"" + w.name + "\" is defined twice");
      }
      cluster.workers.push_back(std::move(w));
    }
  }
  return cluster;
}

Result<Cluster> LoadCluster(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot open cluster " + path);
  std::stringstream text;
  text << in.rdbuf();
  return ParseCluster(text.str(), path);
}

Cluster StandardCluster() {
  return ParseCluster(R"({"workers":[{"name":"gpu","count":4,"cpus":32,"mem":"256GiB",)"
                      R"("gpus":4,"gpu_model":"NVIDIA A100-SXM4-80GB","gpu_mem":"80GiB"}]})",
                      "standard cluster")
      .value();
}

}  // namespace drover::sim
