// Batch frames (messages.h): several messages in one text frame.
#include <exception>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "proto/json_util.h"
#include "proto/messages.h"
#include "proto/messages_internal.h"

namespace drover::proto {
namespace {

using internal::DecodeContext;
using internal::Json;
using internal::Need;
using internal::ObjectReader;

Result<WorkerMessage> DecodeJson(const Json& j, std::type_identity<WorkerMessage>) {
  return internal::DecodeWorkerMessageJson(j);
}
Result<ServerMessage> DecodeJson(const Json& j, std::type_identity<ServerMessage>) {
  return internal::DecodeServerMessageJson(j);
}

// One message, or each message of a batch frame.
template <typename Variant>
Result<std::vector<Variant>> DecodeFrame(std::string_view text) {
  ASSIGN_OR_RETURN(Json j, internal::ParseJson(text, kMaxMessageBytes, kMaxNestingDepth));
  std::vector<Variant> out;
  const bool batch = j.is_object() && j.contains("type") && j.at("type").is_string() &&
                     j.at("type").get_ref<const std::string&>() == "batch";
  if (!batch) {
    ASSIGN_OR_RETURN(Variant one, DecodeJson(j, std::type_identity<Variant>{}));
    out.push_back(std::move(one));
    return out;
  }
  DecodeContext ctx;
  ObjectReader r(j, "", ctx);
  uint32_t version = 0;
  if (!r.Integer("v", &version)) return InvalidArgument("batch: " + ctx.Describe());
  if (version != kProtocolVersion) {
    return FailedPrecondition("message \"batch\" has protocol version " + std::to_string(version) +
                              "; this build speaks version " + std::to_string(kProtocolVersion));
  }
  const Json* messages = r.Get("messages", Need::kRequired);
  if (messages == nullptr) return InvalidArgument("batch: " + ctx.Describe());
  if (!messages->is_array()) return InvalidArgument("batch: messages: expected an array");
  if (messages->empty() || messages->size() > kMaxBatchMessages) {
    return InvalidArgument("batch: messages: has " + std::to_string(messages->size()) +
                           " messages; a batch holds 1 to " + std::to_string(kMaxBatchMessages));
  }
  out.reserve(messages->size());
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& m = (*messages)[i];
    if (m.is_object() && m.contains("type") && m.at("type") == "batch") {
      return InvalidArgument("batch: messages[" + std::to_string(i) + "]: a batch is not nested");
    }
    Result<Variant> one = DecodeJson(m, std::type_identity<Variant>{});
    if (!one.ok()) {
      return Status(one.status().code(),
                    "batch: messages[" + std::to_string(i) + "]: " + one.status().message());
    }
    out.push_back(std::move(*one));
  }
  return out;
}

template <typename Variant>
Result<std::vector<Variant>> DecodeFrameSafely(std::string_view text) {
  try {
    return DecodeFrame<Variant>(text);
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("message could not be decoded: ") + e.what());
  }
}

}  // namespace

namespace {
static_assert(kProtocolVersion == 1, "kBatchHead names the protocol version");
constexpr std::string_view kBatchHead = R"({"v":1,"type":"batch","messages":[)";
constexpr std::string_view kBatchTail = "]}";
}  // namespace

std::string EncodeBatch(const std::vector<std::string>& texts) {
  size_t bytes = kBatchHead.size() + kBatchTail.size();
  for (const std::string& t : texts) bytes += t.size() + 1;
  std::string out;
  out.reserve(bytes);
  out.append(kBatchHead);
  for (size_t i = 0; i < texts.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.append(texts[i]);
  }
  out.append(kBatchTail);
  return out;
}

bool BatchFits(size_t texts, size_t bytes, size_t next_bytes) {
  return texts < kMaxBatchMessages &&
         kBatchHead.size() + kBatchTail.size() + bytes + texts + next_bytes + 1 <= kMaxMessageBytes;
}

std::vector<std::string> FramesOf(std::vector<std::string> texts) {
  std::vector<std::string> frames;
  std::vector<std::string> frame;
  size_t bytes = 0;
  auto close = [&] {
    frames.push_back(frame.size() == 1 ? std::move(frame.front()) : EncodeBatch(frame));
    frame.clear();
    bytes = 0;
  };
  for (std::string& text : texts) {
    if (!frame.empty() && !BatchFits(frame.size(), bytes, text.size())) close();
    bytes += text.size();
    frame.push_back(std::move(text));
  }
  if (!frame.empty()) close();
  return frames;
}

Result<std::vector<WorkerMessage>> DecodeWorkerFrame(std::string_view text) {
  return DecodeFrameSafely<WorkerMessage>(text);
}
Result<std::vector<ServerMessage>> DecodeServerFrame(std::string_view text) {
  return DecodeFrameSafely<ServerMessage>(text);
}

}  // namespace drover::proto
