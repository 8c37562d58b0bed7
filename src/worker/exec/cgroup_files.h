// Small helpers over cgroupfs files, shared by the v1 and v2 backends.
//
// Writes open with O_CREAT so the same code runs against a fake cgroupfs
// (a plain directory) in tests; on a real cgroupfs the files exist already
// and O_CREAT is a no-op.
//
// Threading: pure functions over the file system.
#ifndef DROVER_WORKER_EXEC_CGROUP_FILES_H_
#define DROVER_WORKER_EXEC_CGROUP_FILES_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "common/unique_fd.h"

namespace drover::worker {

// Writes `value` to `path` in one write(2). Errors name the file, the value
// and the kernel's reason.
Status WriteCgroupFile(const std::string& path, std::string_view value);

// Reads a whole (small) file. NotFound when it does not exist.
Result<std::string> ReadCgroupFile(const std::string& path);

// The value of `key` in a "key value" per line file (cpu.stat,
// memory.events, memory.oom_control); nullopt when absent.
std::optional<uint64_t> ReadKeyedValue(const std::string& path, std::string_view key);
// A file holding one number (memory.peak, cpuacct.usage); nullopt when
// absent or not a number.
std::optional<uint64_t> ReadNumber(const std::string& path);
// The same two over text already read.
std::optional<uint64_t> ParseKeyedValue(std::string_view text, std::string_view key);
std::optional<uint64_t> ParseNumber(std::string_view text);

// A cgroup file read again and again (a counter after every task): opened
// on the first Read and kept open; each Read is one pread at offset 0 (a
// cgroupfs file starts over there) instead of open, read, read, close.
// One made `writable` is opened for reading and writing, and Write is one
// pwrite (a counter reset between tasks). Close() before removing the
// cgroup. Move-only.
class KeptFile {
 public:
  KeptFile() = default;
  explicit KeptFile(std::string path, bool writable = false)
      : path_(std::move(path)), writable_(writable) {}
  ~KeptFile() { Close(); }
  KeptFile(KeptFile&& other) noexcept;
  KeptFile& operator=(KeptFile&& other) noexcept;
  KeptFile(const KeptFile&) = delete;
  KeptFile& operator=(const KeptFile&) = delete;

  // The contents (its first 4 KiB); nullopt when it cannot be read.
  std::optional<std::string> Read();
  // Writes `value` (writable files only); an error names the file.
  Status Write(std::string_view value);
  void Close();

 private:
  bool Open();
  std::string path_;
  bool writable_ = false;
  int fd_ = -1;
};

// The pids listed in a cgroup.procs file.
Result<std::vector<pid_t>> ReadProcs(const std::string& path);

// Opens a pidfd for each pid and sends it SIGKILL through the pidfd (so a
// recycled pid is never hit). Pids that already exited are skipped.
// Returns the pidfds.
std::vector<UniqueFd> KillPids(const std::vector<pid_t>& pids);

// This process's cgroup path for a v1 `controller` ("memory", "cpu") or,
// with controller "", its v2 path, from /proc/self/cgroup ("/" for root).
Result<std::string> CurrentCgroup(std::string_view controller);

// pidfd_open(2) and pidfd_send_signal(2) through syscall(2): Debian 12's
// <sys/pidfd.h> lacks extern "C", so its declarations do not link from C++.
// Return -1 with errno set on failure, like the system calls.
int PidfdOpen(pid_t pid);
int PidfdSendSignal(int pidfd, int sig);

// Writes FROZEN to freezer.state `state` and re-reads it until it says
// FROZEN (every member stopped, not FREEZING): true when it does within
// `bound`, false when not or when it cannot be read; an error when the
// write fails. The v1 freezer has no event to wait on: a freeze takes
// microseconds, so the first reads come back to back, later ones a
// millisecond apart. The write is repeated while waiting: the kernel
// freezes the members it finds at a write, and one that went to sleep
// unfrozen in between stays so until the next (seen on 6.x: a vfork
// parent whose child froze before its exec leaves the cgroup FREEZING).
Result<bool> FreezeV1AndWait(const std::string& state, Duration bound);

// Finds cgroup v1 `controller`'s mount under `mounts` and creates
// <current cgroup>/drover/w<pid> in it (a cpuset level starts with every
// core and memory node its parent has): its path. Absent where the
// controller is not mounted or not writable, unless `required`: then
// FailedPrecondition naming why.
Result<std::optional<std::string>> PrepareV1Base(const std::string& mounts,
                                                 const std::string& controller, bool required);

// mkdir that treats EEXIST as success.
Status MakeDir(const std::string& path, mode_t mode = 0755);

}  // namespace drover::worker

#endif  // DROVER_WORKER_EXEC_CGROUP_FILES_H_
