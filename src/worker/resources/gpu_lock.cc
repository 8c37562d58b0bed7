#include "worker/resources/gpu_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace drover::worker {

namespace {

// A file name from the GPU's identity: letters, digits and '-' only.
std::string LockName(const GpuInfo& gpu) {
  std::string id = gpu.uuid.empty() ? "index-" + std::to_string(gpu.index) : gpu.uuid;
  for (char& c : id) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-')) c = '_';
  }
  return "drover-gpu-" + id + ".lock";
}

std::string Describe(const GpuInfo& gpu) {
  return "GPU " + std::to_string(gpu.index) + (gpu.uuid.empty() ? "" : " (" + gpu.uuid + ")");
}

}  // namespace

std::string GpuLocks::DefaultDir() {
  if (const char* dir = std::getenv("DROVER_LOCK_DIR"); dir != nullptr && *dir != '\0') return dir;
  struct stat st {};
  if (stat("/run/lock", &st) == 0 && S_ISDIR(st.st_mode) && access("/run/lock", W_OK) == 0) {
    return "/run/lock";
  }
  return "/tmp";
}

Result<GpuLocks> GpuLocks::Acquire(const std::string& dir, const std::vector<GpuInfo>& gpus,
                                   std::vector<GpuInfo>* kept, std::vector<std::string>* refused) {
  GpuLocks locks;
  kept->clear();
  if (gpus.empty()) return locks;
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) {
    return Unavailable("GPU lock directory " + dir + ": " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) return Unavailable("GPU lock directory " + dir + ": not a directory");
  for (const GpuInfo& gpu : gpus) {
    const std::string path = dir + "/" + LockName(gpu);
    // Readable by all, so a worker of another user can lock the same file.
    int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
      refused->push_back(Describe(gpu) + ": cannot open " + path + " (" + std::strerror(errno) +
                         "): offered unguarded; a second worker on this machine could offer it "
                         "too");
      kept->push_back(gpu);
      continue;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      close(fd);
      if (err == EWOULDBLOCK) {
        refused->push_back(Describe(gpu) +
                           " is offered by another drover worker on this machine: not offering "
                           "it here (lock " + path + ")");
        continue;
      }
      refused->push_back(Describe(gpu) + ": cannot lock " + path + " (" + std::strerror(err) +
                         "): offered unguarded");
      kept->push_back(gpu);
      continue;
    }
    locks.fds_.push_back(fd);
    kept->push_back(gpu);
  }
  return locks;
}

GpuLocks::GpuLocks(GpuLocks&& other) noexcept : fds_(std::exchange(other.fds_, {})) {}

GpuLocks& GpuLocks::operator=(GpuLocks&& other) noexcept {
  if (this != &other) {
    Close();
    fds_ = std::exchange(other.fds_, {});
  }
  return *this;
}

GpuLocks::~GpuLocks() { Close(); }

void GpuLocks::Close() {
  for (int fd : fds_) close(fd);
  fds_.clear();
}

}  // namespace drover::worker
