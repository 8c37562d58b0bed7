#include "worker/exec/directory_sizer.h"

#include <ftw.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <utility>

namespace drover::worker {
namespace {

// nftw has no context argument: the walk on this thread adds up here.
struct Walk {
  std::string skip;
  uint64_t bytes = 0;
  std::set<std::pair<dev_t, ino_t>> linked;  // inodes with several names, counted once
  const std::atomic<bool>* stop = nullptr;
};
thread_local Walk* walk = nullptr;

int Visit(const char* path, const struct stat* st, int type, FTW*) {
  if (walk->stop != nullptr && walk->stop->load(std::memory_order_relaxed)) return FTW_STOP;
  if (type == FTW_D && walk->skip == path) return FTW_SKIP_SUBTREE;
  if (type == FTW_NS || type == FTW_DNR) return FTW_CONTINUE;  // gone meanwhile, or unreadable
  if (st->st_nlink > 1 && type != FTW_D && !walk->linked.emplace(st->st_dev, st->st_ino).second) {
    return FTW_CONTINUE;
  }
  walk->bytes += static_cast<uint64_t>(st->st_blocks) * 512;
  return FTW_CONTINUE;
}

}  // namespace

uint64_t DirectorySizer::DirectoryBytes(const std::string& dir, const std::string& skip,
                                        const std::atomic<bool>* stop) {
  Walk w;
  w.skip = skip;
  w.stop = stop;
  walk = &w;
  nftw(dir.c_str(), Visit, 64, FTW_PHYS | FTW_MOUNT | FTW_ACTIONRETVAL);
  walk = nullptr;
  return w.bytes;
}

Result<std::unique_ptr<DirectorySizer>> DirectorySizer::Create() {
  UniqueFd done(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!done.valid()) return Unavailable(std::string("cannot make an eventfd: ") + strerror(errno));
  std::unique_ptr<DirectorySizer> sizer(new DirectorySizer(std::move(done)));
  sizer->thread_ = std::thread([s = sizer.get()] { s->Run(); });
  return sizer;
}

DirectorySizer::~DirectorySizer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void DirectorySizer::Measure(TaskId task, uint32_t attempt, std::string dir, std::string skip) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(Request{task, attempt, std::move(dir), std::move(skip)});
  }
  wake_.notify_one();
}

std::vector<DirectorySizer::Done> DirectorySizer::TakeDone() {
  uint64_t count;
  (void)!read(done_.fd(), &count, sizeof count);
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(answers_, {});
}

void DirectorySizer::Run() {
  for (;;) {
    Request request;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [this] { return stop_ || !requests_.empty(); });
      if (stop_) return;
      request = std::move(requests_.front());
      requests_.pop_front();
    }
    Stopwatch took;
    const uint64_t bytes = DirectoryBytes(request.dir, request.skip, &stop_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      answers_.push_back(Done{request.task, request.attempt, bytes, took.Elapsed()});
    }
    const uint64_t one = 1;
    (void)!write(done_.fd(), &one, sizeof one);
  }
}

}  // namespace drover::worker
