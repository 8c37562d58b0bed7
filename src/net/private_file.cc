#include "net/private_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace drover::net {
namespace {

std::string OsError(std::string_view what, const std::string& path, int err) {
  std::string msg(what);
  msg += " ";
  msg += path;
  msg += ": ";
  msg += std::strerror(err);
  return msg;
}

}  // namespace

Status WritePrivateFile(const std::string& path, const std::string& content) {
  std::filesystem::path p(path);
  if (p.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(p.parent_path(), ec);
    if (ec) return Internal("cannot create directory " + p.parent_path().string() + ": " + ec.message());
  }
  const std::string tmp = path + ".tmp";
  ::unlink(tmp.c_str());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Internal(OsError("cannot create", tmp, errno));
  // The umask cannot widen 0600, but fchmod makes the mode explicit even if
  // the file system ignores the create mode.
  ::fchmod(fd, 0600);
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return Internal(OsError("cannot write", tmp, err));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return Internal(OsError("cannot fsync", tmp, err));
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return Internal(OsError("cannot rename into", path, err));
  }
  return Status::Ok();
}

Result<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int err = errno;
    if (err == ENOENT) return NotFound(path + " does not exist");
    return Internal(OsError("cannot open", path, err));
  }
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) return Internal("cannot read " + path);
  return out.str();
}

bool PathExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace drover::net
