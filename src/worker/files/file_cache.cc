#include "worker/files/file_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <tuple>
#include <vector>

#include "common/quantity.h"
#include "common/unique_fd.h"
#include "net/sha256.h"
#include "worker/files/file_util.h"

namespace drover::worker {

using net::IsSha256Hex;
using net::Sha256;
using net::Sha256OfFile;
namespace {

constexpr mode_t kEntryMode = 0444;
constexpr std::string_view kPartSuffix = ".part";
// Where the keeps are recorded, one file per job (file_cache.h).
constexpr char kKeepDir[] = ".keep";
constexpr std::string_view kTmpSuffix = ".tmp";

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

int64_t Nanos(const struct timespec& ts) {
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Whether linking failed in a way a copy can work around.
bool LinkNeedsCopy(int err) { return err == EXDEV || err == EMLINK || err == EPERM; }

// A job id as a keep record's name: decimal digits, no sign, no leading zero.
Result<uint64_t> ParseJobNumber(const std::string& name) {
  if (name.empty() || name.size() > 19 || name[0] == '0') return InvalidArgument("not a job id");
  uint64_t value = 0;
  for (char c : name) {
    if (c < '0' || c > '9') return InvalidArgument("not a job id");
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  return value;
}

}  // namespace

FileCache::FileCache(std::string dir, uint64_t capacity)
    : dir_(std::move(dir)), capacity_(capacity), rng_(std::random_device{}()) {
  stats_.capacity = capacity;
}

FileCache::~FileCache() = default;

Result<FileCache::Fingerprint> FileCache::FingerprintOf(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return ErrnoStatus(errno, "cannot stat " + path);
  if (!S_ISREG(st.st_mode)) return FailedPrecondition(path + " is not a regular file");
  return Fingerprint{st.st_ino, static_cast<uint64_t>(st.st_size), Nanos(st.st_mtim),
                     Nanos(st.st_ctim)};
}

Result<std::unique_ptr<FileCache>> FileCache::Open(const std::string& dir,
                                                   uint64_t capacity_bytes) {
  std::string clean = dir;
  while (clean.size() > 1 && clean.back() == '/') clean.pop_back();
  RETURN_IF_ERROR(MakeDirs(clean, 0700));
  std::unique_ptr<FileCache> cache(new FileCache(clean, capacity_bytes));

  UniqueFd dir_fd(::open(clean.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir_fd.valid()) return ErrnoStatus(errno, "cannot list file cache " + clean);
  ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(dir_fd.fd(), "file cache " + clean));

  struct Found {
    int64_t used_ns;
    std::string sha256;
    Fingerprint fp;
  };
  std::vector<Found> found;
  for (const std::string& name : names) {
    const std::string path = clean + "/" + name;
    if (name == kKeepDir) continue;
    if (EndsWith(name, kPartSuffix)) {
      if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
        spdlog::warn("file cache: cannot remove leftover {}: {}", path, std::strerror(errno));
      }
      continue;
    }
    struct stat st;
    if (!IsSha256Hex(name) || ::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      spdlog::warn("file cache: {} is not a cache entry; left alone", path);
      continue;
    }
    if ((st.st_mode & 07777) != kEntryMode) {
      // Someone made it writable: it may have been changed. Re-hash it.
      Result<std::string> sha = Sha256OfFile(path);
      if (!sha.ok() || *sha != name) {
        spdlog::warn("file cache: {} no longer matches its name ({}); removed", path,
                     sha.ok() ? "content changed" : sha.status().ToString());
        ::unlink(path.c_str());
        continue;
      }
      if (::chmod(path.c_str(), kEntryMode) != 0 || ::lstat(path.c_str(), &st) != 0) {
        return ErrnoStatus(errno, "cannot make cache entry " + path + " read-only");
      }
    }
    found.push_back(Found{std::max(Nanos(st.st_atim), Nanos(st.st_mtim)), name,
                          Fingerprint{st.st_ino, static_cast<uint64_t>(st.st_size),
                                      Nanos(st.st_mtim), Nanos(st.st_ctim)}});
  }
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
    return std::tie(a.used_ns, a.sha256) < std::tie(b.used_ns, b.sha256);
  });

  std::lock_guard<std::mutex> lock(cache->mu_);
  for (const Found& f : found) cache->InsertLocked(f.sha256, f.fp.size, f.fp);
  RETURN_IF_ERROR(cache->LoadKeepsLocked());
  if (capacity_bytes != 0 && cache->stats_.bytes > capacity_bytes) {
    // The capacity shrank since the last run: drop the oldest until it fits,
    // except what is kept.
    std::vector<std::string> victims;
    uint64_t left = cache->stats_.bytes;
    for (const auto& [tick, sha] : cache->lru_) {
      if (left <= capacity_bytes) break;
      if (cache->KeptLocked(sha)) continue;
      victims.push_back(sha);
      left -= cache->entries_.at(sha).size;
    }
    for (const std::string& victim : victims) {
      cache->RemoveLocked(victim);
      ++cache->stats_.evictions;
    }
    if (left > capacity_bytes) {
      spdlog::warn("file cache {}: {} kept for unreleased jobs, over its capacity of {}", clean,
                   FormatBytes(left), FormatBytes(capacity_bytes));
    }
  }
  return cache;
}

bool FileCache::Has(const std::string& sha256) {
  std::lock_guard<std::mutex> lock(mu_);
  bool has = entries_.count(sha256) != 0;
  ++(has ? stats_.hits : stats_.misses);
  return has;
}

Status FileCache::Adopt(const std::string& path, const std::string& sha256, uint64_t size) {
  if (!IsSha256Hex(sha256)) return InvalidArgument("not a SHA-256: \"" + sha256 + "\"");
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(errno, "cannot stat " + path);
  if (!S_ISREG(st.st_mode)) return InvalidArgument(path + " is not a regular file");
  if (static_cast<uint64_t>(st.st_size) != size) {
    return InvalidArgument(path + " is " + std::to_string(st.st_size) + " bytes, not " +
                           std::to_string(size));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (entries_.count(sha256) != 0) return Status::Ok();
  }
  ASSIGN_OR_RETURN(std::string part, BeginFetch(sha256, size));
  // AT_SYMLINK_FOLLOW: an output listed through a symlink is its target.
  if (::linkat(AT_FDCWD, path.c_str(), AT_FDCWD, part.c_str(), AT_SYMLINK_FOLLOW) != 0) {
    int err = errno;
    Status copied = LinkNeedsCopy(err) ? CopyFile(path, part, kEntryMode)
                                       : ErrnoStatus(err, "cannot link " + path + " to " + part);
    if (!copied.ok()) {
      AbortFetch(part);
      return copied;
    }
  }
  return CommitFetch(part, sha256, size);
}

Status FileCache::LinkInto(const std::string& sha256, const std::string& dest) {
  const std::string path = PathOf(sha256);
  Fingerprint known;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(sha256);
    if (it == entries_.end()) return NotFound("file " + sha256 + " is not in the cache");
    TouchLocked(sha256, it->second);
    known = it->second.fp;
    ++pins_[sha256];  // held while checking and linking, so it is not evicted
  }
  struct UnpinOnExit {
    FileCache* cache;
    const std::string& sha256;
    ~UnpinOnExit() { cache->Unpin(sha256); }
  } unpin{this, sha256};

  auto drop = [&](const std::string& why) {
    spdlog::warn("file cache: entry {} {}; dropped", path, why);
    std::lock_guard<std::mutex> lock(mu_);
    if (entries_.count(sha256) != 0) RemoveLocked(sha256);
    return NotFound("file " + sha256 + " is not in the cache (its copy " + why + ")");
  };

  Result<Fingerprint> now = FingerprintOf(path);
  if (!now.ok()) return drop("is unreadable: " + now.status().message());
  if (!(*now == known)) {
    Result<std::string> sha = Sha256OfFile(path);
    if (!sha.ok()) return drop("is unreadable: " + sha.status().message());
    if (*sha != sha256) return drop("was modified (its SHA-256 is now " + ShortSha(*sha) + ")");
    // Touched but intact (chmod, touch): read-only again and remembered as is.
    if (::chmod(path.c_str(), kEntryMode) != 0) {
      return ErrnoStatus(errno, "cannot make cache entry " + path + " read-only");
    }
    ASSIGN_OR_RETURN(Fingerprint fresh, FingerprintOf(path));
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(sha256);
    if (it != entries_.end()) it->second.fp = fresh;
  }

  RETURN_IF_ERROR(MakeDirs(ParentDir(dest), 0755));
  if (::link(path.c_str(), dest.c_str()) != 0) {
    int err = errno;
    if (err == EEXIST) return AlreadyExists("cannot link input " + dest + ": it exists");
    if (!LinkNeedsCopy(err)) return ErrnoStatus(err, "cannot link " + path + " to " + dest);
    return CopyFile(path, dest, kEntryMode);
  }
  // A new link changes the inode's ctime: remember it, or the next LinkInto
  // would take our own link for tampering and re-hash.
  Result<Fingerprint> linked = FingerprintOf(path);
  if (linked.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(sha256);
    if (it != entries_.end()) it->second.fp = *linked;
  }
  return Status::Ok();
}

void FileCache::Pin(const std::string& sha256) {
  std::lock_guard<std::mutex> lock(mu_);
  ++pins_[sha256];
}

void FileCache::Unpin(const std::string& sha256) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pins_.find(sha256);
  if (it == pins_.end()) return;
  if (--it->second <= 0) pins_.erase(it);
}

Result<std::string> FileCache::BeginFetch(const std::string& sha256, uint64_t size) {
  if (!IsSha256Hex(sha256)) return InvalidArgument("not a SHA-256: \"" + sha256 + "\"");
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(MakeRoomLocked(sha256, size));
  char suffix[17];
  std::snprintf(suffix, sizeof(suffix), "%016llx", static_cast<unsigned long long>(rng_()));
  std::string part = PathOf(sha256) + "." + suffix + std::string(kPartSuffix);
  reserved_[part] = size;
  reserved_bytes_ += size;
  return part;
}

Status FileCache::CommitFetch(const std::string& part_path, const std::string& sha256,
                              uint64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  auto res = reserved_.find(part_path);
  if (res != reserved_.end()) {
    reserved_bytes_ -= res->second;
    reserved_.erase(res);
  }
  auto fail = [&](Status s) {
    ::unlink(part_path.c_str());
    return s;
  };
  if (!IsSha256Hex(sha256)) return fail(InvalidArgument("not a SHA-256: \"" + sha256 + "\""));
  if (entries_.count(sha256) != 0) return fail(Status::Ok());  // another fetch won

  // Metadata operations only: short enough to hold the lock, which keeps two
  // commits of one file from both counting it.
  if (::chmod(part_path.c_str(), kEntryMode) != 0) {
    return fail(ErrnoStatus(errno, "cannot make " + part_path + " read-only"));
  }
  struct stat st;
  if (::lstat(part_path.c_str(), &st) != 0) {
    return fail(ErrnoStatus(errno, "cannot stat " + part_path));
  }
  if (!S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) != size) {
    return fail(InvalidArgument(part_path + " is " + std::to_string(st.st_size) +
                                " bytes, not the " + std::to_string(size) + " promised"));
  }
  const std::string path = PathOf(sha256);
  if (::rename(part_path.c_str(), path.c_str()) != 0) {
    return fail(ErrnoStatus(errno, "cannot rename " + part_path + " to " + path));
  }
  // After the rename: it changes the ctime on most file systems.
  Result<Fingerprint> fp = FingerprintOf(path);
  if (!fp.ok()) {
    ::unlink(path.c_str());
    return fp.status();
  }
  InsertLocked(sha256, size, *fp);
  return Status::Ok();
}

void FileCache::AbortFetch(const std::string& part_path) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto res = reserved_.find(part_path);
    if (res != reserved_.end()) {
      reserved_bytes_ -= res->second;
      reserved_.erase(res);
    }
  }
  ::unlink(part_path.c_str());
}

std::string FileCache::PathOf(const std::string& sha256) const { return dir_ + "/" + sha256; }

FileCacheStats FileCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  FileCacheStats s = stats_;
  s.entries = entries_.size();
  s.kept_jobs = keeps_.size();
  return s;
}

void FileCache::TouchLocked(const std::string& sha256, Entry& e) {
  lru_.erase({e.last_use, sha256});
  e.last_use = ++clock_;
  lru_.insert({e.last_use, sha256});
}

void FileCache::InsertLocked(const std::string& sha256, uint64_t size, const Fingerprint& fp) {
  Entry& e = entries_[sha256];
  e.size = size;
  e.fp = fp;
  e.last_use = ++clock_;
  lru_.insert({e.last_use, sha256});
  stats_.bytes += size;
}

void FileCache::RemoveLocked(const std::string& sha256) {
  auto it = entries_.find(sha256);
  if (it == entries_.end()) return;
  const std::string path = PathOf(sha256);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    spdlog::warn("file cache: cannot remove {}: {}", path, std::strerror(errno));
  }
  lru_.erase({it->second.last_use, sha256});
  stats_.bytes -= it->second.size;
  entries_.erase(it);
}

bool FileCache::PinnedLocked(const std::string& sha256) const { return pins_.count(sha256) != 0; }

bool FileCache::KeptLocked(const std::string& sha256) const { return kept_.count(sha256) != 0; }

void FileCache::KeepLocked(uint64_t job, const std::string& sha256) {
  if (keeps_[job].insert(sha256).second) ++kept_[sha256];
}

std::string FileCache::KeepPathOf(uint64_t job) const {
  return dir_ + "/" + kKeepDir + "/" + std::to_string(job);
}

Status FileCache::Keep(uint64_t job, const std::vector<std::string>& sha256s) {
  for (const std::string& sha : sha256s) {
    if (!IsSha256Hex(sha)) return InvalidArgument("not a SHA-256: \"" + sha + "\"");
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::string lines;
  for (const std::string& sha : sha256s) {
    if (keeps_[job].count(sha) != 0) continue;
    KeepLocked(job, sha);
    lines += sha + "\n";
  }
  if (lines.empty()) return Status::Ok();
  // Under the lock: a few bytes, and it orders the record with Unkeep's
  // removal of the file.
  RETURN_IF_ERROR(MakeDirs(dir_ + "/" + kKeepDir, 0700));
  const std::string path = KeepPathOf(job);
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  if (!fd.valid()) return ErrnoStatus(errno, "cannot record kept outputs in " + path);
  return WriteAll(fd.fd(), lines, path);
}

void FileCache::Unkeep(uint64_t job) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = keeps_.find(job);
  if (it == keeps_.end()) return;
  for (const std::string& sha : it->second) {
    auto k = kept_.find(sha);
    if (k != kept_.end() && --k->second <= 0) kept_.erase(k);
  }
  keeps_.erase(it);
  const std::string path = KeepPathOf(job);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    spdlog::warn("file cache: cannot remove {}: {}", path, std::strerror(errno));
  }
}

std::vector<uint64_t> FileCache::KeptJobs() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint64_t> jobs;
  for (const auto& [job, shas] : keeps_) jobs.push_back(job);
  return jobs;
}

bool FileCache::Kept(const std::string& sha256) const {
  std::lock_guard<std::mutex> lock(mu_);
  return KeptLocked(sha256);
}

Status FileCache::LoadKeepsLocked() {
  const std::string dir = dir_ + "/" + kKeepDir;
  UniqueFd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir_fd.valid()) {
    if (errno == ENOENT) return Status::Ok();
    return ErrnoStatus(errno, "cannot list kept outputs " + dir);
  }
  ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(dir_fd.fd(), "kept outputs " + dir));
  for (const std::string& name : names) {
    const std::string path = dir + "/" + name;
    if (EndsWith(name, kTmpSuffix)) {
      ::unlink(path.c_str());  // a rewrite cut short; the record it replaced is still there
      continue;
    }
    Result<uint64_t> job = ParseJobNumber(name);
    if (!job.ok()) {
      spdlog::warn("file cache: {} is not a record of kept outputs; left alone", path);
      continue;
    }
    std::ifstream in(path);
    if (!in) return ErrnoStatus(errno, "cannot read " + path);
    std::string line;
    size_t torn = 0;
    // An empty record still names a job the server must release.
    keeps_[*job];
    while (std::getline(in, line)) {
      if (IsSha256Hex(line)) {
        KeepLocked(*job, line);
      } else {
        ++torn;
      }
    }
    if (torn > 0) {
      // Rewritten without them, or the next append would continue a torn
      // line and be lost with it.
      spdlog::warn("file cache: {}: {} line(s) that name no SHA-256 dropped (a write cut short)",
                   path, torn);
      std::string lines;
      for (const std::string& sha : keeps_[*job]) lines += sha + "\n";
      const std::string tmp = path + std::string(kTmpSuffix);
      UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
      if (!fd.valid()) return ErrnoStatus(errno, "cannot rewrite " + path);
      RETURN_IF_ERROR(WriteAll(fd.fd(), lines, tmp));
      if (::rename(tmp.c_str(), path.c_str()) != 0) {
        return ErrnoStatus(errno, "cannot rename " + tmp + " to " + path);
      }
    }
  }
  return Status::Ok();
}

Status FileCache::MakeRoomLocked(const std::string& sha256, uint64_t size) {
  if (capacity_ == 0) return Status::Ok();
  const uint64_t used = stats_.bytes + reserved_bytes_;
  if (used + size <= capacity_ && size <= capacity_) return Status::Ok();
  uint64_t evictable = 0;
  uint64_t pinned = 0;
  for (const auto& [sha, e] : entries_) {
    if (PinnedLocked(sha)) {
      pinned += e.size;
    } else if (!KeptLocked(sha)) {
      evictable += e.size;
    }
  }
  if (size > capacity_ || used - evictable + size > capacity_) {
    const uint64_t kept = stats_.bytes - evictable - pinned;
    return ResourceExhausted(
        "cache of " + FormatBytes(capacity_) + " cannot hold " + FormatBytes(size) + " for " +
        ShortSha(sha256) + ": " + FormatBytes(pinned) + " are pinned by running tasks" +
        (kept == 0 ? std::string(" and ")
                   : ", " + FormatBytes(kept) +
                         " are kept for unreleased jobs (drover server --keep-outputs) and ") +
        FormatBytes(reserved_bytes_) + " are being fetched");
  }
  std::vector<std::string> victims;
  uint64_t freed = 0;
  for (const auto& [tick, sha] : lru_) {
    if (used - freed + size <= capacity_) break;
    if (PinnedLocked(sha) || KeptLocked(sha)) continue;
    victims.push_back(sha);
    freed += entries_.at(sha).size;
  }
  for (const std::string& sha : victims) {
    RemoveLocked(sha);
    ++stats_.evictions;
  }
  return Status::Ok();
}

uint64_t DefaultCacheCapacity(const std::string& dir) {
  std::string path = dir.empty() ? "." : dir;
  struct statvfs vfs;
  while (::statvfs(path.c_str(), &vfs) != 0) {
    if (errno != ENOENT || path == "/" || path == ".") return kGiB;
    path = ParentDir(path);
    if (path.empty()) path = ".";
  }
  const uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  return std::max(free_bytes / 4, std::min(free_bytes, kGiB));
}

}  // namespace drover::worker
