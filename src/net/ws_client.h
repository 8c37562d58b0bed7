// The WebSocket client of a worker (or a following CLI): connects on an
// EventLoop with TLS + pinned fingerprint (or plain TCP) and the cluster
// token, and hands out a WsSession. Reconnecting is the caller's job: when
// the session's OnClose fires, wait Backoff::Next() (backoff.h) on a Timer
// and connect again.
//
// Thread safety: call ConnectWebSocket on the loop thread, or before the
// loop runs. `done` runs on the loop thread exactly once.
#ifndef DROVER_NET_WS_CLIENT_H_
#define DROVER_NET_WS_CLIENT_H_

#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "net/client_options.h"
#include "net/event_loop.h"
#include "net/http_client.h"
#include "net/http_types.h"
#include "net/ws_session.h"

namespace drover::net {

// Receives the open session; set its callbacks inside `done` (reading
// starts after it returns). Failures: kUnavailable (cannot connect, dropped),
// kDeadlineExceeded (options.timeout passed), kFailedPrecondition (pinned
// fingerprint mismatch, naming both; or TLS without a fingerprint),
// kUnauthenticated (the server refused the token), kNotFound (no WebSocket
// endpoint at `target`).
using WsConnectCallback = std::function<void(Result<std::shared_ptr<WsSession>>)>;

void ConnectWebSocket(EventLoop& loop, const ClientOptions& options, std::string target,
                      WsConnectCallback done);

// One connection for a request and then a stream (`drover submit --wait`:
// POST the job, then follow its events): sends `request` (keep-alive),
// hands the response, whatever its HTTP status, to `then`, and upgrades the
// same connection to the WebSocket at the target `then` returns. That saves
// a second TCP connect and TLS handshake. When `then` returns an error,
// `done` gets that error and the connection is closed.
// Failures before the response as HttpClient::Send (kUnavailable,
// kDeadlineExceeded, kFailedPrecondition for the pin, kResourceExhausted
// for a response over options.max_response_bytes); after it as
// ConnectWebSocket, and kUnavailable when the server closed the connection
// after its answer. `then` runs on the loop thread before `done`.
using WsTargetFn = std::function<Result<std::string>(const Response&)>;
void RequestThenWebSocket(EventLoop& loop, const ClientOptions& options, ClientRequest request,
                          WsTargetFn then, WsConnectCallback done);

}  // namespace drover::net

#endif  // DROVER_NET_WS_CLIENT_H_
