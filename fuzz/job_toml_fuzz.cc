// libFuzzer target: ParseJobToml on arbitrary bytes. A spec it accepts must
// survive the JSON round trip unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "proto/job_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto spec = drover::proto::ParseJobToml(text, "fuzz.toml");
  if (spec.ok()) {
    auto again = drover::proto::JobSpecFromJson(drover::proto::JobSpecToJson(*spec));
    if (!again.ok() || !(*again == *spec)) std::abort();
  }
  return 0;
}
