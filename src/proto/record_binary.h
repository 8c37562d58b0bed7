// The compact binary form of the journal's hot records: TaskRecord and
// OutcomeRecord, three or four per task that runs, which as JSON cost the
// server a quarter of its CPU under load (bench/README.md, B6). A binary
// record starts with its tag byte (never '{', which starts a JSON record),
// then its form's version, then the fields in a fixed order (binary_io.h).
// Job and checkpoint records stay JSON: they are few, and a job's spec is
// best read by a person.
//
// Decoding checks what the JSON decoding checks (output names, digests,
// sizes, list limits, known states and reason kinds) and that every byte
// was used; a record it cannot read is kDataLoss naming the field.
//
// Thread safety: pure functions.
#ifndef DROVER_PROTO_RECORD_BINARY_H_
#define DROVER_PROTO_RECORD_BINARY_H_

#include <string>
#include <string_view>

#include "common/status.h"
#include "core/records.h"

namespace drover::proto::internal {

inline constexpr char kBinaryTaskRecord = 0x01;
inline constexpr char kBinaryOutcomeRecord = 0x02;
// 2: an outcome ends with its I/O byte counts (a byte of which are
// present, then each present one); version 1 records are read as without.
// 3: then the digest of its container image (a string, empty for none).
inline constexpr uint8_t kBinaryRecordVersion = 3;

inline bool IsBinaryRecord(std::string_view bytes) {
  return !bytes.empty() && (bytes[0] == kBinaryTaskRecord || bytes[0] == kBinaryOutcomeRecord);
}

std::string EncodeBinary(const core::TaskRecord& r);
std::string EncodeBinary(const core::OutcomeRecord& r);
// `bytes` must start with a binary tag (IsBinaryRecord).
Result<core::Record> DecodeBinaryRecord(std::string_view bytes);

}  // namespace drover::proto::internal

#endif  // DROVER_PROTO_RECORD_BINARY_H_
