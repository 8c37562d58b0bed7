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

}  // namespace drover::net

#endif  // DROVER_NET_WS_CLIENT_H_
