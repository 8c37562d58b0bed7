// DirectorySizer: measures directories on a thread of its own, so that a
// task directory of a million files (a data set unpacked there) never
// holds the executor's loop, which starts and ends every other task.
//
// The executor asks (Measure) and watches done_fd() on its reactor; when
// it is readable, TakeDone returns the answers in the order they came.
// What a directory holds is its files' allocated blocks (a sparse file
// counts what it uses), each inode once, symbolic links not followed,
// other file systems mounted inside not entered, and one subdirectory
// (the task's inputs) left out.
//
// Threading: Measure, TakeDone and the destructor on the owner's thread;
// the walks on the sizer's. The destructor stops a walk in progress.
#ifndef DROVER_WORKER_EXEC_DIRECTORY_SIZER_H_
#define DROVER_WORKER_EXEC_DIRECTORY_SIZER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "common/time.h"
#include "common/unique_fd.h"

namespace drover::worker {

class DirectorySizer {
 public:
  struct Done {
    TaskId task;
    uint32_t attempt = 0;
    uint64_t bytes = 0;
    Duration took = Duration::zero();  // the walk's own time
  };

  // Fails when the eventfd or the thread cannot be made.
  static Result<std::unique_ptr<DirectorySizer>> Create();
  ~DirectorySizer();
  DirectorySizer(const DirectorySizer&) = delete;
  DirectorySizer& operator=(const DirectorySizer&) = delete;

  // Readable once an answer is waiting.
  int done_fd() const { return done_.fd(); }
  // Walks `dir`, leaving out `skip` (empty: nothing), for this attempt.
  void Measure(TaskId task, uint32_t attempt, std::string dir, std::string skip);
  // The answers so far (and clears done_fd()'s readiness).
  std::vector<Done> TakeDone();

  // What `dir` holds, leaving out `skip`, on the calling thread; `stop`
  // (may be null) ends the walk early when it turns true.
  static uint64_t DirectoryBytes(const std::string& dir, const std::string& skip,
                                 const std::atomic<bool>* stop = nullptr);

 private:
  struct Request {
    TaskId task;
    uint32_t attempt = 0;
    std::string dir;
    std::string skip;
  };
  explicit DirectorySizer(UniqueFd done) : done_(std::move(done)) {}
  void Run();

  UniqueFd done_;  // eventfd
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Request> requests_;
  std::vector<Done> answers_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace drover::worker

#endif  // DROVER_WORKER_EXEC_DIRECTORY_SIZER_H_
