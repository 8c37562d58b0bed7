// Internal to drover_proto: JSON of the core's value types that both the
// worker messages and the journal records carry. Exact: durations and times
// are integer microseconds.
//
// Thread safety: pure functions.
#ifndef DROVER_PROTO_CORE_JSON_H_
#define DROVER_PROTO_CORE_JSON_H_

#include <string>

#include "core/model.h"
#include "core/resources.h"
#include "proto/json_util.h"

namespace drover::proto::internal {

Json GpuGrantJson(const core::GpuGrant& grant);
bool ReadGpuGrant(const Json& j, const std::string& path, core::GpuGrant* out, DecodeContext& ctx);

// {"exit_code", "signal", "oom_killed", "wall_us", "cpu_us",
//  "peak_mem_bytes", "result"} and, where counted, "io_read_bytes" and
// "io_write_bytes"; a result longer than core::kMaxResultBytes is rejected.
Json OutcomeJson(const core::TaskOutcome& outcome);
// An optional count of bytes at `key` into `out` (absent: left as is).
bool ReadOptionalBytes(ObjectReader& r, std::string_view key, std::optional<uint64_t>* out);
bool ReadOutputFile(const Json& j, const std::string& path, core::OutputFile* out,
                    DecodeContext& ctx);
// A list of worker ids (an outcome's `replicas`): at most kMaxReplicas, none 0.
bool ReadWorkerIds(const Json& j, const std::string& path, std::vector<WorkerId>* out,
                   DecodeContext& ctx);
bool ReadOutcome(const Json& j, const std::string& path, core::TaskOutcome* out,
                 DecodeContext& ctx);

// {"cpu_cores", "mem_bytes", "gpus":[{"index","uuid","model","memory_bytes"}],
//  "counters", "labels"}; the name is left to the caller.
Json WorkerResourcesJson(const core::WorkerResources& resources);
bool ReadWorkerResources(const Json& j, const std::string& path, core::WorkerResources* out,
                         DecodeContext& ctx);

// {"cpu_percent", "mem_used_bytes", "gpus":[{"index","util_percent","mem_used_bytes"}]}
Json UtilizationJson(const core::WorkerUtilization& utilization);
bool ReadUtilization(const Json& j, const std::string& path, core::WorkerUtilization* out,
                     DecodeContext& ctx);

bool ReadUint32List(const Json& j, const std::string& path, std::vector<uint32_t>* out,
                    DecodeContext& ctx);

}  // namespace drover::proto::internal

#endif  // DROVER_PROTO_CORE_JSON_H_
