#include "server/file_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "net/json_text.h"
#include "net/sha256.h"

namespace drover::server {
namespace {

Status ErrnoError(int error, const std::string& what) {
  if (error == ENOSPC || error == EDQUOT) {
    return ResourceExhausted(what + ": no space left on device");
  }
  if (error == ENOENT) return NotFound(what + ": " + std::strerror(error));
  return Internal(what + ": " + std::strerror(error));
}

}  // namespace

Result<std::unique_ptr<FileStore>> FileStore::Open(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return ErrnoError(errno, "cannot create the file store " + dir);
  }
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return ErrnoError(errno, "cannot read the file store " + dir);
  auto store = std::unique_ptr<FileStore>(new FileStore(dir));
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = dir + "/" + name;
    if (name.starts_with(".upload-")) {
      ::unlink(path.c_str());  // an upload the last run did not finish
      continue;
    }
    struct stat st {};
    if (!net::IsSha256Hex(name) || ::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      spdlog::warn("file store: ignoring {} (not a blob)", path);
      continue;
    }
    store->blobs_[name] = static_cast<uint64_t>(st.st_size);
    store->bytes_ += static_cast<uint64_t>(st.st_size);
  }
  ::closedir(d);
  return store;
}

Result<std::pair<std::string, uint64_t>> FileStore::Find(const std::string& sha256) const {
  auto it = blobs_.find(sha256);
  if (it == blobs_.end()) return NotFound("no file " + sha256.substr(0, 12) + "... on the server");
  return std::pair(dir_ + "/" + sha256, it->second);
}

Status FileStore::Commit(const net::Upload& upload, const std::string& sha256) {
  if (upload.sha256 != sha256) {
    return InvalidArgument("the body's SHA-256 is " + upload.sha256 + ", not " + sha256 +
                           " (did the file change while it was sent?)");
  }
  if (Has(sha256)) return Status::Ok();
  // Durable before it is named: a checkpoint record that names the blob
  // may be journaled right after.
  const int fd = ::open(upload.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "cannot open " + upload.path);
  const bool synced = ::fsync(fd) == 0;
  const int sync_error = errno;
  ::close(fd);
  if (!synced) return ErrnoError(sync_error, "cannot sync " + upload.path);
  ::chmod(upload.path.c_str(), 0400);
  const std::string path = dir_ + "/" + sha256;
  if (::rename(upload.path.c_str(), path.c_str()) != 0) {
    return ErrnoError(errno, "cannot rename " + upload.path + " to " + path);
  }
  if (const int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  blobs_[sha256] = upload.size;
  bytes_ += upload.size;
  return Status::Ok();
}

void FileStore::SetTaskFiles(TaskId task, const std::vector<std::string>& sha256s) {
  std::vector<std::string> old;
  auto it = by_task_.find(task);
  if (it != by_task_.end()) old = std::move(it->second);
  // New references first: a file in both lists is never deleted.
  for (const std::string& sha : sha256s) ++refs_[sha];
  if (sha256s.empty()) {
    by_task_.erase(task);
  } else {
    by_task_[task] = sha256s;
  }
  for (const std::string& sha : old) Unref(sha);
}

void FileStore::ForgetJob(JobId job) {
  auto it = by_task_.lower_bound(TaskId{job, 0});
  while (it != by_task_.end() && it->first.job == job) {
    for (const std::string& sha : it->second) Unref(sha);
    it = by_task_.erase(it);
  }
}

void FileStore::Unref(const std::string& sha256) {
  auto it = refs_.find(sha256);
  if (it == refs_.end()) return;
  if (--it->second > 0) return;
  refs_.erase(it);
  if (!replaying_) Delete(sha256);
}

void FileStore::Delete(const std::string& sha256) {
  auto it = blobs_.find(sha256);
  if (it == blobs_.end()) return;
  const std::string path = dir_ + "/" + sha256;
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    spdlog::warn("file store: cannot delete {}: {}", path, std::strerror(errno));
    return;
  }
  bytes_ -= it->second;
  blobs_.erase(it);
  holders_.erase(sha256);
  ++deleted_;
}

void FileStore::AddHolder(const std::string& sha256, const std::string& user) {
  if (!Has(sha256) || user.empty()) return;
  std::vector<std::string>& users = holders_[sha256];
  if (std::find(users.begin(), users.end(), user) == users.end()) users.push_back(user);
}

bool FileStore::HeldBy(const std::string& sha256, const std::string& user) const {
  auto it = holders_.find(sha256);
  if (it == holders_.end() || !Has(sha256)) return false;
  return std::find(it->second.begin(), it->second.end(), user) != it->second.end();
}

bool FileStore::HasFor(const std::string& sha256, const Readable& reads) const {
  if (!reads) return Has(sha256);
  auto it = holders_.find(sha256);
  if (it == holders_.end() || !Has(sha256)) return false;
  return std::any_of(it->second.begin(), it->second.end(), reads);
}

size_t FileStore::Sweep(Time before) {
  std::vector<std::string> unreferenced;
  for (const auto& [sha, size] : blobs_) {
    if (refs_.count(sha) > 0) continue;
    struct stat st {};
    const std::string path = dir_ + "/" + sha;
    if (::stat(path.c_str(), &st) != 0) continue;
    const Time mtime =
        TimeFromMicros(int64_t{st.st_mtim.tv_sec} * 1000000 + st.st_mtim.tv_nsec / 1000);
    if (mtime < before) unreferenced.push_back(sha);
  }
  for (const std::string& sha : unreferenced) Delete(sha);
  return unreferenced.size();
}

FileStoreStats FileStore::stats() const { return FileStoreStats{blobs_.size(), bytes_, deleted_}; }

uint32_t FileStore::references(const std::string& sha256) const {
  auto it = refs_.find(sha256);
  return it == refs_.end() ? 0 : it->second;
}

void AddFileRoutes(net::Server& server, FileStore& store, uint64_t max_upload_bytes,
                   std::function<FileStore::Readable(const net::Identity&)> reads_of) {
  constexpr char kRoute[] = "/api/v1/files/{sha256}";
  auto sha_of = [](const net::Request& r) -> Result<std::string> {
    auto it = r.path_params.find("sha256");
    if (it == r.path_params.end() || !net::IsSha256Hex(it->second)) {
      return InvalidArgument("not a file name: expected 64 lower-case hex digits");
    }
    return it->second;
  };
  FileStore* files = &store;
  // Whose blobs the requester reads; empty when they read every blob.
  auto holder_of = [reads_of](const net::Request& r) -> FileStore::Readable {
    if (!reads_of || !r.identity) return nullptr;
    return reads_of(*r.identity);
  };
  // The blob as the requester may see it: absent when they do not hold it.
  auto find = [files, sha_of,
               holder_of](const net::Request& r) -> Result<std::pair<std::string, uint64_t>> {
    Result<std::string> sha = sha_of(r);
    if (!sha.ok()) return sha.status();
    Result<std::pair<std::string, uint64_t>> found = files->Find(*sha);
    if (!found.ok()) return found.status();
    if (!files->HasFor(*sha, holder_of(r))) {
      return NotFound("no file " + sha->substr(0, 12) + "... on the server");
    }
    return found;
  };
  server.UploadRoute(
      "PUT", kRoute, store.dir(), max_upload_bytes,
      [files, sha_of, holder_of](const net::Request& r, const net::Upload& upload,
                                 net::Responder done) {
        Result<std::string> sha = sha_of(r);
        if (!sha.ok()) return done(net::ErrorResponse(sha.status()));
        const FileStore::Readable reads = holder_of(r);
        const bool had = files->HasFor(*sha, reads);  // as far as this requester may know
        if (Status kept = files->Commit(upload, *sha); !kept.ok()) {
          spdlog::warn("file store: upload from {} refused: {}", r.remote, kept.ToString());
          if (kept.code() == StatusCode::kResourceExhausted) {
            return done(net::ErrorResponse(507, kept.code(), kept.message()));
          }
          return done(net::ErrorResponse(kept));
        }
        if (reads) files->AddHolder(*sha, r.identity->name);
        nlohmann::json j = {{"sha256", *sha}, {"size", upload.size}};
        done(net::JsonResponse(net::JsonText(j), had ? 200 : 201));
      });
  server.Route("HEAD", kRoute, [find](const net::Request& r, net::Responder done) {
    net::Response answer;
    answer.content_type = "application/octet-stream";
    Result<std::pair<std::string, uint64_t>> found = find(r);
    if (!found.ok()) {
      answer.status = found.status().code() == StatusCode::kNotFound ? 404 : 400;
    } else {
      answer.headers["X-Drover-Size"] = std::to_string(found->second);
    }
    done(std::move(answer));
  });
  server.Route("GET", kRoute, [find](const net::Request& r, net::Responder done) {
    Result<std::pair<std::string, uint64_t>> found = find(r);
    if (!found.ok()) return done(net::ErrorResponse(found.status()));
    net::Response answer;
    answer.content_type = "application/octet-stream";
    answer.file_path = found->first;
    done(std::move(answer));
  });
}

}  // namespace drover::server
