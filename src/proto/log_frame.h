// Binary WebSocket frames that carry task log bytes from worker to server.
//
// The JSON channel (messages.h) would have to escape log bytes, and logs are
// arbitrary bytes, so they travel in binary frames instead. Each frame is a
// fixed 26-byte header followed by the bytes:
//
//   offset size  field
//   0      1     format (kLogFrameFormat = 1)
//   1      1     stream (0 = stdout, 1 = stderr)
//   2      8     job id         (little-endian, as all fields below)
//   10     4     task index
//   14     4     attempt
//   18     8     offset of the first byte in the log file
//   26     ...   the bytes (at most kMaxLogFrameBytes)
//
// A frame answers a LogRequest; the LogChunk text message says when the
// stream ends or fails.
//
// Thread safety: plain values and pure functions.
#ifndef DROVER_PROTO_LOG_FRAME_H_
#define DROVER_PROTO_LOG_FRAME_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/ids.h"
#include "common/status.h"
#include "proto/messages.h"

namespace drover::proto {

inline constexpr uint8_t kLogFrameFormat = 1;
inline constexpr size_t kLogFrameHeaderBytes = 26;
// The most log bytes one frame carries; senders split larger reads.
inline constexpr size_t kMaxLogFrameBytes = 256 * 1024;

struct LogFrame {
  TaskId task;
  uint32_t attempt = 0;
  LogStream stream = LogStream::kStdout;
  uint64_t offset = 0;
  std::string_view bytes;  // points into the decoded buffer
};

// Header + bytes. `frame.bytes` longer than kMaxLogFrameBytes is the
// caller's bug: it is truncated to that size.
std::string EncodeLogFrame(const LogFrame& frame);

// Parses a frame; the result's `bytes` points into `data`, so `data` must
// outlive it. Errors (kInvalidArgument): shorter than the header, unknown
// format or stream, more than kMaxLogFrameBytes of bytes. Never throws.
Result<LogFrame> DecodeLogFrame(std::string_view data);

}  // namespace drover::proto

#endif  // DROVER_PROTO_LOG_FRAME_H_
