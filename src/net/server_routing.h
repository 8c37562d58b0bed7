// Internal to src/net: the routing decision on a request whose header has
// been read: refuse it, upgrade it to a WebSocket, stream its body to an
// upload route's file, or read its body and Dispatch it; with who sent it
// (the token, ServerOptions::authenticate) and whether they may
// (ServerOptions::authorize), decided before any body is read. The
// connections (http_session.cc) and Server::AnswerInMemory
// (server_routing.cc) both decide here, so both decide alike.
//
// Threading: the loop thread (AnswerInMemory: its caller's).
#ifndef DROVER_NET_SERVER_ROUTING_H_
#define DROVER_NET_SERVER_ROUTING_H_

#include <boost/beast/http/message.hpp>
#include <string>

#include "net/http_types.h"
#include "net/server.h"
#include "net/server_state.h"
#include "net/upload_sink.h"

namespace drover::net::internal {

// What to do with a request once its header is read.
struct HeadDecision {
  enum class Kind { kReject, kUpgrade, kRead, kUpload };
  Kind kind = Kind::kRead;
  Response response;                         // kReject
  std::string why;                           // kReject: for the log
  const WsOpenHandler* on_open = nullptr;    // kUpgrade
  const UploadRouteEntry* upload = nullptr;  // kUpload
  bool authenticated = false;                // the request carried the token
};

// Fills `request` from `header` (decoding path and query; `remote` is the
// peer for logs) and decides. A path or query that is not clean text is
// refused 400, a missing or wrong token 401, an upgrade to no WebSocket
// route 404, a refusal of `authorize` as it answered.
HeadDecision Decide(const Server::State& state, const boost::beast::http::request_header<>& header,
                    const std::string& remote, Request& request);

}  // namespace drover::net::internal

#endif  // DROVER_NET_SERVER_ROUTING_H_
