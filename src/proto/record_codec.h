// The journal's record codec: core::Record <-> bytes.
//
// The store frames and checksums records (length + CRC); this file only
// decides what one record's bytes are. Task and outcome records, three or
// four per task that runs, are a compact binary form (record_binary.h);
// job and checkpoint records are one compact JSON object with "v"
// (kRecordVersion) and "type" ("job", "checkpoint"), a JobRecord holding
// the full JobSpec in its canonical JSON form (job_file.h). DecodeRecord
// reads both forms, and JSON task and outcome records too (journals
// written before the binary form, and EncodeRecordJson's). Times and
// durations are integer microseconds and round-trip exactly.
//
// Decoding never throws; a record it cannot read is kDataLoss with a message
// naming the field (`task record: attempt: expected an unsigned integer`),
// and a record of a newer version is kFailedPrecondition.
//
// Thread safety: pure functions.
#ifndef DROVER_PROTO_RECORD_CODEC_H_
#define DROVER_PROTO_RECORD_CODEC_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "core/records.h"

namespace drover::proto {

inline constexpr uint32_t kRecordVersion = 1;

// Never fails. A JobRecord with a null spec encodes "spec": null and
// decodes back to a null spec.
std::string EncodeRecord(const core::Record& record);
// Every record as JSON (what journals held before the binary form), for
// tests and for a person reading a record.
std::string EncodeRecordJson(const core::Record& record);

Result<core::Record> DecodeRecord(std::string_view bytes);

}  // namespace drover::proto

#endif  // DROVER_PROTO_RECORD_CODEC_H_
