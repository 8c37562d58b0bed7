#include "store/memory_env.h"

#include <algorithm>
#include <utility>

namespace drover::store {

class MemoryEnv::Handle final : public WritableFile {
 public:
  Handle(MemoryEnv* env, std::string path, InodePtr inode, uint64_t epoch)
      : env_(env), path_(std::move(path)), inode_(std::move(inode)), epoch_(epoch) {}

  Status Append(std::string_view data) override {
    std::lock_guard lock(env_->mu_);
    RETURN_IF_ERROR(Check());
    size_t fits = data.size();
    if (env_->free_space_ && *env_->free_space_ < fits) fits = *env_->free_space_;
    inode_->data.append(data.substr(0, fits));
    if (env_->free_space_) *env_->free_space_ -= fits;
    if (fits < data.size())
      return ResourceExhausted("write " + path_ + ": No space left on device");
    return Status::Ok();
  }

  Status Sync() override {
    std::unique_lock lock(env_->mu_);
    env_->syncs_released_.wait(lock, [this] { return !env_->hold_syncs_; });
    RETURN_IF_ERROR(Check());
    if (env_->fail_syncs_) return Unavailable("fsync " + path_ + ": Input/output error");
    inode_->synced = inode_->data.size();
    return Status::Ok();
  }

  Status Truncate(uint64_t size) override {
    std::lock_guard lock(env_->mu_);
    RETURN_IF_ERROR(Check());
    if (size < inode_->data.size()) {
      if (env_->free_space_) *env_->free_space_ += inode_->data.size() - size;
      inode_->data.resize(size);
      // Shrinking is a metadata change; treat it as durable at once so the
      // synced prefix never claims bytes that no longer exist.
      inode_->synced = std::min<uint64_t>(inode_->synced, size);
    } else {
      inode_->data.resize(size, '\0');
    }
    return Status::Ok();
  }

  uint64_t Size() const override {
    std::lock_guard lock(env_->mu_);
    return inode_->data.size();
  }

 private:
  Status Check() {
    if (epoch_ != env_->epoch_) return Unavailable(path_ + ": handle from before a crash");
    return env_->BeginMutation().WithContext(path_);
  }

  MemoryEnv* env_;
  std::string path_;
  InodePtr inode_;
  uint64_t epoch_;
};

Status MemoryEnv::BeginMutation() {
  ++ops_;
  if (crash_after_) {
    if (*crash_after_ == 0)
      down_ = true;
    else
      --*crash_after_;
  }
  if (down_) return Unavailable("simulated crash: the machine is down");
  return Status::Ok();
}

Result<std::string> MemoryEnv::ReadFile(const std::string& path) {
  std::lock_guard lock(mu_);
  auto it = names_.find(path);
  if (it == names_.end()) return NotFound("open " + path + ": No such file or directory");
  return it->second->data;
}

Result<std::unique_ptr<WritableFile>> MemoryEnv::Open(const std::string& path, bool truncate) {
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(BeginMutation());
  InodePtr& inode = names_[path];
  if (!inode || truncate) {
    // O_TRUNC on an existing file cuts that same inode; a crash before the
    // next sync can leave it empty, which the synced mark reflects.
    if (!inode) inode = std::make_shared<Inode>();
    if (free_space_) *free_space_ += inode->data.size();
    inode->data.clear();
    inode->synced = 0;
  }
  return std::unique_ptr<WritableFile>(std::make_unique<Handle>(this, path, inode, epoch_));
}

Result<std::unique_ptr<WritableFile>> MemoryEnv::OpenAppendable(const std::string& path) {
  return Open(path, /*truncate=*/false);
}

Result<std::unique_ptr<WritableFile>> MemoryEnv::CreateTruncated(const std::string& path) {
  return Open(path, /*truncate=*/true);
}

Status MemoryEnv::Rename(const std::string& from, const std::string& to) {
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(BeginMutation());
  auto it = names_.find(from);
  if (it == names_.end()) return NotFound("rename " + from + ": No such file or directory");
  InodePtr inode = it->second;
  names_.erase(it);
  names_[to] = std::move(inode);
  return Status::Ok();
}

Status MemoryEnv::Remove(const std::string& path) {
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(BeginMutation());
  if (names_.erase(path) == 0) return NotFound("remove " + path + ": No such file or directory");
  return Status::Ok();
}

bool MemoryEnv::Exists(const std::string& path) {
  std::lock_guard lock(mu_);
  return names_.count(path) > 0;
}

Status MemoryEnv::CreateDirs(const std::string&) { return Status::Ok(); }

Status MemoryEnv::SyncDir(const std::string& dir) {
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(BeginMutation());
  if (fail_syncs_) return Unavailable("fsync " + dir + ": Input/output error");
  for (auto it = durable_names_.begin(); it != durable_names_.end();) {
    if (DirName(it->first) == dir)
      it = durable_names_.erase(it);
    else
      ++it;
  }
  for (const auto& [name, inode] : names_) {
    if (DirName(name) == dir) durable_names_[name] = inode;
  }
  return Status::Ok();
}

void MemoryEnv::SetFile(const std::string& path, std::string contents) {
  std::lock_guard lock(mu_);
  InodePtr& inode = names_[path];
  if (!inode) inode = std::make_shared<Inode>();
  inode->data = std::move(contents);
  inode->synced = inode->data.size();
  durable_names_[path] = inode;
}

std::vector<std::string> MemoryEnv::ListFiles() {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& entry : names_) out.push_back(entry.first);
  return out;
}

void MemoryEnv::SetFreeSpace(std::optional<uint64_t> bytes) {
  std::lock_guard lock(mu_);
  free_space_ = bytes;
}

void MemoryEnv::FailSyncs(bool fail) {
  std::lock_guard lock(mu_);
  fail_syncs_ = fail;
}

void MemoryEnv::HoldSyncs(bool hold) {
  {
    std::lock_guard lock(mu_);
    hold_syncs_ = hold;
  }
  syncs_released_.notify_all();
}

void MemoryEnv::CrashAfterOps(std::optional<uint64_t> ops) {
  std::lock_guard lock(mu_);
  crash_after_ = ops;
}

uint64_t MemoryEnv::MutatingOps() {
  std::lock_guard lock(mu_);
  return ops_;
}

void MemoryEnv::SimulateCrash(uint64_t keep_unsynced) {
  std::lock_guard lock(mu_);
  names_ = durable_names_;
  for (auto& [name, inode] : names_) {
    uint64_t keep = std::min<uint64_t>(inode->data.size(), inode->synced + keep_unsynced);
    inode->data.resize(keep);
    inode->synced = keep;
  }
  crash_after_.reset();
  down_ = false;
  ++epoch_;
}

}  // namespace drover::store
