// Listening: Server::Start (the TLS identity, the TCP port, the local
// socket), Server::Stop, and the accept loops, which hand each connection
// to an HTTP session (http_session.h). When accept fails for want of
// descriptors or memory, the oldest connection without the token is closed
// to make room (server_admission.cc) and accepting pauses (AcceptPause)
// instead of spinning.
//
// Threading: the loop thread (Start: also before the loop runs).

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/socket_base.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "net/accept_pause.h"
#include "net/connection.h"
#include "net/fd_limit.h"
#include "net/http_session.h"
#include "net/server_state.h"
#include "net/tls_identity.h"

namespace drover::net {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using asio::ip::tcp;
using boost::system::error_code;

namespace {

using ServerState = Server::State;

// After a failed accept on `listener`: out of descriptors or memory, the
// oldest connection without the token is closed to make room and accepting
// resumes after a pause (AcceptPause) instead of at once, which spun; other
// failures concern one connection and accepting goes on. Either way at most
// one log line per 10 s.
void AfterAcceptError(const std::shared_ptr<ServerState>& state, size_t listener, error_code ec,
                      void (*again)(const std::shared_ptr<ServerState>&)) {
  ServerState::Listener& l = state->listeners[listener];
  const int error = ec.category() == boost::system::system_category() ? ec.value() : 0;
  const AcceptPause::Step step = l.pause.OnFailure(error, internal::WallNow());
  const bool made_room = AcceptPause::OutOfResources(error) && state->PushOutOldest(listener);
  if (step.log) {
    std::string then;
    if (step.pause > Duration(0)) {
      then = "; accepting again in " + std::to_string(step.pause.count() / 1000) + " ms";
      if (made_room) then += ", closed the oldest connection without the token to make room";
    }
    spdlog::warn("accept on {} failed: {} ({} failures since the last such line){}", l.name,
                 ec.message(), step.failures, then);
  }
  if (step.pause == Duration(0)) return again(state);
  l.retry.emplace(state->io);
  l.retry->expires_after(std::chrono::microseconds(step.pause.count()));
  l.retry->async_wait([state, again](error_code timer_ec) {
    if (timer_ec || state->stopped) return;
    again(state);
  });
}

void Accept(const std::shared_ptr<ServerState>& state) {
  state->acceptor->async_accept([state](error_code ec, tcp::socket socket) {
    if (state->stopped || ec == asio::error::operation_aborted) return;
    if (ec) return AfterAcceptError(state, ServerState::kTcp, ec, &Accept);
    state->listeners[ServerState::kTcp].pause.OnSuccess();
    error_code ep_ec;
    std::string remote = internal::EndpointText(socket.remote_endpoint(ep_ec));
    socket.set_option(tcp::no_delay(true), ep_ec);
    internal::StartHttpSession(state, std::move(socket), std::move(remote));
    Accept(state);
  });
}

// The local socket: plain HTTP (no TLS), the same sessions and routes
// (http_session.h), the token checked as on the TCP port.
void AcceptLocal(const std::shared_ptr<ServerState>& state) {
  state->local_acceptor->async_accept(
      [state](error_code ec, asio::local::stream_protocol::socket socket) {
        if (state->stopped || ec == asio::error::operation_aborted) return;
        if (ec) return AfterAcceptError(state, ServerState::kLocal, ec, &AcceptLocal);
        state->listeners[ServerState::kLocal].pause.OnSuccess();
        internal::StartHttpSession(state, std::move(socket));
        AcceptLocal(state);
      });
}

}  // namespace

Status Server::Start() {
  State& st = *state_;
  const ServerOptions& o = st.options;
  if (o.token.empty()) return InvalidArgument("the server needs a cluster token");
  if (o.tls) {
    if (o.cert_dir.empty()) return InvalidArgument("TLS needs a certificate directory");
    ASSIGN_OR_RETURN(TlsIdentity id, LoadOrCreateTlsIdentity(o.cert_dir));
    st.tls.emplace(ssl::context::tls_server);
    st.tls->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                        ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                        ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
    error_code ec;
    st.tls->use_certificate_chain(asio::buffer(id.cert_pem), ec);
    if (!ec) st.tls->use_private_key(asio::buffer(id.key_pem), ssl::context::pem, ec);
    if (ec) return Internal("cannot load the TLS identity from " + o.cert_dir + ": " + ec.message());
    st.fingerprint = id.fingerprint;
  }
  error_code ec;
  auto address = asio::ip::make_address(o.bind_address, ec);
  if (ec) return InvalidArgument("bind address \"" + o.bind_address + "\" is not an IP address");
  tcp::endpoint endpoint(address, o.port);
  const std::string where = internal::EndpointText(endpoint);
  st.acceptor.emplace(st.io);
  st.acceptor->open(endpoint.protocol(), ec);
  if (!ec) st.acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) st.acceptor->bind(endpoint, ec);
  if (!ec) st.acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    st.acceptor.reset();
    return Unavailable("cannot listen on " + where + ": " + ec.message());
  }
  st.port = st.acceptor->local_endpoint().port();
  if (st.local_listener && st.local_listener->fd() >= 0) {
    st.local_acceptor.emplace(st.io);
    st.local_acceptor->assign(asio::local::stream_protocol(), st.local_listener->fd(), ec);
    if (ec) {
      st.local_acceptor.reset();
      st.acceptor.reset();
      return Unavailable("cannot accept on " + st.local_listener->path() + ": " + ec.message());
    }
    st.local_listener->ReleaseFd();  // the acceptor closes it now
  }
  const uint64_t limit = OpenFileLimit();
  st.max_unauthenticated = o.limits.max_unauthenticated_connections > 0
                               ? o.limits.max_unauthenticated_connections
                               : static_cast<size_t>(std::clamp<uint64_t>(limit / 4, 16, 1024));
  st.stopped = false;
  spdlog::info("listening on {}:{} ({})", o.bind_address, st.port, o.tls ? "TLS" : "plain TCP");
  Accept(state_);
  if (st.local_acceptor) {
    spdlog::info("listening on {} (plain HTTP, token required)", st.local_listener->path());
    AcceptLocal(state_);
  }
  return Status::Ok();
}

void Server::Stop() {
  State& st = *state_;
  if (st.stopped) return;
  st.stopped = true;
  if (st.acceptor) {
    error_code ignored;
    st.acceptor->close(ignored);
  }
  if (st.local_acceptor) {
    error_code ignored;
    st.local_acceptor->close(ignored);
  }
  for (State::Listener& l : st.listeners) {
    if (l.retry) l.retry->cancel();
  }
  // Removes the socket file and drops the claim: a clean stop leaves no
  // socket behind.
  st.local_listener.reset();
  // Copy first: aborting may erase entries.
  auto connections = st.connections;
  for (auto& [id, weak] : connections) {
    if (auto c = weak.lock()) c->Abort();
  }
}

}  // namespace drover::net
