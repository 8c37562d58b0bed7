#include "proto/log_frame.h"

#include <algorithm>

namespace drover::proto {
namespace {

template <typename U>
void Put(std::string& out, U value) {
  for (size_t i = 0; i < sizeof(U); ++i)
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

template <typename U>
U Get(std::string_view data, size_t at) {
  U value = 0;
  for (size_t i = 0; i < sizeof(U); ++i) {
    value |= static_cast<U>(static_cast<unsigned char>(data[at + i])) << (8 * i);
  }
  return value;
}

}  // namespace

std::string EncodeLogFrame(const LogFrame& frame) {
  std::string_view bytes = frame.bytes.substr(0, kMaxLogFrameBytes);
  std::string out;
  out.reserve(kLogFrameHeaderBytes + bytes.size());
  out.push_back(static_cast<char>(kLogFrameFormat));
  out.push_back(static_cast<char>(frame.stream));
  Put<uint64_t>(out, frame.task.job);
  Put<uint32_t>(out, frame.task.index);
  Put<uint32_t>(out, frame.attempt);
  Put<uint64_t>(out, frame.offset);
  out.append(bytes);
  return out;
}

Result<LogFrame> DecodeLogFrame(std::string_view data) {
  if (data.size() < kLogFrameHeaderBytes) {
    return InvalidArgument("log frame of " + std::to_string(data.size()) +
                           " bytes is shorter than its header");
  }
  if (static_cast<uint8_t>(data[0]) != kLogFrameFormat) {
    return InvalidArgument("log frame has unknown format " +
                           std::to_string(static_cast<uint8_t>(data[0])));
  }
  uint8_t stream = static_cast<uint8_t>(data[1]);
  if (stream > 1) return InvalidArgument("log frame has unknown stream " + std::to_string(stream));
  if (data.size() - kLogFrameHeaderBytes > kMaxLogFrameBytes) {
    return InvalidArgument("log frame carries " +
                           std::to_string(data.size() - kLogFrameHeaderBytes) +
                           " bytes, more than the limit of " + std::to_string(kMaxLogFrameBytes));
  }
  LogFrame frame;
  frame.stream = static_cast<LogStream>(stream);
  frame.task.job = Get<uint64_t>(data, 2);
  frame.task.index = Get<uint32_t>(data, 10);
  frame.attempt = Get<uint32_t>(data, 14);
  frame.offset = Get<uint64_t>(data, 18);
  frame.bytes = data.substr(kLogFrameHeaderBytes);
  return frame;
}

}  // namespace drover::proto
