#include "worker/exec/spare_dirs.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

namespace drover::worker {

bool HasEntries(const std::string& dir) {
  // Read without touching the directory's access time where the worker may
  // (it owns the directory or is root): a fresh directory's first read
  // would otherwise dirty its inode, one journal handle per task on ext4,
  // and on a full journal the loop would wait for the checkpoint.
  constexpr int kFlags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
  int fd = ::open(dir.c_str(), kFlags | O_NOATIME);
  if (fd < 0 && errno == EPERM) fd = ::open(dir.c_str(), kFlags);
  if (fd < 0) return false;
  alignas(8) char buffer[1024];
  bool found = false;
  for (;;) {
    const ssize_t n = ::getdents64(fd, buffer, sizeof(buffer));
    if (n <= 0) break;
    for (ssize_t at = 0; at < n && !found;) {
      const auto* e = reinterpret_cast<const dirent64*>(buffer + at);
      const std::string_view name = e->d_name;
      found = name != "." && name != "..";
      at += e->d_reclen;
    }
    if (found) break;
  }
  ::close(fd);
  return found;
}

bool InodesDearAfterDeletes(const std::string& dir) {
  struct statfs fs;
  if (statfs(dir.c_str(), &fs) != 0 || fs.f_type != EXT4_SUPER_MAGIC) return false;
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) return false;
  // The block device's name ("vda1", "loop0"), as ext4 and jbd2 name it.
  const std::string sys =
      "/sys/dev/block/" + std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
  char target[4096];
  const ssize_t n = readlink(sys.c_str(), target, sizeof(target) - 1);
  if (n <= 0) return false;
  target[n] = '\0';
  const char* slash = std::strrchr(target, '/');
  const std::string device = slash != nullptr ? slash + 1 : target;
  if (access(("/sys/fs/ext4/" + device).c_str(), F_OK) != 0) return false;  // not ext4's
  // A journal is /proc/fs/jbd2/<device>-<journal inode>; no such directory
  // at all while no file system with a journal is mounted.
  bool journal = false;
  if (DIR* d = opendir("/proc/fs/jbd2")) {
    const std::string prefix = device + "-";
    while (dirent* e = readdir(d)) {
      if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) journal = true;
    }
    closedir(d);
  }
  return !journal;
}

SpareDirs::SpareDirs(std::string dir, size_t per_owner)
    : dir_(std::move(dir)), per_owner_(per_owner) {}

Status SpareDirs::Open() {
  if (mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) {
    return Unavailable("cannot create " + dir_ + ": " + strerror(errno));
  }
  if (chmod(dir_.c_str(), 0700) != 0) {
    return Unavailable("cannot make " + dir_ + " private: " + strerror(errno));
  }
  // An earlier run's spares: their owners are not known any more. Only
  // empty ones were ever kept; anything else stays where it is.
  if (DIR* d = opendir(dir_.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") rmdir((dir_ + "/" + name).c_str());
    }
    closedir(d);
  }
  return Status::Ok();
}

Status SpareDirs::Make(const std::string& path, mode_t mode, uid_t owner) {
  auto pool = spare_.find(owner);
  while (pool != spare_.end() && !pool->second.empty()) {
    std::string spare = std::move(pool->second.back());
    pool->second.pop_back();
    // Written to while it was kept (a process of its last task that
    // outlived it, without cgroups to end it, through its working
    // directory): not handed on, and left where it is.
    if (HasEntries(spare)) continue;
    // RENAME_NOREPLACE: an existing `path` is kept as mkdir keeps it.
    if (renameat2(AT_FDCWD, spare.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE) == 0) {
      if (chmod(path.c_str(), mode) == 0) return Status::Ok();
      const int err = errno;
      rmdir(path.c_str());
      return Unavailable("cannot set the mode of " + path + ": " + strerror(err));
    }
    const bool exists = errno == EEXIST;
    if (access(spare.c_str(), F_OK) != 0) continue;  // gone from under us: the next one
    pool->second.push_back(std::move(spare));
    if (exists) return Status::Ok();
    break;  // `path` cannot be made there: mkdir says why
  }
  if (mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
    return Unavailable("cannot create " + path + ": " + strerror(errno));
  }
  return Status::Ok();
}

bool SpareDirs::Recycle(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || HasEntries(path)) return false;
  std::vector<std::string>& pool = spare_[st.st_uid];
  if (pool.size() >= per_owner_) return false;
  std::string spare = dir_ + "/" + std::to_string(next_++);
  if (renameat2(AT_FDCWD, path.c_str(), AT_FDCWD, spare.c_str(), RENAME_NOREPLACE) != 0) {
    return false;
  }
  // What was moved must be what was looked at: a process of the task that
  // outlived it (its directory is the task user's) could have put a
  // symlink in its place meanwhile, and the next task's chmod and chown
  // would follow it. Nor may it have been written to since. Anything else
  // is put back where it was, out of use.
  struct stat moved;
  if (lstat(spare.c_str(), &moved) != 0 || !S_ISDIR(moved.st_mode) || moved.st_ino != st.st_ino ||
      moved.st_dev != st.st_dev || HasEntries(spare)) {
    renameat2(AT_FDCWD, spare.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE);
    return false;
  }
  pool.push_back(std::move(spare));
  return true;
}

size_t SpareDirs::kept() const {
  size_t n = 0;
  for (const auto& [owner, pool] : spare_) n += pool.size();
  return n;
}

}  // namespace drover::worker
