// libFuzzer target: both message decoders, both text frame decoders (one
// message or a batch) and both binary frame decoders (messages_binary.h) on
// arbitrary bytes. Anything they accept must re-encode and decode to equal
// messages.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "proto/messages.h"
#include "proto/messages_binary.h"

// What a binary frame decoder accepts has a binary form, and its messages
// decode as they were.
template <typename Decode>
void CheckBinaryRoundTrip(std::string_view text, Decode decode) {
  auto f = decode(text);
  if (!f.ok()) return;
  std::vector<std::string> messages;
  for (const auto& m : *f) {
    drover::proto::WireMessage wire = drover::proto::EncodeForPeer(m, true);
    if (!wire.binary) std::abort();
    messages.push_back(std::move(wire.bytes));
  }
  auto again = decode(drover::proto::EncodeBinaryFrame(messages));
  if (!again.ok() || !(*again == *f)) std::abort();
}

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
  // Frames: one message or a batch of them, re-encoded as a batch.
  if (auto f = drover::proto::DecodeWorkerFrame(text); f.ok()) {
    std::vector<std::string> texts;
    for (const auto& m : *f) texts.push_back(drover::proto::Encode(m));
    auto again = drover::proto::DecodeWorkerFrame(drover::proto::EncodeBatch(texts));
    if (!again.ok() || !(*again == *f)) std::abort();
  }
  if (auto f = drover::proto::DecodeServerFrame(text); f.ok()) {
    std::vector<std::string> texts;
    for (const auto& m : *f) texts.push_back(drover::proto::Encode(m));
    auto again = drover::proto::DecodeServerFrame(drover::proto::EncodeBatch(texts));
    if (!again.ok() || !(*again == *f)) std::abort();
  }
  // Binary frames, re-encoded as binary frames.
  CheckBinaryRoundTrip(text, drover::proto::DecodeWorkerBinaryFrame);
  CheckBinaryRoundTrip(text, drover::proto::DecodeServerBinaryFrame);
  return 0;
}
