// The process-unique id of a connection (WsSession::id, the server's maps
// of connections): one count for every kind, real (HTTP, WebSocket) and in
// memory (pipe_session.h). Apart from connection.h so that it costs no
// Boost headers.
//
// Threading: any thread.
#ifndef DROVER_NET_CONNECTION_ID_H_
#define DROVER_NET_CONNECTION_ID_H_

#include <atomic>
#include <cstdint>

namespace drover::net::internal {

inline uint64_t NextConnectionId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

}  // namespace drover::net::internal

#endif  // DROVER_NET_CONNECTION_ID_H_
