// WsSession: one open WebSocket connection, server side (handed to a
// WebSocketRoute's open handler) or client side (handed out by WsClient).
// Both sides share this interface so the worker protocol code does not care
// which end it is.
//
// Messages are whole (not fragments). Writes are queued and go out one at a
// time in call order. Incoming messages are read only after the open handler
// (or the WsClient connect callback) returns, so set the callbacks there.
//
// Thread safety: SendText, SendBinary and Close are safe from any thread
// (they post to the loop). The callbacks run on the loop thread. Setting
// callbacks belongs to the loop thread.
#ifndef DROVER_NET_WS_SESSION_H_
#define DROVER_NET_WS_SESSION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"

namespace drover::net {

class ReadPacer;

class WsSession {
 public:
  virtual ~WsSession() = default;

  // Queues a message. Silently dropped once the session is closing or
  // closed (the close callback tells the owner). If the queue of unsent
  // bytes would exceed the session's limit, the connection is closed with
  // kResourceExhausted: a peer that does not read must not grow memory.
  virtual void SendText(std::string message) = 0;
  virtual void SendBinary(std::string message) = 0;

  // Sends the queued messages, then a close frame with `reason` (normal
  // closure), then the on_close callback runs with an OK status.
  virtual void Close(std::string reason) = 0;

  virtual void OnText(std::function<void(std::string)> fn) = 0;
  virtual void OnBinary(std::function<void(std::string)> fn) = 0;

  // Runs exactly once when the connection ends: OK after a clean close by
  // either side, otherwise why (kUnavailable for a dropped connection or
  // timeout, kResourceExhausted for an oversized message, kInvalidArgument
  // for a protocol error).
  virtual void OnClose(std::function<void(const Status&)> fn) = 0;

  // Reads each next message only when `pacer` gives this session its turn
  // (read_pacer.h): for the many sessions of one busy kind (the server's
  // workers), so that the loop still looks at the network between them.
  // Set it where the callbacks are set.
  virtual void PaceReads(std::shared_ptr<ReadPacer> pacer) { (void)pacer; }

  // Runs on the loop thread each time the last queued message has been
  // written (nothing is unsent any more): a sender that holds messages
  // back while the connection is busy sends them then, as one. Set it
  // where the callbacks are set. Sessions that never hold anything unsent
  // (unsent_bytes() stays 0) may never call it.
  virtual void OnDrained(std::function<void()> fn) { (void)fn; }

  // A process-unique id for logs and maps; the peer "ip:port".
  virtual uint64_t id() const = 0;
  virtual const std::string& remote() const = 0;

  // Bytes sent and not yet written to the connection (queued, or on their
  // way to the queue), for a sender that paces itself below the limit that
  // closes the session. Call it on the session's loop thread.
  virtual size_t unsent_bytes() const { return 0; }
};

}  // namespace drover::net

#endif  // DROVER_NET_WS_SESSION_H_
