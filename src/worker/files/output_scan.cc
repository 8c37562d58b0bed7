#include "worker/files/output_scan.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "common/quantity.h"
#include "common/unique_fd.h"
#include "net/sha256.h"
#include "worker/files/file_util.h"

namespace drover::worker {

using net::IsSha256Hex;
using net::Sha256;
using net::Sha256OfFile;
namespace {

// A file found by the walk, before hashing: where to read it from (the
// target's path for a followed symlink).
struct Found {
  std::string name;
  std::string read_path;
  uint64_t size = 0;
};

std::string KindOf(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISDIR(mode)) return "a directory";
  return "not a regular file";
}

Status Refuse(const std::string& name, const std::string& why) {
  return InvalidArgument("output " + name + ": " + why);
}

class Walker {
 public:
  Walker(std::string root, std::string real_root, size_t max_files)
      : root_(std::move(root)), real_root_(std::move(real_root)), max_files_(max_files) {}

  // Walks the directory open as `dir_fd`, whose entries are named
  // `prefix` + name.
  Status Walk(int dir_fd, const std::string& prefix) {
    ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(dir_fd, prefix));
    for (const std::string& entry : names) {
      const std::string name = prefix + entry;
      struct stat st;
      if (::fstatat(dir_fd, entry.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        return ErrnoStatus(errno, "cannot stat output " + name);
      }
      if (S_ISREG(st.st_mode)) {
        RETURN_IF_ERROR(Add(name, root_ + "/" + name, static_cast<uint64_t>(st.st_size)));
      } else if (S_ISDIR(st.st_mode)) {
        UniqueFd sub(
            ::openat(dir_fd, entry.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!sub.valid()) return ErrnoStatus(errno, "cannot open output directory " + name);
        RETURN_IF_ERROR(Walk(sub.fd(), name + "/"));
      } else if (S_ISLNK(st.st_mode)) {
        RETURN_IF_ERROR(FollowLink(dir_fd, entry, name));
      } else {
        return Refuse(name, KindOf(st.st_mode) + "; outputs must be regular files");
      }
    }
    return Status::Ok();
  }

  std::vector<Found> TakeFound() { return std::move(found_); }
  uint64_t total() const { return total_; }

 private:
  static Result<std::vector<std::string>> ListDir(int dir_fd, const std::string& prefix) {
    return worker::ListDir(dir_fd, "output directory " + prefix);
  }

  Status FollowLink(int dir_fd, const std::string& entry, const std::string& name) {
    char target[PATH_MAX];
    ssize_t n = ::readlinkat(dir_fd, entry.c_str(), target, sizeof(target) - 1);
    if (n < 0) return ErrnoStatus(errno, "cannot read output symlink " + name);
    target[n] = '\0';
    const std::string link_path = root_ + "/" + name;
    char resolved[PATH_MAX];
    if (::realpath(link_path.c_str(), resolved) == nullptr) {
      if (errno == ENOENT || errno == ENOTDIR) {
        return Refuse(name, std::string("a dangling symlink to ") + target);
      }
      if (errno == ELOOP) return Refuse(name, "a symlink loop");
      return ErrnoStatus(errno, "cannot resolve output symlink " + name);
    }
    const std::string real = resolved;
    if (real.compare(0, real_root_.size() + 1, real_root_ + "/") != 0) {
      return Refuse(name, "a symlink to " + real + ", outside the output directory");
    }
    struct stat st;
    if (::stat(real.c_str(), &st) != 0) {
      return ErrnoStatus(errno, "cannot stat the target of output symlink " + name);
    }
    if (!S_ISREG(st.st_mode)) {
      return Refuse(name, "a symlink to " + KindOf(st.st_mode) +
                              "; outputs must be regular files or symlinks to them");
    }
    return Add(name, real, static_cast<uint64_t>(st.st_size));
  }

  Status Add(const std::string& name, std::string read_path, uint64_t size) {
    if (found_.size() >= max_files_) {
      return ResourceExhausted("outputs are more than max_files " + std::to_string(max_files_) +
                               " files");
    }
    found_.push_back(Found{name, std::move(read_path), size});
    total_ += size;
    return Status::Ok();
  }

  const std::string root_;
  const std::string real_root_;
  const size_t max_files_;
  std::vector<Found> found_;
  uint64_t total_ = 0;
};

}  // namespace

Result<std::vector<OutputEntry>> ScanOutputs(const std::string& dir, const OutputLimits& limits) {
  UniqueFd root_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd.valid()) {
    if (errno == ENOENT) return std::vector<OutputEntry>{};
    return ErrnoStatus(errno, "cannot open output directory " + dir);
  }
  char real_root[PATH_MAX];
  if (::realpath(dir.c_str(), real_root) == nullptr) {
    return ErrnoStatus(errno, "cannot resolve output directory " + dir);
  }
  std::string root = dir;
  while (root.size() > 1 && root.back() == '/') root.pop_back();

  Walker walker(root, real_root, limits.max_files);
  RETURN_IF_ERROR(walker.Walk(root_fd.fd(), ""));
  if (limits.max_bytes != 0 && walker.total() > limits.max_bytes) {
    return ResourceExhausted("outputs are " + FormatBytes(walker.total()) +
                             ", more than max_output " + FormatBytes(limits.max_bytes) +
                             (limits.whose.empty() ? "" : " (" + limits.whose + ")"));
  }

  std::vector<Found> found = walker.TakeFound();
  // The walk sorts each directory; the whole list is sorted by full name
  // ("a.txt" before "a/b").
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return a.name < b.name; });
  std::vector<OutputEntry> out;
  out.reserve(found.size());
  for (Found& f : found) {
    ASSIGN_OR_RETURN(std::string sha, Sha256OfFile(f.read_path));
    out.push_back(OutputEntry{std::move(f.name), f.size, std::move(sha)});
  }
  return out;
}

}  // namespace drover::worker
