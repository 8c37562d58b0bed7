#include "worker/exec/host_features.h"

#include <sched.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace drover::worker {
namespace {

std::string DeviceText(dev_t dev) {
  return std::to_string(major(dev)) + ":" + std::to_string(minor(dev));
}

// The first line of a small sysfs file, without its newline; "" when absent.
std::string ReadLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

bool CanMakePrivateNetwork() {
  // A child, so that this process keeps its own namespace; vfork-free: the
  // child only makes system calls before _exit.
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) _exit(unshare(CLONE_NEWNET) == 0 ? 0 : 1);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return false;
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

Result<std::string> BlockDeviceOf(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return Unavailable("cannot stat " + path + ": " + strerror(errno));
  }
  const std::string dev = DeviceText(st.st_dev);
  const std::string sys = "/sys/dev/block/" + dev;
  if (access(sys.c_str(), F_OK) != 0) {
    return FailedPrecondition(path + " is on device " + dev +
                              ", which is no block device (tmpfs, overlayfs, a btrfs subvolume "
                              "or a network file system): disk I/O limits need one");
  }
  // A partition: its disk is the directory above it in sysfs.
  if (access((sys + "/partition").c_str(), F_OK) == 0) {
    const std::string disk = ReadLine(sys + "/../dev");
    if (disk.empty()) return FailedPrecondition("cannot find the disk of partition " + dev);
    return disk;
  }
  return dev;
}

std::optional<uint64_t> FreeDiskBytes(const std::string& dir) {
  struct statvfs fs {};
  if (statvfs(dir.c_str(), &fs) != 0) return std::nullopt;
  return static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
}

}  // namespace drover::worker
