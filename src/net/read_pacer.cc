#include "net/read_pacer.h"

#include <utility>

namespace drover::net {

ReadPacer::ReadPacer(EventLoop& loop, size_t per_turn)
    : loop_(loop), per_turn_(per_turn == 0 ? 1 : per_turn) {}

void ReadPacer::Next(std::function<void()> read) {
  if (waiting_.empty() && used_ < per_turn_) {
    ++used_;
    read();
    return;
  }
  waiting_.push_back(std::move(read));
  if (resume_posted_) return;
  resume_posted_ = true;
  // Posted, it runs after what is queued now. The reads it starts complete
  // after the loop's next look at epoll (asio queues the completions it
  // finds there behind what runs before it), so what became readable by
  // then waits for at most this batch and the one before.
  std::weak_ptr<ReadPacer> self = weak_from_this();
  loop_.Post([self] {
    if (auto pacer = self.lock()) pacer->Resume();
  });
}

void ReadPacer::Resume() {
  resume_posted_ = false;
  used_ = 0;
  ++batches_;
  while (!waiting_.empty() && used_ < per_turn_) {
    std::function<void()> read = std::move(waiting_.front());
    waiting_.pop_front();
    ++used_;
    read();
  }
  if (!waiting_.empty()) {
    resume_posted_ = true;
    std::weak_ptr<ReadPacer> self = weak_from_this();
    loop_.Post([self] {
      if (auto pacer = self.lock()) pacer->Resume();
    });
  }
}

void ReadPacer::Clear() { waiting_.clear(); }

}  // namespace drover::net
