// The fields the compact binary encodings share (the journal's hot records,
// record_binary.h, and the worker channel's binary frames,
// messages_binary.h): task ids, times, durations, booleans and a task's
// outcome, each written and read the same way in both. Internal.
//
// Thread safety: pure functions.
#ifndef DROVER_PROTO_BINARY_FIELDS_H_
#define DROVER_PROTO_BINARY_FIELDS_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/ids.h"
#include "common/time.h"
#include "core/model.h"
#include "core/resources.h"
#include "proto/binary_io.h"

namespace drover::proto::internal {

inline constexpr size_t kNoLimit = std::numeric_limits<size_t>::max();

void PutTask(BinaryWriter& w, TaskId t);
bool GetTask(BinaryReader& r, TaskId* t, const char* what);
bool GetTime(BinaryReader& r, Time* t, const char* what);
bool GetDuration(BinaryReader& r, Duration* d, const char* what);
bool GetBool(BinaryReader& r, bool* v, const char* what);

// A placement's cores and GPUs (a TaskRecord's, an Assignment's). With
// `check_shares`, a GPU share outside 1..core::kWholeGpu fails, as the JSON
// decoding of a message does.
void PutPlacement(BinaryWriter& w, const std::vector<uint32_t>& cores,
                  const std::vector<core::GpuGrant>& gpus);
bool GetPlacement(BinaryReader& r, std::vector<uint32_t>* cores, std::vector<core::GpuGrant>* gpus,
                  bool check_shares);

// A task's outcome, in the journal's form of `version` (record_binary.h:
// kBinaryRecordVersion); decoding checks what the JSON decoding checks
// (output names and digests, list limits, the result's size).
void PutOutcome(BinaryWriter& w, const core::TaskOutcome& o);
bool GetOutcome(BinaryReader& r, core::TaskOutcome* o, uint8_t version);

}  // namespace drover::proto::internal

#endif  // DROVER_PROTO_BINARY_FIELDS_H_
