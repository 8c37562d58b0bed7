#include "worker/files/file_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "common/unique_fd.h"

namespace drover::worker {

bool IsNoSpace(int errno_value) { return errno_value == ENOSPC || errno_value == EDQUOT; }

Status ErrnoStatus(int errno_value, const std::string& what) {
  // strerror(EDQUOT) reads "Disk quota exceeded"; both say the same to callers.
  if (IsNoSpace(errno_value)) {
    std::string msg = what + ": no space left on device";
    if (errno_value == EDQUOT) msg += " (disk quota exceeded)";
    return ResourceExhausted(std::move(msg));
  }
  std::string msg = what + ": " + std::strerror(errno_value);
  switch (errno_value) {
    case ENOENT:
      return NotFound(std::move(msg));
    case EACCES:
    case EPERM:
      return PermissionDenied(std::move(msg));
    default:
      return Internal(std::move(msg));
  }
}

Status WriteAll(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "cannot write " + path);
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

Status MakeDirs(const std::string& dir, unsigned mode) {
  if (dir.empty()) return Status::Ok();
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Status::Ok();
    return FailedPrecondition(dir + " exists and is not a directory");
  }
  RETURN_IF_ERROR(MakeDirs(ParentDir(dir), mode));
  if (::mkdir(dir.c_str(), mode) != 0 && errno != EEXIST) {
    return ErrnoStatus(errno, "cannot create directory " + dir);
  }
  return Status::Ok();
}

Status CopyFile(const std::string& from, const std::string& to, unsigned mode) {
  UniqueFd in(::open(from.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in.valid()) return ErrnoStatus(errno, "cannot open " + from);
  UniqueFd out(::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (!out.valid()) return ErrnoStatus(errno, "cannot create " + to);
  auto fail = [&](Status s) {
    out.Reset();
    ::unlink(to.c_str());
    return s;
  };
  std::vector<char> buf(size_t{1} << 20);
  for (;;) {
    ssize_t n = ::read(in.fd(), buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(ErrnoStatus(errno, "cannot read " + from));
    }
    if (n == 0) break;
    Status s = WriteAll(out.fd(), std::string_view(buf.data(), static_cast<size_t>(n)), to);
    if (!s.ok()) return fail(std::move(s));
  }
  // The descriptor was created with `mode`, which the umask may have narrowed.
  if (::fchmod(out.fd(), mode) != 0) return fail(ErrnoStatus(errno, "cannot chmod " + to));
  if (::close(out.Release()) != 0) return fail(ErrnoStatus(errno, "cannot write " + to));
  return Status::Ok();
}

std::string ShortSha(const std::string& sha256) { return sha256.substr(0, 12) + "..."; }

std::string ParentDir(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return "";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

Result<std::vector<std::string>> ListDir(int dir_fd, const std::string& what) {
  // fdopendir takes the descriptor it is given; hand it a copy.
  int copy = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return ErrnoStatus(errno, "cannot list " + what);
  DIR* d = ::fdopendir(copy);
  if (d == nullptr) {
    int err = errno;
    ::close(copy);
    return ErrnoStatus(err, "cannot list " + what);
  }
  std::vector<std::string> names;
  errno = 0;
  while (struct dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(std::move(n));
    errno = 0;
  }
  int err = errno;
  ::closedir(d);
  if (err != 0) return ErrnoStatus(err, "cannot list " + what);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace drover::worker
