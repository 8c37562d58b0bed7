#include "store/posix_env.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace drover::store {
namespace {

Status ErrnoStatus(std::string_view what, const std::string& path, int err) {
  std::string msg = std::string(what) + " " + path + ": " + std::strerror(err);
  if (err == ENOSPC || err == EDQUOT) return ResourceExhausted(std::move(msg));
  if (err == ENOENT) return NotFound(std::move(msg));
  if (err == EACCES || err == EPERM) return PermissionDenied(std::move(msg));
  return Unavailable(std::move(msg));
}

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  ~PosixWritableFile() override { ::close(fd_); }

  Status Append(std::string_view data) override {
    while (!data.empty()) {
      ssize_t n = ::pwrite(fd_, data.data(), data.size(), static_cast<off_t>(size_));
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus("write", path_, errno);
      }
      size_ += static_cast<uint64_t>(n);
      data.remove_prefix(static_cast<size_t>(n));
    }
    return Status::Ok();
  }

  Status Sync() override {
    if (::fdatasync(fd_) != 0) return ErrnoStatus("fsync", path_, errno);
    return Status::Ok();
  }

  Status Truncate(uint64_t size) override {
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
      return ErrnoStatus("truncate", path_, errno);
    }
    size_ = size;
    return Status::Ok();
  }

  uint64_t Size() const override { return size_; }

 private:
  std::string path_;
  int fd_;
  // pwrite at an explicit offset rather than O_APPEND, so that after a
  // Truncate() the next append lands exactly at the cut.
  uint64_t size_;
};

Result<std::unique_ptr<WritableFile>> OpenWith(const std::string& path, int flags) {
  // The journal holds jobs' environment variables: owner only (0600), and
  // a file an older version made 0644 is narrowed when it is opened again.
  int fd = ::open(path.c_str(), flags | O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus("open", path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus("stat", path, err);
  }
  if ((st.st_mode & 077) != 0 && ::fchmod(fd, st.st_mode & 0700) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus("chmod", path, err);
  }
  return std::unique_ptr<WritableFile>(
      std::make_unique<PosixWritableFile>(path, fd, static_cast<uint64_t>(st.st_size)));
}

}  // namespace

Result<std::string> PosixEnv::ReadFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open", path, errno);
  // Read straight into a string of the file's size (a journal of a million
  // tasks is hundreds of MB: growing a string 64 KiB at a time copied it
  // twice over into fresh pages). A file that grows meanwhile is read on.
  struct stat st {};
  size_t size = ::fstat(fd, &st) == 0 && st.st_size > 0 ? static_cast<size_t>(st.st_size) : 0;
  std::string out(size + 1, '\0');
  size_t got = 0;
  for (;;) {
    if (got == out.size()) out.resize(out.size() * 2);
    ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return ErrnoStatus("read", path, err);
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(got);
  return out;
}

Result<std::unique_ptr<WritableFile>> PosixEnv::OpenAppendable(const std::string& path) {
  return OpenWith(path, 0);
}

Result<std::unique_ptr<WritableFile>> PosixEnv::CreateTruncated(const std::string& path) {
  return OpenWith(path, O_TRUNC);
}

Status PosixEnv::Rename(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) return ErrnoStatus("rename", from, errno);
  return Status::Ok();
}

Status PosixEnv::Remove(const std::string& path) {
  if (::unlink(path.c_str()) != 0) return ErrnoStatus("remove", path, errno);
  return Status::Ok();
}

bool PosixEnv::Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

Status PosixEnv::CreateDirs(const std::string& path) {
  if (path.empty() || path == "/" || path == ".") return Status::Ok();
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Status::Ok();
    return FailedPrecondition(path + " exists and is not a directory");
  }
  RETURN_IF_ERROR(CreateDirs(DirName(path)));
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoStatus("mkdir", path, errno);
  }
  return Status::Ok();
}

Status PosixEnv::SyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open", dir, errno);
  Status s;
  if (::fsync(fd) != 0) s = ErrnoStatus("fsync", dir, errno);
  ::close(fd);
  return s;
}

}  // namespace drover::store
