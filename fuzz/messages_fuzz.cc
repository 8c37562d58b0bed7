// libFuzzer target: both message decoders on arbitrary bytes. Anything they
// accept must re-encode and decode to an equal message.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "proto/messages.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto m = drover::proto::DecodeWorkerMessage(text); m.ok()) {
    auto again = drover::proto::DecodeWorkerMessage(drover::proto::Encode(*m));
    if (!again.ok() || !(*again == *m)) std::abort();
  }
  if (auto m = drover::proto::DecodeServerMessage(text); m.ok()) {
    auto again = drover::proto::DecodeServerMessage(drover::proto::Encode(*m));
    if (!again.ok() || !(*again == *m)) std::abort();
  }
  return 0;
}
