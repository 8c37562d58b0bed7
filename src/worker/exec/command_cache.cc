#include "worker/exec/command_cache.h"

#include <cerrno>
#include <utility>

#include "worker/exec/spawn.h"

namespace drover::worker {
namespace {

// Bounds memory for a worker that runs many distinct commands; they are
// searched again after a clear.
constexpr size_t kMaxEntries = 256;

bool HasRelativeEntry(const std::string& path_env) {
  size_t start = 0;
  while (start <= path_env.size()) {
    size_t end = path_env.find(':', start);
    if (end == std::string::npos) end = path_env.size();
    if (end == start || path_env[start] != '/') return true;
    start = end + 1;
  }
  return false;
}

}  // namespace

CommandCache::CommandCache(Duration max_age, const Clock& clock)
    : max_age_(max_age), clock_(clock) {}

Result<std::string> CommandCache::Resolve(const std::string& command,
                                          const std::string& path_env, const std::string& cwd) {
  if (command.empty() || command.find('/') != std::string::npos || HasRelativeEntry(path_env)) {
    return ResolveCommand(command, path_env, cwd);
  }
  std::string key = command;
  key += '\0';
  key += path_env;
  const Duration now = clock_.Monotonic();
  if (auto it = entries_.find(key); it != entries_.end()) {
    if (now - it->second.found <= max_age_ && CheckExecutable(it->second.path) == 0) {
      return it->second.path;
    }
    entries_.erase(it);
  }
  Result<std::string> found = ResolveCommand(command, path_env, cwd);
  if (found.ok()) {
    if (entries_.size() >= kMaxEntries) entries_.clear();
    entries_[std::move(key)] = Entry{*found, now};
  }
  return found;
}

}  // namespace drover::worker
