#include "proto/binary_fields.h"

#include <string>
#include <tuple>

namespace drover::proto::internal {

// A field added to TaskOutcome must be added to PutOutcome and GetOutcome:
// the size stands for the field list.
static_assert(sizeof(core::TaskOutcome) == 264, "a TaskOutcome field to encode in PutOutcome");

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

void PutPlacement(BinaryWriter& w, const std::vector<uint32_t>& cores,
                  const std::vector<core::GpuGrant>& gpus) {
  w.Unsigned(cores.size());
  for (uint32_t c : cores) w.Unsigned(c);
  w.Unsigned(gpus.size());
  for (const core::GpuGrant& g : gpus) {
    w.Unsigned(g.index);
    w.Signed(g.share);
    w.Unsigned(g.mem_bytes);
  }
}

bool GetPlacement(BinaryReader& r, std::vector<uint32_t>* cores, std::vector<core::GpuGrant>* gpus,
                  bool check_shares) {
  size_t n = 0;
  if (!r.Count(&n, "cores", kNoLimit)) return false;
  cores->resize(n);
  for (uint32_t& c : *cores) {
    if (!r.UnsignedAs(&c, "cores", UINT32_MAX)) return false;
  }
  if (!r.Count(&n, "gpus", kNoLimit)) return false;
  gpus->resize(n);
  for (core::GpuGrant& g : *gpus) {
    if (!r.UnsignedAs(&g.index, "gpus.index", UINT32_MAX) || !r.Signed(&g.share, "gpus.share") ||
        !r.Unsigned(&g.mem_bytes, "gpus.mem_bytes")) {
      return false;
    }
    if (check_shares && (g.share <= 0 || g.share > core::kWholeGpu)) {
      return r.Fail("gpus.share", "must be 1 to " + std::to_string(core::kWholeGpu));
    }
  }
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

}  // namespace drover::proto::internal
