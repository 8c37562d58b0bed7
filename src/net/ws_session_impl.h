// Internal to src/net: the Beast implementation of WsSession, shared by the
// server (http_session.cc) and the client (ws_client.cc). It is a template
// over the layer under the WebSocket (plain TCP, TLS over TCP, or the local
// socket).
// Its reading, writing and closing are defined in ws_session_impl.cc and
// compiled there once for each of the three layers (for build time);
// both users see only the declarations below.
//
// Threading: every member runs on the loop thread; the public Send/Close
// calls post there first.
#ifndef DROVER_NET_WS_SESSION_IMPL_H_
#define DROVER_NET_WS_SESSION_IMPL_H_

#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <deque>

#include "net/connection.h"
#include "net/eager_stream.h"
#include "net/read_pacer.h"
#include "net/ws_session.h"

namespace drover::net::internal {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
// The layers under a session: TCP, TLS over TCP, and plain HTTP over the
// server's local Unix-domain socket (local_socket.h). Their writes complete
// at once when the socket takes the bytes (eager_stream.h).
using TcpStream = EagerStream<asio::ip::tcp>;
using TlsStream = beast::ssl_stream<TcpStream>;
using LocalStream = EagerStream<asio::local::stream_protocol>;

template <class NextLayer>
class WsSessionImpl final : public WsSession,
                            public Connection,
                            public std::enable_shared_from_this<WsSessionImpl<NextLayer>> {
 public:
  using Ws = websocket::stream<NextLayer>;

  WsSessionImpl(Ws ws, std::string remote, size_t max_message_bytes, size_t max_queue_bytes)
      : ws_(std::move(ws)),
        remote_(std::move(remote)),
        max_message_(max_message_bytes),
        max_queue_(max_queue_bytes) {
    // The size limit is enforced here (ReadNext) rather than by Beast:
    // Beast's own check reports a TLS teardown error instead of "too big"
    // when the peer is still sending, and the reason matters in logs. But
    // Beast alone sees a frame's declared length: a frame declaring far
    // more than the limit (2^63 bytes, say) would otherwise hold the
    // connection open while its bytes never come. So Beast refuses, at the
    // frame header, what exceeds the limit by more than one read can take.
    ws_.read_message_max(max_message_bytes + kReadChunk);
    // A message goes out as one frame, written (and masked, on a client)
    // in pieces of 64 KiB, not 4 KiB: every piece is a completion, and a
    // completion waits for a pass of a busy loop (measured: a batch of
    // events of 256 KiB took 64 passes).
    ws_.auto_fragment(false);
    ws_.write_buffer_bytes(kWriteChunk);
  }

  Ws& ws() { return ws_; }

  // Called once when the session ends, before on_close; the server uses it
  // to forget the session.
  void SetFinishHook(std::function<void()> hook) { finish_hook_ = std::move(hook); }

  // Keeps `thing` (e.g. the TLS context the stream was made from) alive as
  // long as the session.
  void Hold(std::shared_ptr<void> thing) { held_ = std::move(thing); }

  // Starts reading. Call on the loop thread after the handshake and after
  // the owner has set its callbacks.
  void Start() { ReadNext(); }

  void SendText(std::string message) override { Enqueue(false, std::move(message)); }
  void SendBinary(std::string message) override { Enqueue(true, std::move(message)); }

  void Close(std::string reason) override;

  void OnText(std::function<void(std::string)> fn) override { on_text_ = std::move(fn); }
  void OnBinary(std::function<void(std::string)> fn) override { on_binary_ = std::move(fn); }
  void OnClose(std::function<void(const Status&)> fn) override { on_close_ = std::move(fn); }
  void PaceReads(std::shared_ptr<ReadPacer> pacer) override { pacer_ = std::move(pacer); }
  void OnDrained(std::function<void()> fn) override { on_drained_ = std::move(fn); }

  uint64_t id() const override { return id_; }
  const std::string& remote() const override { return remote_; }
  size_t unsent_bytes() const override { return posted_bytes_.load() + queued_bytes_; }

  void Abort() override;

 private:
  struct Outgoing {
    bool binary;
    std::string data;
  };

  void Enqueue(bool binary, std::string message);
  void DoEnqueue(bool binary, std::string message);
  void WriteNext();

  // Sends the close frame and waits for the peer's; the session then ends
  // with `close_status_` (OK for a normal close).
  void SendClose();

  // Ends the session because of the peer: close with `code`, report `why`.
  void FailWithClose(websocket::close_code code, Status why);

  void ReadNext();
  Status StatusForReadError(beast::error_code ec);
  void Finish(Status status);

  static constexpr size_t kReadChunk = 64 * 1024;
  static constexpr size_t kWriteChunk = 64 * 1024;

  Ws ws_;
  std::string remote_;
  size_t max_message_;
  size_t max_queue_;
  uint64_t id_ = NextConnectionId();
  beast::flat_buffer buffer_;
  std::deque<Outgoing> queue_;
  size_t queued_bytes_ = 0;
  // Sent (Enqueue) and not yet in queue_ (DoEnqueue runs on the executor).
  std::atomic<size_t> posted_bytes_{0};
  bool writing_ = false;
  bool closing_ = false;
  bool close_sent_ = false;
  bool closed_ = false;
  websocket::close_reason close_reason_;
  Status close_status_;
  std::function<void(std::string)> on_text_;
  std::function<void(std::string)> on_binary_;
  std::function<void(const Status&)> on_close_;
  std::function<void()> finish_hook_;
  std::function<void()> on_drained_;
  std::shared_ptr<void> held_;
  std::shared_ptr<ReadPacer> pacer_;
};

// Instantiated in ws_session_impl.cc, and only there.
extern template class WsSessionImpl<TcpStream>;
extern template class WsSessionImpl<TlsStream>;
extern template class WsSessionImpl<LocalStream>;

}  // namespace drover::net::internal

#endif  // DROVER_NET_WS_SESSION_IMPL_H_
