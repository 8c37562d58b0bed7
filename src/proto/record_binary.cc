#include "proto/record_binary.h"

#include <cstdint>
#include <utility>

#include "proto/binary_fields.h"
#include "proto/binary_io.h"

namespace drover::proto::internal {
namespace {

// A field added to one of these must be added to its encoding below (and
// its decoding): the sizes stand for the field lists.
static_assert(sizeof(core::TaskRecord) == 168, "a TaskRecord field to encode in EncodeBinary");
static_assert(sizeof(core::OutcomeRecord) == 296, "an OutcomeRecord field to encode");

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
  if (!GetTask(r, &t->task, "task") || !r.Byte(&state, "state") ||
      !r.UnsignedAs(&t->attempt, "attempt", UINT32_MAX) ||
      !r.UnsignedAs(&t->worker, "worker", UINT32_MAX) || !GetTime(r, &t->at, "at") ||
      !r.String(&t->reason, "reason", kNoLimit) ||
      !r.UnsignedAs(&t->failures, "failures", UINT32_MAX)) {
    return false;
  }
  if (state >= core::kTaskStateCount) {
    return r.Fail("state", "unknown task state " + std::to_string(state));
  }
  t->state = static_cast<core::TaskState>(state);
  if (!GetPlacement(r, &t->cores, &t->gpus, /*check_shares=*/false)) return false;
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
  PutPlacement(w, t.cores, t.gpus);
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
