#include "proto/record_codec.h"

#include <exception>
#include <memory>

#include "proto/core_json.h"
#include "proto/job_spec_json.h"
#include "proto/json_util.h"
#include "proto/record_binary.h"

namespace drover::proto {
namespace {

using internal::DecodeContext;
using internal::Json;
using internal::Need;
using internal::ObjectReader;

// Generous: a JobRecord carries a whole spec, itself limited to 16 MiB.
constexpr size_t kMaxRecordBytes = 64 * 1024 * 1024;
constexpr int kMaxRecordDepth = 64;

Json RecordJson(const core::JobRecord& r) {
  return Json{{"type", "job"},
              {"job", r.job},
              {"at_us", ToMicros(r.at)},
              {"spec", r.spec ? internal::JobSpecJson(*r.spec, /*compact=*/true) : Json()}};
}

Json RecordJson(const core::TaskRecord& r) {
  Json gpus = Json::array();
  for (const core::GpuGrant& g : r.gpus) gpus.push_back(internal::GpuGrantJson(g));
  Json j{{"type", "task"},
         {"task", r.task.ToString()},
         {"state", core::TaskStateName(r.state)},
         {"attempt", r.attempt},
         {"worker", r.worker},
         {"at_us", ToMicros(r.at)},
         {"reason", r.reason},
         {"failures", r.failures},
         {"cores", r.cores},
         {"gpus", std::move(gpus)}};
  if (r.after_attempt != 0) {
    j["after"] = r.after.ToString();
    j["after_attempt"] = r.after_attempt;
  }
  if (r.started != Time()) j["started_us"] = ToMicros(r.started);
  if (r.kind != core::EndKind::kNone) j["kind"] = core::EndKindName(r.kind);
  return j;
}

Json RecordJson(const core::OutcomeRecord& r) {
  return Json{{"type", "outcome"},
              {"task", r.task.ToString()},
              {"attempt", r.attempt},
              {"outcome", internal::OutcomeJson(r.outcome)},
              {"at_us", ToMicros(r.at)}};
}

Json RecordJson(const core::CheckpointRecord& r) {
  Json files = Json::array();
  for (const core::OutputFile& f : r.checkpoint.files) {
    files.push_back(Json{{"name", f.name}, {"size", f.size}, {"sha256", f.sha256}});
  }
  return Json{{"type", "checkpoint"},
              {"task", r.task.ToString()},
              {"attempt", r.checkpoint.attempt},
              {"worker", r.checkpoint.worker},
              {"at_us", ToMicros(r.checkpoint.saved_at)},
              {"files", std::move(files)}};
}

bool ReadState(ObjectReader& r, core::TaskState* out, DecodeContext& ctx) {
  std::string name;
  if (!r.String("state", &name)) return false;
  for (int i = 0; i < core::kTaskStateCount; ++i) {
    auto state = static_cast<core::TaskState>(i);
    if (core::TaskStateName(state) == name) {
      *out = state;
      return true;
    }
  }
  return ctx.Fail("state", "unknown task state \"" + name + "\"");
}

bool Read(ObjectReader& r, core::JobRecord* out, DecodeContext& ctx) {
  if (!r.Integer("job", &out->job) || !r.TimeMicros("at_us", &out->at)) return false;
  const Json* spec = r.Get("spec", Need::kOptional);
  if (!r.ok()) return false;
  if (spec == nullptr) return true;  // null spec
  DecodeContext spec_ctx;
  auto decoded = std::make_shared<core::JobSpec>();
  if (!internal::ReadJobSpec(*spec, decoded.get(), spec_ctx)) {
    return ctx.Fail(internal::JoinPath("spec", spec_ctx.path), spec_ctx.message);
  }
  out->spec = std::move(decoded);
  return true;
}

bool Read(ObjectReader& r, core::TaskRecord* out, DecodeContext& ctx) {
  if (!r.Task("task", &out->task) || !ReadState(r, &out->state, ctx) ||
      !r.Integer("attempt", &out->attempt) || !r.Integer("worker", &out->worker) ||
      !r.TimeMicros("at_us", &out->at) || !r.String("reason", &out->reason, Need::kOptional) ||
      !r.Integer("failures", &out->failures, Need::kOptional)) {
    return false;
  }
  if (const Json* cores = r.Get("cores", Need::kOptional)) {
    if (!internal::ReadUint32List(*cores, "cores", &out->cores, ctx)) return false;
  }
  if (const Json* gpus = r.Get("gpus", Need::kOptional)) {
    if (!internal::ReadVector<core::GpuGrant>(*gpus, "gpus", &out->gpus, ctx,
                                              internal::ReadGpuGrant)) {
      return false;
    }
  }
  if (r.Get("after", Need::kOptional) != nullptr) {
    if (!r.Task("after", &out->after) || !r.Integer("after_attempt", &out->after_attempt)) {
      return false;
    }
    if (out->after_attempt == 0) return ctx.Fail("after_attempt", "must be at least 1");
  }
  if (!r.TimeMicros("started_us", &out->started, Need::kOptional)) return false;
  std::string kind;
  if (!r.String("kind", &kind, Need::kOptional)) return false;
  if (!kind.empty()) {
    std::optional<core::EndKind> k = core::EndKindFromName(kind);
    if (!k) return ctx.Fail("kind", "unknown reason kind \"" + kind + "\"");
    out->kind = *k;
  }
  return r.ok();
}

bool Read(ObjectReader& r, core::OutcomeRecord* out, DecodeContext& ctx) {
  if (!r.Task("task", &out->task) || !r.Integer("attempt", &out->attempt)) return false;
  const Json* outcome = r.Get("outcome", Need::kRequired);
  return r.ok() && internal::ReadOutcome(*outcome, "outcome", &out->outcome, ctx) &&
         r.TimeMicros("at_us", &out->at);
}

bool Read(ObjectReader& r, core::CheckpointRecord* out, DecodeContext& ctx) {
  if (!r.Task("task", &out->task) || !r.Integer("attempt", &out->checkpoint.attempt) ||
      !r.Integer("worker", &out->checkpoint.worker) ||
      !r.TimeMicros("at_us", &out->checkpoint.saved_at)) {
    return false;
  }
  const Json* files = r.Get("files", Need::kRequired);
  return r.ok() &&
         internal::ReadVector<core::OutputFile>(*files, r.PathOf("files"), &out->checkpoint.files,
                                                ctx, internal::ReadOutputFile);
}

template <typename T>
Result<core::Record> ReadAs(ObjectReader& r, DecodeContext& ctx, std::string_view type) {
  T record{};
  if (!Read(r, &record, ctx)) {
    return DataLoss(std::string(type) + " record: " + ctx.Describe());
  }
  return core::Record(std::move(record));
}

Result<core::Record> Decode(std::string_view bytes) {
  Result<Json> parsed = internal::ParseJson(bytes, kMaxRecordBytes, kMaxRecordDepth);
  if (!parsed.ok()) return DataLoss("journal record: " + parsed.status().message());
  DecodeContext ctx;
  ObjectReader r(*parsed, "", ctx);
  uint32_t version = 0;
  std::string type;
  if (!r.Integer("v", &version) || !r.String("type", &type)) {
    return DataLoss("journal record: " + ctx.Describe());
  }
  if (version > kRecordVersion) {
    return FailedPrecondition("journal record has version " + std::to_string(version) +
                              "; this build reads up to version " + std::to_string(kRecordVersion));
  }
  if (type == "job") return ReadAs<core::JobRecord>(r, ctx, type);
  if (type == "task") return ReadAs<core::TaskRecord>(r, ctx, type);
  if (type == "outcome") return ReadAs<core::OutcomeRecord>(r, ctx, type);
  if (type == "checkpoint") return ReadAs<core::CheckpointRecord>(r, ctx, type);
  return DataLoss("journal record has unknown type \"" + type + "\"");
}

}  // namespace

std::string EncodeRecord(const core::Record& record) {
  if (const auto* t = std::get_if<core::TaskRecord>(&record)) return internal::EncodeBinary(*t);
  if (const auto* o = std::get_if<core::OutcomeRecord>(&record)) return internal::EncodeBinary(*o);
  return EncodeRecordJson(record);
}

std::string EncodeRecordJson(const core::Record& record) {
  Json j = std::visit([](const auto& r) { return RecordJson(r); }, record);
  j["v"] = kRecordVersion;
  return internal::Dump(j);
}

Result<core::Record> DecodeRecord(std::string_view bytes) {
  if (internal::IsBinaryRecord(bytes)) return internal::DecodeBinaryRecord(bytes);
  try {
    return Decode(bytes);
  } catch (const std::exception& e) {
    return DataLoss(std::string("journal record could not be decoded: ") + e.what());
  }
}

}  // namespace drover::proto
