#include "proto/record_binary.h"

#include <cstdint>
#include <limits>
#include <tuple>
#include <utility>

#include "proto/binary_io.h"

namespace drover::proto::internal {
namespace {

// A field added to one of these must be added to its encoding below (and
// its decoding): the sizes stand for the field lists.
static_assert(sizeof(core::TaskRecord) == 168, "a TaskRecord field to encode in EncodeBinary");
static_assert(sizeof(core::TaskOutcome) == 264, "a TaskOutcome field to encode in PutOutcome");
static_assert(sizeof(core::OutcomeRecord) == 296, "an OutcomeRecord field to encode");

constexpr size_t kNoLimit = std::numeric_limits<size_t>::max();

void PutTask(BinaryWriter& w, TaskId t) {
  w.Unsigned(t.job);
  w.Unsigned(t.index);
}

bool GetTask(BinaryReader& r, TaskId* t, const char* what) {
  return r.UnsignedAs(&t->job, what, UINT64_MAX) && r.UnsignedAs(&t->index, what, UINT32_MAX);
}

bool GetTime(BinaryReader& r, Time* t, const char* what) {
  int64_t us = 0;
  if (!r.Signed(&us, what)) return false;
  *t = TimeFromMicros(us);
  return true;
}

bool GetDuration(BinaryReader& r, Duration* d, const char* what) {
  int64_t us = 0;
  if (!r.Signed(&us, what)) return false;
  *d = Duration(us);
  return true;
}

void PutOutcome(BinaryWriter& w, const core::TaskOutcome& o) {
  w.Signed(o.exit_code);
  w.Signed(o.signal);
  w.Byte(o.oom_killed ? 1 : 0);
  w.Signed(o.usage.wall.count());
  w.Signed(o.usage.cpu.count());
  w.Unsigned(o.usage.peak_mem_bytes);
  w.String(o.result);
  w.String(o.reason);
  w.Unsigned(o.outputs.size());
  for (const core::OutputFile& f : o.outputs) {
    w.String(f.name);
    w.Unsigned(f.size);
    w.String(f.sha256);
  }
  w.Unsigned(o.outputs_on);
  w.Unsigned(o.replicas.size());
  for (WorkerId id : o.replicas) w.Unsigned(id);
  PutTask(w, o.cached_from);
  w.Signed(ToMicros(o.cached_ended));
  w.Signed(o.cached_ran.count());
  w.Byte(o.uncached ? 1 : 0);
  const core::TaskUsage& u = o.usage;
  w.Byte((u.io_read_bytes ? 1 : 0) | (u.io_write_bytes ? 2 : 0));
  if (u.io_read_bytes) w.Unsigned(*u.io_read_bytes);
  if (u.io_write_bytes) w.Unsigned(*u.io_write_bytes);
  w.String(o.image_digest);
}

bool GetBool(BinaryReader& r, bool* v, const char* what) {
  uint8_t b = 0;
  if (!r.Byte(&b, what)) return false;
  if (b > 1) return r.Fail(what, "expected 0 or 1, found " + std::to_string(b));
  *v = b == 1;
  return true;
}

bool GetOutcome(BinaryReader& r, core::TaskOutcome* o, uint8_t version) {
  int64_t exit_code = 0;
  int64_t signal = 0;
  if (!r.Signed(&exit_code, "exit_code") || !r.Signed(&signal, "signal")) return false;
  if (exit_code < INT32_MIN || exit_code > INT32_MAX || signal < INT32_MIN || signal > INT32_MAX) {
    return r.Fail("exit_code", "out of range");
  }
  o->exit_code = static_cast<int32_t>(exit_code);
  o->signal = static_cast<int32_t>(signal);
  size_t outputs = 0;
  if (!GetBool(r, &o->oom_killed, "oom_killed") || !GetDuration(r, &o->usage.wall, "wall") ||
      !GetDuration(r, &o->usage.cpu, "cpu") ||
      !r.Unsigned(&o->usage.peak_mem_bytes, "peak_mem_bytes") ||
      !r.String(&o->result, "result", core::kMaxResultBytes) ||
      !r.String(&o->reason, "reason", kNoLimit) ||
      !r.Count(&outputs, "outputs", core::kMaxOutputFiles)) {
    return false;
  }
  o->outputs.resize(outputs);
  for (core::OutputFile& f : o->outputs) {
    if (!r.String(&f.name, "outputs.name", kNoLimit) || !r.Unsigned(&f.size, "outputs.size") ||
        !r.String(&f.sha256, "outputs.sha256", 64)) {
      return false;
    }
    if (std::string problem = core::OutputNameProblem(f.name); !problem.empty()) {
      return r.Fail("outputs.name", problem);
    }
    if (!core::IsSha256Hex(f.sha256)) {
      return r.Fail("outputs.sha256", "expected 64 lower-case hex digits");
    }
  }
  size_t replicas = 0;
  if (!r.UnsignedAs(&o->outputs_on, "outputs_on", UINT32_MAX) ||
      !r.Count(&replicas, "replicas", core::kMaxReplicas)) {
    return false;
  }
  o->replicas.resize(replicas);
  for (WorkerId& id : o->replicas) {
    if (!r.UnsignedAs(&id, "replicas", UINT32_MAX)) return false;
    if (id == 0) return r.Fail("replicas", "is not a worker id (0)");
  }
  if (!GetTask(r, &o->cached_from, "cached_from") ||
      !GetTime(r, &o->cached_ended, "cached_ended") ||
      !GetDuration(r, &o->cached_ran, "cached_ran") || !GetBool(r, &o->uncached, "uncached")) {
    return false;
  }
  if (version < 2) return true;
  uint8_t io = 0;
  if (!r.Byte(&io, "io")) return false;
  if (io > 3) return r.Fail("io", "expected 0 to 3, found " + std::to_string(io));
  for (auto [bit, count, what] : {std::tuple{1, &o->usage.io_read_bytes, "io_read_bytes"},
                                  std::tuple{2, &o->usage.io_write_bytes, "io_write_bytes"}}) {
    if ((io & bit) == 0) continue;
    uint64_t n = 0;
    if (!r.Unsigned(&n, what)) return false;
    *count = n;
  }
  if (version < 3) return true;
  // "sha256:" and 64 hex digits; a little room for another algorithm.
  return r.String(&o->image_digest, "image_digest", 256);
}

Result<core::Record> Finish(BinaryReader& r, const char* type, core::Record record) {
  if (r.ok() && !r.AtEnd()) {
    r.Fail("record", "has bytes left after byte " + std::to_string(r.position()));
  }
  if (!r.ok()) return DataLoss(std::string(type) + " record (binary): " + r.error());
  return record;
}

bool GetTaskRecord(BinaryReader& r, core::TaskRecord* t) {
  uint8_t state = 0;
  uint8_t kind = 0;
  size_t cores = 0;
  size_t gpus = 0;
  if (!GetTask(r, &t->task, "task") || !r.Byte(&state, "state") ||
      !r.UnsignedAs(&t->attempt, "attempt", UINT32_MAX) ||
      !r.UnsignedAs(&t->worker, "worker", UINT32_MAX) || !GetTime(r, &t->at, "at") ||
      !r.String(&t->reason, "reason", kNoLimit) ||
      !r.UnsignedAs(&t->failures, "failures", UINT32_MAX) || !r.Count(&cores, "cores", kNoLimit)) {
    return false;
  }
  if (state >= core::kTaskStateCount) {
    return r.Fail("state", "unknown task state " + std::to_string(state));
  }
  t->state = static_cast<core::TaskState>(state);
  t->cores.resize(cores);
  for (uint32_t& c : t->cores) {
    if (!r.UnsignedAs(&c, "cores", UINT32_MAX)) return false;
  }
  if (!r.Count(&gpus, "gpus", kNoLimit)) return false;
  t->gpus.resize(gpus);
  for (core::GpuGrant& g : t->gpus) {
    if (!r.UnsignedAs(&g.index, "gpus.index", UINT32_MAX) || !r.Signed(&g.share, "gpus.share") ||
        !r.Unsigned(&g.mem_bytes, "gpus.mem_bytes")) {
      return false;
    }
  }
  if (!GetTask(r, &t->after, "after") ||
      !r.UnsignedAs(&t->after_attempt, "after_attempt", UINT32_MAX) ||
      !GetTime(r, &t->started, "started") || !r.Byte(&kind, "kind")) {
    return false;
  }
  if (kind >= core::kEndKindCount) {
    return r.Fail("kind", "unknown reason kind " + std::to_string(kind));
  }
  t->kind = static_cast<core::EndKind>(kind);
  return true;
}

}  // namespace

std::string EncodeBinary(const core::TaskRecord& t) {
  std::string out;
  out.reserve(48 + t.reason.size() + 2 * t.cores.size());
  BinaryWriter w(&out);
  w.Byte(kBinaryTaskRecord);
  w.Byte(kBinaryRecordVersion);
  PutTask(w, t.task);
  w.Byte(static_cast<uint8_t>(t.state));
  w.Unsigned(t.attempt);
  w.Unsigned(t.worker);
  w.Signed(ToMicros(t.at));
  w.String(t.reason);
  w.Unsigned(t.failures);
  w.Unsigned(t.cores.size());
  for (uint32_t c : t.cores) w.Unsigned(c);
  w.Unsigned(t.gpus.size());
  for (const core::GpuGrant& g : t.gpus) {
    w.Unsigned(g.index);
    w.Signed(g.share);
    w.Unsigned(g.mem_bytes);
  }
  PutTask(w, t.after);
  w.Unsigned(t.after_attempt);
  w.Signed(ToMicros(t.started));
  w.Byte(static_cast<uint8_t>(t.kind));
  return out;
}

std::string EncodeBinary(const core::OutcomeRecord& o) {
  std::string out;
  out.reserve(64 + o.outcome.result.size() + o.outcome.reason.size() +
              100 * o.outcome.outputs.size());
  BinaryWriter w(&out);
  w.Byte(kBinaryOutcomeRecord);
  w.Byte(kBinaryRecordVersion);
  PutTask(w, o.task);
  w.Unsigned(o.attempt);
  w.Signed(ToMicros(o.at));
  PutOutcome(w, o.outcome);
  return out;
}

Result<core::Record> DecodeBinaryRecord(std::string_view bytes) {
  BinaryReader r(bytes);
  uint8_t tag = 0;
  uint8_t version = 0;
  if (!r.Byte(&tag, "tag") || !r.Byte(&version, "version")) {
    return DataLoss("journal record (binary): " + r.error());
  }
  if (version == 0 || version > kBinaryRecordVersion) {
    return FailedPrecondition("journal record has binary version " + std::to_string(version) +
                              "; this build reads versions 1 to " +
                              std::to_string(kBinaryRecordVersion));
  }
  if (tag == kBinaryTaskRecord) {
    core::TaskRecord t;
    GetTaskRecord(r, &t);
    return Finish(r, "task", std::move(t));
  }
  if (tag == kBinaryOutcomeRecord) {
    core::OutcomeRecord o;
    if (GetTask(r, &o.task, "task") && r.UnsignedAs(&o.attempt, "attempt", UINT32_MAX) &&
        GetTime(r, &o.at, "at")) {
      GetOutcome(r, &o.outcome, version);
    }
    return Finish(r, "outcome", std::move(o));
  }
  return DataLoss("journal record has unknown binary tag " + std::to_string(tag));
}

}  // namespace drover::proto::internal
