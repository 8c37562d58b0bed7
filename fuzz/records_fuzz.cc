// libFuzzer target: the journal's record decoder (binary task and outcome
// records, JSON job and checkpoint records) on arbitrary bytes. A shared
// journal (a Redis stream) can be written by anyone who can reach the
// Redis, so the decoder must refuse what it cannot read without crashing,
// and anything it accepts must encode to bytes that decode and encode to
// the same bytes again.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "proto/record_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto record = drover::proto::DecodeRecord(bytes);
  if (!record.ok()) return 0;
  const std::string once = drover::proto::EncodeRecord(*record);
  auto again = drover::proto::DecodeRecord(once);
  if (!again.ok() || drover::proto::EncodeRecord(*again) != once) std::abort();
  return 0;
}
