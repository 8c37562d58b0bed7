// Binary frames of the worker channel: the messages every task sends and
// gets (Started, Finished, Assign, Ack) in a compact binary form, between
// peers that both read them (Hello::binary, HelloAck::binary). Their JSON
// cost the server about a tenth of its CPU under load and the worker as
// much (bench/README.md); everything else stays JSON text, and a peer from
// before binary frames gets and sends JSON only.
//
// A binary frame is a WebSocket binary frame, told apart from a log frame
// (log_frame.h) by its first byte:
//
//   byte 0   kMessageFrameFormat (2; a log frame starts with 1)
//   byte 1   kMessageFrameVersion
//   varint   how many messages follow: 1 to kMaxBatchMessages
//   each     varint length, then the message: its type byte
//            (kBinaryStarted, ...), then its fields in a fixed order
//            (binary_io.h: varints, zigzagged signed values, strings and
//            lists behind their lengths)
//
// A frame holds one message unless the peer reads batches (Hello::batches,
// HelloAck::batches), as with text frames. An Assign has a binary form
// only when none of its assignments has input files, uploads, a
// checkpoint or isolation beyond cores, memory and GPUs (a network of its
// own, I/O or disk limits, an image): those rarer assignments go as JSON.
//
// Decoding checks what the JSON decoding checks (ids, signal numbers,
// GPU shares, command numbers, output names and digests, the result's
// size), that every byte was used, and that a worker frame holds only
// worker messages and a server frame only server messages. The first
// problem is kInvalidArgument naming the message and field
// ("binary frame: messages[1]: finished: outcome.outputs.sha256: expected
// 64 lower-case hex digits"); it never throws. Strings are carried as bytes,
// so unlike JSON text they round-trip byte for byte.
//
// DescribeBinaryFrame renders a frame as the JSON text of its messages, for
// logs and `drover debug decode`.
//
// Thread safety: pure functions.
#ifndef DROVER_PROTO_MESSAGES_BINARY_H_
#define DROVER_PROTO_MESSAGES_BINARY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "proto/messages.h"

namespace drover::proto {

inline constexpr uint8_t kMessageFrameFormat = 2;
inline constexpr uint8_t kMessageFrameVersion = 1;

// Message type bytes.
inline constexpr uint8_t kBinaryStarted = 1;
inline constexpr uint8_t kBinaryFinished = 2;
inline constexpr uint8_t kBinaryAssign = 3;
inline constexpr uint8_t kBinaryAck = 4;

// A message encoded for the wire: JSON text (Encode) or a binary message
// (one entry of a binary frame); after FramesFor, a whole frame of either
// kind.
struct WireMessage {
  bool binary = false;
  std::string bytes;
};

// Whether the message has a binary form (see above).
bool HasBinaryForm(const WorkerMessage& message);
bool HasBinaryForm(const ServerMessage& message);

// `message` for a peer: its binary form when `binary` (the peer reads
// binary frames) and it has one, else its JSON text.
WireMessage EncodeForPeer(const WorkerMessage& message, bool binary);
WireMessage EncodeForPeer(const ServerMessage& message, bool binary);

// The frames to send `messages` (from EncodeForPeer, in order) in: with
// `batches`, each run of text messages as FramesOf (messages.h) makes it and
// each run of binary ones in binary frames of at most kMaxBatchMessages
// messages and kMaxMessageBytes; without, one frame per message.
std::vector<WireMessage> FramesFor(std::vector<WireMessage> messages, bool batches);

// A binary frame of these messages (each a binary message from
// EncodeForPeer); for tests and the fuzz target.
std::string EncodeBinaryFrame(const std::vector<std::string>& messages);

// True when `data` (a binary WebSocket frame) starts as a binary frame of
// messages does, rather than as a log frame.
inline bool IsMessageFrame(std::string_view data) {
  return !data.empty() && static_cast<uint8_t>(data[0]) == kMessageFrameFormat;
}

Result<std::vector<WorkerMessage>> DecodeWorkerBinaryFrame(std::string_view data);
Result<std::vector<ServerMessage>> DecodeServerBinaryFrame(std::string_view data);

// The messages of a binary frame of either side as JSON text, one message
// per line; kInvalidArgument "not a readable binary frame: ..." saying why
// it reads as neither side's.
Result<std::string> DescribeBinaryFrame(std::string_view data);

}  // namespace drover::proto

#endif  // DROVER_PROTO_MESSAGES_BINARY_H_
