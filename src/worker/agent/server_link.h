// ServerLink: how the agent's shell (agent.cc) reaches a server, and
// nothing more: one call that opens a connection to the worker endpoint
// and hands out the session (net::WsSession, itself an interface: send
// text or binary, close, callbacks for messages and the close). The real
// link is a WebSocket (WebSocketLink below: TLS with the pinned
// fingerprint, or plain TCP, or the server's local socket, as the options
// say); a test can put a fake in its place (AgentConfig::server_link) and
// drive the shell without a network.
//
// Threading: Connect on the loop thread; `done` runs there exactly once.
#ifndef DROVER_WORKER_AGENT_SERVER_LINK_H_
#define DROVER_WORKER_AGENT_SERVER_LINK_H_

#include <memory>
#include <utility>

#include "net/client_options.h"
#include "net/event_loop.h"
#include "net/ws_client.h"
#include "net/ws_session.h"

namespace drover::worker {

class ServerLink {
 public:
  using ConnectCallback = net::WsConnectCallback;

  virtual ~ServerLink() = default;
  ServerLink() = default;
  ServerLink(const ServerLink&) = delete;
  ServerLink& operator=(const ServerLink&) = delete;

  // Opens one connection to the server's worker endpoint as `options` say
  // (address, TLS, token, timeouts). `done` gets the open session (set its
  // callbacks inside `done`), or why there is none: the failures of
  // net::ConnectWebSocket (Unavailable, DeadlineExceeded, FailedPrecondition,
  // Unauthenticated, NotFound).
  virtual void Connect(const net::ClientOptions& options, ConnectCallback done) = 0;
};

// The real link: a WebSocket to /api/v1/worker on `loop`.
class WebSocketLink final : public ServerLink {
 public:
  static constexpr char kWorkerPath[] = "/api/v1/worker";

  explicit WebSocketLink(net::EventLoop& loop) : loop_(loop) {}
  void Connect(const net::ClientOptions& options, ConnectCallback done) override {
    net::ConnectWebSocket(loop_, options, kWorkerPath, std::move(done));
  }

 private:
  net::EventLoop& loop_;
};

}  // namespace drover::worker

#endif  // DROVER_WORKER_AGENT_SERVER_LINK_H_
