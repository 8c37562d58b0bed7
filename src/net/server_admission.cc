// Admission of connections that have not sent the token yet
// (ServerLimits::max_unauthenticated_connections): each listener keeps at
// most that many, oldest first, and a new one pushes out the oldest; the
// accept loops (server_listen.cc) push one out to make room when accept
// runs out of descriptors. So idle connections from the network cannot lock
// out workers, clients with the token, or the local socket. Log lines about
// such peers are limited, since anyone who can reach the port can open them
// by the thousand.
//
// Threading: the loop thread.

#include <spdlog/spdlog.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "net/server_state.h"

namespace drover::net {

void Server::State::LogPeer(bool authenticated, spdlog::level::level_enum level,
                            const std::string& line) {
  if (authenticated) return spdlog::log(level, "{}", line);
  const uint64_t n = peer_log.Allow(internal::WallNow());
  if (n == 0) return;
  if (n == 1) return spdlog::log(level, "{}", line);
  spdlog::log(level, "{} (and {} more lines about connections without the token held back in the last 10 s)",
              line, n - 1);
}

bool Server::State::PushOutOldest(size_t first) {
  for (size_t i : {first, 1 - first}) {
    auto& waiting = listeners[i].unauthenticated;
    while (!waiting.empty()) {
      std::shared_ptr<internal::Connection> c = waiting.begin()->second.lock();
      waiting.erase(waiting.begin());
      if (c) {
        c->Abort();
        return true;
      }
    }
  }
  return false;
}

void Server::State::Admit(size_t listener, uint64_t id, std::weak_ptr<internal::Connection> c) {
  auto& waiting = listeners[listener].unauthenticated;
  uint64_t pushed = 0;
  while (waiting.size() >= max_unauthenticated && PushOutOldest(listener)) ++pushed;
  if (pushed > 0) {
    if (const uint64_t n = push_log.Allow(internal::WallNow()); n > 0) {
      spdlog::warn("{} connections without the token on {} (the most kept): closed the oldest "
                   "({} such closings since the last line)",
                   max_unauthenticated, listeners[listener].name, n);
    }
  }
  waiting[id] = std::move(c);
}

}  // namespace drover::net
