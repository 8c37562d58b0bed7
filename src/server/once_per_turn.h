// OncePerTurn: a flush posted to the event loop at most once, however many
// times it is asked for before it runs (the journal flush, the turn's
// assignments, the event stream's messages are each sent together).
//
//   OncePerTurn flush_{loop_, [this] { Flush(); }};
//   ... flush_.Request();            // posts Flush() unless already posted
//   void Flush() { flush_.Clear(); ... }
//
// The owner's flush calls Clear() first, whether it runs from the post or is
// called directly (an early flush): a Request() after that posts again, and a
// post still pending then finds nothing to do. A post outliving the helper
// (and so its owner, of which it is a member) does nothing.
//
// kWhenIdle posts with net::PostWhenIdle (net/idle.h) instead: the flush waits
// until nothing else is ready, so that a burst of messages (a worker's
// Finished and Started, sent together) shares one flush.
//
// Thread safety: none; the loop's thread.
#ifndef DROVER_SERVER_ONCE_PER_TURN_H_
#define DROVER_SERVER_ONCE_PER_TURN_H_

#include <functional>
#include <memory>
#include <utility>

#include "net/event_loop.h"
#include "net/idle.h"

namespace drover::server {

class OncePerTurn {
 public:
  enum When { kNextTurn, kWhenIdle };
  OncePerTurn(net::EventLoop& loop, std::function<void()> flush, When when = kNextTurn)
      : loop_(loop), flush_(std::move(flush)), when_(when) {}
  OncePerTurn(const OncePerTurn&) = delete;
  OncePerTurn& operator=(const OncePerTurn&) = delete;

  void Request() {
    if (pending_) return;
    pending_ = true;
    std::weak_ptr<bool> alive = alive_;
    auto run = [this, alive] {
      if (!alive.expired()) flush_();
    };
    if (when_ == kWhenIdle) {
      net::PostWhenIdle(loop_, std::move(run));
    } else {
      loop_.Post(std::move(run));
    }
  }
  void Clear() { pending_ = false; }
  bool pending() const { return pending_; }

 private:
  net::EventLoop& loop_;
  std::function<void()> flush_;
  When when_;
  bool pending_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace drover::server

#endif  // DROVER_SERVER_ONCE_PER_TURN_H_
