// Internal to src/net: the Beast implementation of WsSession, shared by the
// server (server.cc) and the client (ws_client.cc). It is a template over the
// layer under the WebSocket (plain TCP or TLS over TCP).
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

#include "net/ws_session.h"

namespace drover::net::internal {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;
// Plain HTTP over the server's local Unix-domain socket (local_socket.h).
using LocalStream = beast::basic_stream<asio::local::stream_protocol>;

inline uint64_t NextConnectionId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

inline std::string EndpointText(const asio::ip::tcp::endpoint& ep) {
  std::string addr = ep.address().to_string();
  if (ep.address().is_v6()) addr = "[" + addr + "]";
  return addr + ":" + std::to_string(ep.port());
}

// Something the server can drop at once when it stops.
class Connection {
 public:
  virtual ~Connection() = default;
  virtual void Abort() = 0;
};

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

  void Close(std::string reason) override {
    asio::post(ws_.get_executor(), [self = this->shared_from_this(), r = std::move(reason)]() mutable {
      if (self->closing_ || self->closed_) return;
      self->closing_ = true;
      self->close_reason_ = websocket::close_reason(websocket::close_code::normal, r.substr(0, 100));
      if (!self->writing_) self->SendClose();
    });
  }

  void OnText(std::function<void(std::string)> fn) override { on_text_ = std::move(fn); }
  void OnBinary(std::function<void(std::string)> fn) override { on_binary_ = std::move(fn); }
  void OnClose(std::function<void(const Status&)> fn) override { on_close_ = std::move(fn); }

  uint64_t id() const override { return id_; }
  const std::string& remote() const override { return remote_; }

  void Abort() override {
    asio::post(ws_.get_executor(), [self = this->shared_from_this()] {
      self->Finish(Unavailable("connection aborted: server stopping"));
    });
  }

 private:
  struct Outgoing {
    bool binary;
    std::string data;
  };

  void Enqueue(bool binary, std::string message) {
    asio::post(ws_.get_executor(),
               [self = this->shared_from_this(), binary, m = std::move(message)]() mutable {
                 self->DoEnqueue(binary, std::move(m));
               });
  }

  void DoEnqueue(bool binary, std::string message) {
    if (closing_ || closed_) return;
    if (queued_bytes_ + message.size() > max_queue_) {
      Finish(ResourceExhausted("peer " + remote_ + " is not reading: more than " +
                               std::to_string(max_queue_) + " bytes queued"));
      return;
    }
    queued_bytes_ += message.size();
    queue_.push_back({binary, std::move(message)});
    if (!writing_) WriteNext();
  }

  void WriteNext() {
    if (closed_) return;
    if (queue_.empty()) {
      writing_ = false;
      if (closing_) SendClose();
      return;
    }
    writing_ = true;
    ws_.binary(queue_.front().binary);
    ws_.async_write(asio::buffer(queue_.front().data),
                    [self = this->shared_from_this()](beast::error_code ec, size_t) {
                      if (self->closed_) {
                        self->writing_ = false;
                        self->queue_.clear();
                        return;
                      }
                      self->queued_bytes_ -= self->queue_.front().data.size();
                      self->queue_.pop_front();
                      if (ec) {
                        self->Finish(Unavailable("write to " + self->remote_ + " failed: " +
                                                 ec.message()));
                        return;
                      }
                      self->WriteNext();
                    });
  }

  // Sends the close frame and waits for the peer's; the session then ends
  // with `close_status_` (OK for a normal close).
  void SendClose() {
    if (close_sent_ || closed_) return;
    close_sent_ = true;
    ws_.async_close(close_reason_, [self = this->shared_from_this()](beast::error_code ec) {
      if (ec && self->close_status_.ok()) {
        self->Finish(Unavailable("closing the connection to " + self->remote_ +
                                 " failed: " + ec.message()));
        return;
      }
      self->Finish(self->close_status_);
    });
  }

  // Ends the session because of the peer: close with `code`, report `why`.
  void FailWithClose(websocket::close_code code, Status why) {
    spdlog::warn("websocket {} ({}): {}", id_, remote_, why.ToString());
    closing_ = true;
    // Drop unsent messages, but keep the one being written: its completion
    // handler still refers to it.
    while (queue_.size() > (writing_ ? 1u : 0u)) {
      queued_bytes_ -= queue_.back().data.size();
      queue_.pop_back();
    }
    close_reason_ = websocket::close_reason(code, why.message().substr(0, 100));
    close_status_ = std::move(why);
    if (close_sent_) return Finish(close_status_);
    SendClose();
  }

  void ReadNext() {
    ws_.async_read_some(buffer_, kReadChunk, [self = this->shared_from_this()](beast::error_code ec, size_t) {
      if (self->closed_) return;
      if (ec) {
        // Our own close is in flight: its completion finishes the session.
        if (self->close_sent_ && ec == asio::error::operation_aborted) return;
        self->Finish(self->StatusForReadError(ec));
        return;
      }
      if (self->buffer_.size() > self->max_message_) {
        self->FailWithClose(websocket::close_code::too_big,
                            ResourceExhausted("message from " + self->remote_ + " exceeds " +
                                              std::to_string(self->max_message_) + " bytes"));
        return;
      }
      if (!self->ws_.is_message_done()) return self->ReadNext();
      std::string message = beast::buffers_to_string(self->buffer_.data());
      self->buffer_.consume(self->buffer_.size());
      if (self->ws_.got_text()) {
        if (self->on_text_) self->on_text_(std::move(message));
      } else if (self->on_binary_) {
        self->on_binary_(std::move(message));
      }
      if (!self->closed_) self->ReadNext();
    });
  }

  Status StatusForReadError(beast::error_code ec) {
    if (ec == websocket::error::closed) {
      // The peer closed; a code other than "normal" says why.
      const websocket::close_reason& reason = ws_.reason();
      if (reason.code == websocket::close_code::normal || reason.code == websocket::close_code::none) {
        return Status::Ok();
      }
      std::string why = "closed by " + remote_ + " with code " + std::to_string(reason.code);
      if (!reason.reason.empty()) why += " (" + std::string(reason.reason.c_str()) + ")";
      if (reason.code == websocket::close_code::too_big) return ResourceExhausted(why);
      return Unavailable(why);
    }
    if (ec == websocket::error::message_too_big || ec == beast::http::error::buffer_overflow) {
      return ResourceExhausted("message from " + remote_ + " exceeds the size limit");
    }
    if (ec == beast::error::timeout) return Unavailable("connection to " + remote_ + " timed out");
    if (ec.category() == websocket::make_error_code(websocket::error::closed).category()) {
      return InvalidArgument("protocol error from " + remote_ + ": " + ec.message());
    }
    return Unavailable("connection to " + remote_ + " lost: " + ec.message());
  }

  void Finish(Status status) {
    if (closed_) return;
    closed_ = true;
    // Keep the message being written: the write in flight still reads it
    // until its completion handler runs (which then drops it).
    while (queue_.size() > (writing_ ? 1u : 0u)) queue_.pop_back();
    queued_bytes_ = 0;
    if (status.ok() || status.code() == StatusCode::kUnavailable) {
      // A peer that went away (a CLI done following events, a worker
      // restarting) is ordinary here; the session's owner says what it
      // means (the worker channel logs a worker's disconnection, a client
      // its own lost connection). Protocol errors and size limits warn.
      spdlog::debug("websocket {} ({}) closed: {}", id_, remote_, status.ToString());
    } else {
      spdlog::warn("websocket {} ({}) closed: {}", id_, remote_, status.ToString());
    }
    beast::error_code ignored;
    beast::get_lowest_layer(ws_).socket().shutdown(asio::socket_base::shutdown_both, ignored);
    beast::get_lowest_layer(ws_).socket().close(ignored);
    if (finish_hook_) std::exchange(finish_hook_, nullptr)();
    // Dropping the callbacks breaks cycles through captured shared_ptrs.
    on_text_ = nullptr;
    on_binary_ = nullptr;
    if (auto fn = std::exchange(on_close_, nullptr)) fn(status);
  }

  static constexpr size_t kReadChunk = 64 * 1024;

  Ws ws_;
  std::string remote_;
  size_t max_message_;
  size_t max_queue_;
  uint64_t id_ = NextConnectionId();
  beast::flat_buffer buffer_;
  std::deque<Outgoing> queue_;
  size_t queued_bytes_ = 0;
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
  std::shared_ptr<void> held_;
};

}  // namespace drover::net::internal

#endif  // DROVER_NET_WS_SESSION_IMPL_H_
