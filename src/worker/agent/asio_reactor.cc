#include "worker/agent/asio_reactor.h"

#include <string>
#include <utility>

namespace drover::worker {

AsioReactor::~AsioReactor() = default;

Status AsioReactor::Watch(int fd, Callback on_readable) {
  if (watches_.count(fd) > 0) return AlreadyExists("fd " + std::to_string(fd) + " is already watched");
  auto watch = std::make_unique<net::FdWatch>(loop_, fd, std::move(on_readable));
  if (!watch->status().ok()) return watch->status();
  watches_.emplace(fd, std::move(watch));
  return Status::Ok();
}

void AsioReactor::Unwatch(int fd) {
  // FdWatch promises that destroying it inside its own callback is safe and
  // stops further calls.
  watches_.erase(fd);
}

}  // namespace drover::worker
