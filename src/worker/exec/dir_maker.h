// DirMaker: makes task directories on a thread of its own, so that a file
// system that makes the executor wait (ext4 checkpointing a full journal
// into the inode tables, a slow disk) holds no other task's start or end.
//
// Measured under many short tasks on ext4 with a 64 MiB journal (a file
// system under 16 GiB): a worker's loop spent a quarter of its time
// waiting in mkdir for the journal's checkpoint (bench/README.md).
//
// The executor hands over each job (Add: a key and the work, which must
// touch nothing but what it holds) and watches done_fd() on its reactor;
// when it is readable, TakeDone returns the outcomes in the order the
// jobs came.
//
// Threading: Add, TakeDone and the destructor on the owner's thread; the
// work on the maker's. The destructor waits for a job in progress; the
// outcomes of the others are never taken.
#ifndef DROVER_WORKER_EXEC_DIR_MAKER_H_
#define DROVER_WORKER_EXEC_DIR_MAKER_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"

namespace drover::worker {

class DirMaker {
 public:
  using Work = std::function<Status()>;

  // Fails when the eventfd or the thread cannot be made.
  static Result<std::unique_ptr<DirMaker>> Create();
  ~DirMaker();
  DirMaker(const DirMaker&) = delete;
  DirMaker& operator=(const DirMaker&) = delete;

  // Readable once an outcome is waiting.
  int done_fd() const { return done_.fd(); }
  void Add(uint64_t key, Work work);
  // The outcomes so far, by key (and clears done_fd()'s readiness).
  std::vector<std::pair<uint64_t, Status>> TakeDone();

 private:
  explicit DirMaker(UniqueFd done) : done_(std::move(done)) {}
  void Run();

  UniqueFd done_;  // eventfd
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::pair<uint64_t, Work>> jobs_;
  std::vector<std::pair<uint64_t, Status>> outcomes_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace drover::worker

#endif  // DROVER_WORKER_EXEC_DIR_MAKER_H_
