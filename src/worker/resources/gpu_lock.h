// GpuLocks: one worker per GPU on a machine. Two `drover worker` processes
// on one machine that both detect its GPUs would each offer them, and the
// server would place a task on the same GPU through both. Each worker takes
// an exclusive lock per GPU it offers, a file in a directory every worker
// of the machine shares (/run/lock, or $DROVER_LOCK_DIR): a GPU whose lock
// another worker holds is not offered, with a warning naming it.
//
// The lock is flock(2) on an open file, so it lives exactly as long as the
// worker process: a worker killed with SIGKILL leaves nothing to clean up.
// GPUs with a UUID are locked by UUID (the same device whatever its index),
// GPUs given by hand (--gpus, no UUID) by index.
//
// Thread safety: a plain value that owns file descriptors; one thread.
#ifndef DROVER_WORKER_RESOURCES_GPU_LOCK_H_
#define DROVER_WORKER_RESOURCES_GPU_LOCK_H_

#include <string>
#include <vector>

#include "common/status.h"
#include "worker/resources/gpu.h"

namespace drover::worker {

class GpuLocks {
 public:
  // The directory the machine's workers share: $DROVER_LOCK_DIR when set,
  // else /run/lock (world-writable on Debian), else /tmp.
  static std::string DefaultDir();

  // Locks each of `gpus` in `dir`; returns the locks held and, in `kept`,
  // the GPUs locked here, in order. `refused` gets one line per GPU another
  // process holds ("GPU 0 (GPU-...) is offered by another worker on this
  // machine"). Errors only when the directory cannot be used at all
  // (kUnavailable naming it); a GPU whose lock file cannot be opened is
  // kept, with a line in `refused` saying it is unguarded.
  static Result<GpuLocks> Acquire(const std::string& dir, const std::vector<GpuInfo>& gpus,
                                  std::vector<GpuInfo>* kept, std::vector<std::string>* refused);

  GpuLocks() = default;
  GpuLocks(GpuLocks&& other) noexcept;
  GpuLocks& operator=(GpuLocks&& other) noexcept;
  GpuLocks(const GpuLocks&) = delete;
  GpuLocks& operator=(const GpuLocks&) = delete;
  ~GpuLocks();

  size_t size() const { return fds_.size(); }

 private:
  void Close();
  std::vector<int> fds_;
};

}  // namespace drover::worker

#endif  // DROVER_WORKER_RESOURCES_GPU_LOCK_H_
