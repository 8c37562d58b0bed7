#include "proto/core_json.h"

namespace drover::proto::internal {

Json GpuGrantJson(const core::GpuGrant& grant) {
  return Json{{"index", grant.index}, {"share", grant.share}, {"mem_bytes", grant.mem_bytes}};
}

bool ReadGpuGrant(const Json& j, const std::string& path, core::GpuGrant* out, DecodeContext& ctx) {
  ObjectReader r(j, path, ctx);
  if (!r.Integer("index", &out->index) || !r.Integer("share", &out->share) ||
      !r.Integer("mem_bytes", &out->mem_bytes)) {
    return false;
  }
  if (out->share <= 0 || out->share > core::kWholeGpu) {
    return ctx.Fail(r.PathOf("share"), "must be 1 to " + std::to_string(core::kWholeGpu));
  }
  return true;
}

bool ReadOptionalBytes(ObjectReader& r, std::string_view key, std::optional<uint64_t>* out) {
  if (r.Get(key, Need::kOptional) == nullptr) return r.ok();
  uint64_t n = 0;
  if (!r.Integer(key, &n)) return false;
  *out = n;
  return true;
}

Json OutcomeJson(const core::TaskOutcome& outcome) {
  Json j{{"exit_code", outcome.exit_code},
         {"signal", outcome.signal},
         {"oom_killed", outcome.oom_killed},
         {"wall_us", outcome.usage.wall.count()},
         {"cpu_us", outcome.usage.cpu.count()},
         {"peak_mem_bytes", outcome.usage.peak_mem_bytes},
         {"result", outcome.result}};
  if (!outcome.reason.empty()) j["reason"] = outcome.reason;  // absent in older records
  if (outcome.usage.io_read_bytes) j["io_read_bytes"] = *outcome.usage.io_read_bytes;
  if (outcome.usage.io_write_bytes) j["io_write_bytes"] = *outcome.usage.io_write_bytes;
  if (!outcome.outputs.empty()) {
    Json files = Json::array();
    for (const core::OutputFile& f : outcome.outputs) {
      files.push_back(Json{{"name", f.name}, {"size", f.size}, {"sha256", f.sha256}});
    }
    j["outputs"] = std::move(files);
    if (outcome.outputs_on != 0) j["outputs_on"] = outcome.outputs_on;
    if (!outcome.replicas.empty()) j["replicas"] = outcome.replicas;
  }
  if (outcome.uncached) j["uncached"] = true;  // forgotten from the result cache
  if (!outcome.image_digest.empty()) j["image_digest"] = outcome.image_digest;
  if (outcome.cached_from.job != 0) {  // a result cache hit (absent in older records)
    j["cached_from"] = outcome.cached_from.ToString();
    j["cached_ended_us"] = ToMicros(outcome.cached_ended);
    j["cached_ran_us"] = outcome.cached_ran.count();
  }
  return j;
}

bool ReadWorkerIds(const Json& j, const std::string& path, std::vector<WorkerId>* out,
                   DecodeContext& ctx) {
  if (j.is_array() && j.size() > core::kMaxReplicas) {
    return ctx.Fail(path, "has " + std::to_string(j.size()) + " workers, more than " +
                              std::to_string(core::kMaxReplicas));
  }
  return ReadVector<WorkerId>(
      j, path, out, ctx, [](const Json& e, const std::string& p, WorkerId* id, DecodeContext& c) {
        uint64_t v = 0;
        if (!ReadUint64(e, p, UINT32_MAX, &v, c)) return false;
        if (v == 0) return c.Fail(p, "is not a worker id (0)");
        *id = static_cast<WorkerId>(v);
        return true;
      });
}

bool ReadOutputFile(const Json& j, const std::string& path, core::OutputFile* out,
                    DecodeContext& ctx) {
  ObjectReader r(j, path, ctx);
  if (!r.String("name", &out->name) || !r.Integer("size", &out->size) ||
      !r.String("sha256", &out->sha256)) {
    return false;
  }
  if (std::string problem = core::OutputNameProblem(out->name); !problem.empty()) {
    return ctx.Fail(r.PathOf("name"), problem);
  }
  if (!core::IsSha256Hex(out->sha256)) {
    return ctx.Fail(r.PathOf("sha256"), "expected 64 lower-case hex digits");
  }
  return true;
}

bool ReadOutcome(const Json& j, const std::string& path, core::TaskOutcome* out,
                 DecodeContext& ctx) {
  ObjectReader r(j, path, ctx);
  if (!r.Integer("exit_code", &out->exit_code) || !r.Integer("signal", &out->signal) ||
      !r.Bool("oom_killed", &out->oom_killed) || !r.Micros("wall_us", &out->usage.wall) ||
      !r.Micros("cpu_us", &out->usage.cpu) ||
      !r.Integer("peak_mem_bytes", &out->usage.peak_mem_bytes) ||
      !r.String("result", &out->result, Need::kOptional) ||
      !r.String("reason", &out->reason, Need::kOptional) ||
      !r.String("image_digest", &out->image_digest, Need::kOptional) ||
      !r.Integer("outputs_on", &out->outputs_on, Need::kOptional) ||
      !ReadOptionalBytes(r, "io_read_bytes", &out->usage.io_read_bytes) ||
      !ReadOptionalBytes(r, "io_write_bytes", &out->usage.io_write_bytes)) {
    return false;
  }
  if (const Json* files = r.Get("outputs", Need::kOptional)) {
    if (files->is_array() && files->size() > core::kMaxOutputFiles) {
      return ctx.Fail(r.PathOf("outputs"), "has " + std::to_string(files->size()) +
                                               " files, more than the limit of " +
                                               std::to_string(core::kMaxOutputFiles));
    }
    if (!ReadVector<core::OutputFile>(*files, r.PathOf("outputs"), &out->outputs, ctx,
                                      ReadOutputFile)) {
      return false;
    }
  }
  if (const Json* replicas = r.Get("replicas", Need::kOptional)) {
    if (!ReadWorkerIds(*replicas, r.PathOf("replicas"), &out->replicas, ctx)) return false;
  }
  if (!r.Bool("uncached", &out->uncached, Need::kOptional)) return false;
  if (r.Get("cached_from", Need::kOptional) != nullptr) {
    int64_t ended_us = 0;
    if (!r.Task("cached_from", &out->cached_from) ||
        !r.Integer("cached_ended_us", &ended_us, Need::kOptional) ||
        !r.Micros("cached_ran_us", &out->cached_ran, Need::kOptional)) {
      return false;
    }
    out->cached_ended = TimeFromMicros(ended_us);
  }
  if (out->result.size() > core::kMaxResultBytes) {
    return ctx.Fail(r.PathOf("result"), "is " + std::to_string(out->result.size()) +
                                            " bytes, more than the limit of " +
                                            std::to_string(core::kMaxResultBytes));
  }
  return true;
}

Json WorkerResourcesJson(const core::WorkerResources& resources) {
  Json gpus = Json::array();
  for (const core::GpuDevice& gpu : resources.gpus) {
    gpus.push_back(Json{{"index", gpu.index},
                        {"uuid", gpu.uuid},
                        {"model", gpu.model},
                        {"memory_bytes", gpu.memory_bytes}});
  }
  Json j{{"cpu_cores", resources.cpu_cores},
         {"mem_bytes", resources.mem_bytes},
         {"gpus", std::move(gpus)},
         {"counters", resources.counters},
         {"labels", resources.labels}};
  if (resources.ends_at) j["ends_at_us"] = ToMicros(*resources.ends_at);
  if (resources.private_network) j["private_network"] = true;
  if (resources.disk_free_bytes != 0) j["disk_free_bytes"] = resources.disk_free_bytes;
  if (!resources.container_runtime.empty()) j["container_runtime"] = resources.container_runtime;
  if (resources.container_gpus) j["container_gpus"] = true;
  return j;
}

bool ReadUint32List(const Json& j, const std::string& path, std::vector<uint32_t>* out,
                    DecodeContext& ctx) {
  return ReadVector<uint32_t>(j, path, out, ctx, ReadInteger<uint32_t>);
}

namespace {

bool ReadGpuDevice(const Json& j, const std::string& path, core::GpuDevice* out,
                   DecodeContext& ctx) {
  ObjectReader r(j, path, ctx);
  return r.Integer("index", &out->index) && r.String("uuid", &out->uuid, Need::kOptional) &&
         r.String("model", &out->model, Need::kOptional) &&
         r.Integer("memory_bytes", &out->memory_bytes, Need::kOptional);
}

bool ReadGpuUtilization(const Json& j, const std::string& path, core::GpuUtilization* out,
                        DecodeContext& ctx) {
  ObjectReader r(j, path, ctx);
  return r.Integer("index", &out->index) && r.Integer("util_percent", &out->util_percent) &&
         r.Integer("mem_used_bytes", &out->mem_used_bytes);
}

}  // namespace

bool ReadWorkerResources(const Json& j, const std::string& path, core::WorkerResources* out,
                         DecodeContext& ctx) {
  ObjectReader r(j, path, ctx);
  const Json* cores = r.Get("cpu_cores", Need::kRequired);
  if (!r.ok() || !ReadUint32List(*cores, r.PathOf("cpu_cores"), &out->cpu_cores, ctx)) return false;
  if (!r.Integer("mem_bytes", &out->mem_bytes)) return false;
  if (const Json* gpus = r.Get("gpus", Need::kOptional)) {
    if (!ReadVector<core::GpuDevice>(*gpus, r.PathOf("gpus"), &out->gpus, ctx, ReadGpuDevice)) {
      return false;
    }
  }
  if (const Json* counters = r.Get("counters", Need::kOptional)) {
    if (!ReadCounterMap(*counters, r.PathOf("counters"), &out->counters, ctx)) return false;
  }
  if (const Json* labels = r.Get("labels", Need::kOptional)) {
    if (!ReadStringMap(*labels, r.PathOf("labels"), &out->labels, ctx)) return false;
  }
  if (r.Get("ends_at_us", Need::kOptional) != nullptr) {
    Time ends;
    if (!r.TimeMicros("ends_at_us", &ends)) return false;
    out->ends_at = ends;
  }
  if (!r.Bool("private_network", &out->private_network, Need::kOptional) ||
      !r.Integer("disk_free_bytes", &out->disk_free_bytes, Need::kOptional) ||
      !r.String("container_runtime", &out->container_runtime, Need::kOptional) ||
      !r.Bool("container_gpus", &out->container_gpus, Need::kOptional)) {
    return false;
  }
  if (!r.ok()) return false;
  if (Status s = out->Validate(); !s.ok()) return ctx.Fail(path, s.message());
  return true;
}

Json UtilizationJson(const core::WorkerUtilization& utilization) {
  Json gpus = Json::array();
  for (const core::GpuUtilization& gpu : utilization.gpus) {
    gpus.push_back(Json{{"index", gpu.index},
                        {"util_percent", gpu.util_percent},
                        {"mem_used_bytes", gpu.mem_used_bytes}});
  }
  Json j{{"cpu_percent", utilization.cpu_percent},
         {"mem_used_bytes", utilization.mem_used_bytes},
         {"gpus", std::move(gpus)}};
  if (utilization.disk_free_bytes) j["disk_free_bytes"] = *utilization.disk_free_bytes;
  return j;
}

bool ReadUtilization(const Json& j, const std::string& path, core::WorkerUtilization* out,
                     DecodeContext& ctx) {
  ObjectReader r(j, path, ctx);
  if (!r.Integer("cpu_percent", &out->cpu_percent) ||
      !r.Integer("mem_used_bytes", &out->mem_used_bytes)) {
    return false;
  }
  if (r.Get("disk_free_bytes", Need::kOptional) != nullptr) {
    uint64_t free = 0;
    if (!r.Integer("disk_free_bytes", &free)) return false;
    out->disk_free_bytes = free;
  }
  if (const Json* gpus = r.Get("gpus", Need::kOptional)) {
    return ReadVector<core::GpuUtilization>(*gpus, r.PathOf("gpus"), &out->gpus, ctx,
                                            ReadGpuUtilization);
  }
  return r.ok();
}

}  // namespace drover::proto::internal
