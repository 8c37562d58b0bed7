#include "worker/exec/host_features.h"

#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
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

std::string SelfIdMap(unsigned id) { return std::to_string(id) + " " + std::to_string(id) + " 1"; }

bool CanMakePrivateNetwork() {
  // The steps a task's start takes (spawn.cc), in a child, so that this
  // process keeps its own namespaces; the child only makes system calls
  // before _exit. Not root: inside a user namespace that maps the worker's
  // own ids (where the kernel allows unprivileged user namespaces).
  const bool root = geteuid() == 0;
  const std::string uid_map = SelfIdMap(geteuid());
  const std::string gid_map = SelfIdMap(getegid());
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    auto write_file = [](const char* path, const std::string& text) {
      const int fd = open(path, O_WRONLY | O_CLOEXEC);
      if (fd < 0) return false;
      const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
      close(fd);
      return ok;
    };
    if (!root && (unshare(CLONE_NEWUSER) != 0 || !write_file("/proc/self/setgroups", "deny") ||
                  !write_file("/proc/self/uid_map", uid_map) ||
                  !write_file("/proc/self/gid_map", gid_map))) {
      _exit(1);
    }
    if (unshare(CLONE_NEWNET) != 0) _exit(1);
    const int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq ifr {};
    ifr.ifr_name[0] = 'l';
    ifr.ifr_name[1] = 'o';
    if (sock < 0 || ioctl(sock, SIOCGIFFLAGS, &ifr) != 0) _exit(1);
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
    _exit(ioctl(sock, SIOCSIFFLAGS, &ifr) == 0 ? 0 : 1);
  }
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
