// ServerLink: how the agent's shell (agent.cc) reaches a server, and
// nothing more: one call that opens a connection to the worker endpoint
// and hands out the session (net::WsSession, itself an interface: send
// text or binary, close, callbacks for messages and the close). The real
// link is a WebSocket (WebSocketLink below: TLS with the pinned
// fingerprint, or plain TCP, or the server's local socket, as the options
// say), or, for a worker in the server's own process (`drover up`), a pair
// of in-memory sessions (InProcessLink below); a test can put a fake in
// its place (AgentConfig::server_link) and drive the shell without a
// network.
//
// Threading: Connect on the loop thread; `done` runs there exactly once.
#ifndef DROVER_WORKER_AGENT_SERVER_LINK_H_
#define DROVER_WORKER_AGENT_SERVER_LINK_H_

#include <functional>
#include <memory>
#include <utility>

#include "net/client_options.h"
#include "net/event_loop.h"
#include "net/pipe_session.h"
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

// A worker in the server's process: each connect is a pair of in-memory
// sessions (net::PipeSession) on the shared loop, one end handed to
// `attach` (ServerShell::AttachWorker: a worker connection, as one that
// came with the cluster token), the other to the agent. Its messages are
// the same frames as over a socket, without the socket: no system calls,
// no WebSocket framing or masking (about a tenth of `drover up`'s CPU per
// task, bench/README.md). The server sees it connected from "in-process"
// (its file service, for peers: 127.0.0.1, as for the local socket). The
// link must outlive the agent.
class InProcessLink final : public ServerLink {
 public:
  using Attach = std::function<void(std::shared_ptr<net::WsSession>)>;

  InProcessLink(net::EventLoop& loop, Attach attach) : loop_(loop), attach_(std::move(attach)) {}

  void Connect(const net::ClientOptions&, ConnectCallback done) override {
    // A later turn, as a real connect: the agent is not re-entered.
    loop_.Post([this, done = std::move(done)] {
      auto [worker_end, server_end] = net::PipeSession::MakePair(loop_, "server", "in-process");
      attach_(std::move(server_end));
      done(std::shared_ptr<net::WsSession>(std::move(worker_end)));
    });
  }

 private:
  net::EventLoop& loop_;
  Attach attach_;
};

}  // namespace drover::worker

#endif  // DROVER_WORKER_AGENT_SERVER_LINK_H_
