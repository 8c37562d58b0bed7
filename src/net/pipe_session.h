// PipeSession: the two ends of one in-memory WebSocket on one EventLoop,
// for a server and its workers in one process: `drover up`'s local workers
// (worker::InProcessLink), and harnesses that run them on a virtual-time
// loop, deterministically (tests/sim_cluster). What one end sends arrives at the
// other's OnText / OnBinary on a later loop turn, in order; Close delivers
// what was sent first, then closes both ends with OK; Break is the network
// failing between them (a partition, a killed process): both ends close
// with kUnavailable at once, and what was in flight is lost. An end its
// owner drops unclosed closes the other with kUnavailable.
//
// Thread safety: none; both ends belong to the loop's thread.
#ifndef DROVER_NET_PIPE_SESSION_H_
#define DROVER_NET_PIPE_SESSION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "common/status.h"
#include "net/connection_id.h"
#include "net/event_loop.h"
#include "net/ws_session.h"

namespace drover::net {

class PipeSession final : public WsSession, public std::enable_shared_from_this<PipeSession> {
 public:
  // Two connected ends; `a_remote` is what end a reports as its peer.
  static std::pair<std::shared_ptr<PipeSession>, std::shared_ptr<PipeSession>> MakePair(
      EventLoop& loop, std::string a_remote, std::string b_remote) {
    // Ids from the same count as real connections': a server's maps hold both.
    auto a = std::shared_ptr<PipeSession>(
        new PipeSession(loop, internal::NextConnectionId(), std::move(a_remote)));
    auto b = std::shared_ptr<PipeSession>(
        new PipeSession(loop, internal::NextConnectionId(), std::move(b_remote)));
    a->peer_ = b;
    b->peer_ = a;
    return {a, b};
  }

  void SendText(std::string message) override { Send(std::move(message), /*text=*/true); }
  void SendBinary(std::string message) override { Send(std::move(message), /*text=*/false); }

  void Close(std::string) override {
    if (closing_) return;
    closing_ = true;
    loop_.Post([self = shared_from_this()] { self->EndBoth(Status::Ok()); });
  }

  // An end dropped by its owner without a close is a connection that went
  // away: the other end hears of it on a later turn.
  ~PipeSession() override {
    if (closed_) return;
    loop_.Post([peer = peer_] {
      if (auto p = peer.lock()) p->End(Unavailable("connection closed by the peer"));
    });
  }

  // The connection fails now, on both ends.
  void Break(const std::string& why) { EndBoth(Unavailable(why)); }

  void OnText(std::function<void(std::string)> fn) override { on_text_ = std::move(fn); }
  void OnBinary(std::function<void(std::string)> fn) override { on_binary_ = std::move(fn); }
  void OnClose(std::function<void(const Status&)> fn) override { on_close_ = std::move(fn); }
  uint64_t id() const override { return id_; }
  const std::string& remote() const override { return remote_; }
  bool closed() const { return closed_; }

 private:
  PipeSession(EventLoop& loop, uint64_t id, std::string remote)
      : loop_(loop), id_(id), remote_(std::move(remote)) {}

  void Send(std::string message, bool text) {
    if (closing_ || closed_) return;
    std::weak_ptr<PipeSession> to = peer_;
    loop_.Post([to, text, m = std::move(message)]() mutable {
      auto peer = to.lock();
      if (!peer || peer->closed_) return;
      auto& fn = text ? peer->on_text_ : peer->on_binary_;
      if (fn) fn(std::move(m));
    });
  }

  void EndBoth(const Status& why) {
    auto peer = peer_.lock();
    End(why);
    if (peer) peer->End(why);
  }

  void End(const Status& why) {
    if (closed_) return;
    closed_ = true;
    closing_ = true;
    auto on_close = std::move(on_close_);
    on_text_ = nullptr;
    on_binary_ = nullptr;
    if (on_close) on_close(why);
  }

  EventLoop& loop_;
  uint64_t id_;
  std::string remote_;
  std::weak_ptr<PipeSession> peer_;
  bool closing_ = false;
  bool closed_ = false;
  std::function<void(std::string)> on_text_;
  std::function<void(std::string)> on_binary_;
  std::function<void(const Status&)> on_close_;
};

}  // namespace drover::net

#endif  // DROVER_NET_PIPE_SESSION_H_
