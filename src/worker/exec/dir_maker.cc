#include "worker/exec/dir_maker.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace drover::worker {

Result<std::unique_ptr<DirMaker>> DirMaker::Create() {
  UniqueFd done(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!done.valid()) return Unavailable(std::string("cannot make an eventfd: ") + strerror(errno));
  std::unique_ptr<DirMaker> maker(new DirMaker(std::move(done)));
  maker->thread_ = std::thread([m = maker.get()] { m->Run(); });
  return maker;
}

DirMaker::~DirMaker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void DirMaker::Add(uint64_t key, Work work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.emplace_back(key, std::move(work));
  }
  wake_.notify_one();
}

std::vector<std::pair<uint64_t, Status>> DirMaker::TakeDone() {
  uint64_t count;
  (void)!read(done_.fd(), &count, sizeof count);
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(outcomes_, {});
}

void DirMaker::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
    if (stop_) return;
    // Every job waiting now, then one wake-up of the owner for all of them.
    while (!jobs_.empty() && !stop_) {
      auto [key, work] = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      Status outcome = work();
      lock.lock();
      outcomes_.emplace_back(key, std::move(outcome));
    }
    const uint64_t one = 1;
    (void)!write(done_.fd(), &one, sizeof one);
  }
}

}  // namespace drover::worker
