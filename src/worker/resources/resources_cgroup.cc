#include "worker/resources/resources_cgroup.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <string_view>
#include <vector>

#include "worker/resources/resources_host.h"

namespace drover::worker {
namespace {

namespace fs = std::filesystem;

// Limits at or above this are the kernel's "unlimited" (v1 reports
// PAGE_COUNTER_MAX pages, 9223372036854771712 bytes on 4 KiB pages).
constexpr uint64_t kUnlimitedBytes = uint64_t{1} << 62;

std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  return s;
}

template <typename T>
bool ParseNumber(std::string_view s, T* out) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size() && !s.empty();
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  while (true) {
    size_t pos = s.find(sep);
    parts.push_back(s.substr(0, pos));
    if (pos == std::string_view::npos) return parts;
    s.remove_prefix(pos + 1);
  }
}

Status Malformed(const std::string& path, std::string_view text) {
  return DataLoss(path + ": unexpected content \"" + std::string(TrimSpace(text)) + "\"");
}

// A controller's place: the hierarchy's mount directory and the process's
// cgroup directory inside it (equal when the process sits at the root).
struct Placement {
  std::string mount;
  std::string dir;
  int version = 0;
};

std::string Resolve(const std::string& mount, std::string_view path) {
  // Drop leading components until the directory exists (see header).
  std::vector<std::string_view> parts;
  for (std::string_view part : Split(path, '/')) {
    if (!part.empty()) parts.push_back(part);
  }
  for (size_t skip = 0; skip < parts.size(); ++skip) {
    std::string dir = mount;
    for (size_t i = skip; i < parts.size(); ++i) dir += "/" + std::string(parts[i]);
    std::error_code ec;
    if (fs::is_directory(dir, ec)) return dir;
  }
  return mount;
}

bool ListsController(const std::string& controllers_file, std::string_view controller) {
  Result<std::string> text = ReadSmallFile(controllers_file);
  if (!text.ok()) return false;
  for (std::string_view c : Split(TrimSpace(*text), ' ')) {
    if (c == controller) return true;
  }
  return false;
}

// Finds `controller` ("cpu" or "memory") in the /proc/self/cgroup text: a v1
// hierarchy that carries it, else the v2 tree if it has it enabled.
std::optional<Placement> FindController(std::string_view self_cgroup, const std::string& root,
                                        std::string_view controller) {
  std::optional<std::string_view> v2_path;
  for (std::string_view line : Split(self_cgroup, '\n')) {
    std::vector<std::string_view> f = Split(line, ':');
    if (f.size() < 3) continue;
    // The path may itself contain ':'; it is everything after the second one.
    std::string_view path = line.substr(f[0].size() + f[1].size() + 2);
    if (f[0] == "0" && f[1].empty()) {
      v2_path = path;
      continue;
    }
    for (std::string_view c : Split(f[1], ',')) {
      if (c != controller) continue;
      for (const std::string& name : {std::string(f[1]), std::string(controller)}) {
        std::string mount = root + "/" + name;
        std::error_code ec;
        if (fs::is_directory(mount, ec)) return Placement{mount, Resolve(mount, path), 1};
      }
    }
  }
  if (v2_path && ListsController(root + "/cgroup.controllers", controller)) {
    return Placement{root, Resolve(root, *v2_path), 2};
  }
  return std::nullopt;
}

// Calls read(dir) for the process's cgroup and each parent up to the mount.
template <typename Fn>
Status WalkUp(const Placement& p, Fn read) {
  fs::path dir(p.dir);
  const fs::path mount(p.mount);
  while (true) {
    RETURN_IF_ERROR(read(dir.string()));
    if (dir == mount || !dir.has_parent_path() || dir.parent_path() == dir) return Status::Ok();
    dir = dir.parent_path();
  }
}

// Reads one limit file; a missing file (the root has none) reads as nullopt.
Result<std::optional<std::string>> ReadOptional(const std::string& path) {
  Result<std::string> text = ReadSmallFile(path);
  if (text.ok()) return std::optional<std::string>(std::move(*text));
  if (text.status().code() == StatusCode::kNotFound) return std::optional<std::string>();
  return text.status();
}

void KeepSmaller(std::optional<int64_t>* best, int64_t v) {
  if (!*best || v < **best) *best = v;
}

Status ReadCpuQuota(const Placement& p, CgroupLimits* out) {
  return WalkUp(p, [&](const std::string& dir) -> Status {
    int64_t quota = 0;
    int64_t period = 0;
    if (p.version == 1) {
      ASSIGN_OR_RETURN(auto q, ReadOptional(dir + "/cpu.cfs_quota_us"));
      ASSIGN_OR_RETURN(auto per, ReadOptional(dir + "/cpu.cfs_period_us"));
      if (!q || !per) return Status::Ok();
      if (!ParseNumber(TrimSpace(*q), &quota)) return Malformed(dir + "/cpu.cfs_quota_us", *q);
      if (!ParseNumber(TrimSpace(*per), &period) || period <= 0) {
        return Malformed(dir + "/cpu.cfs_period_us", *per);
      }
      if (quota < 0) return Status::Ok();  // -1: no quota
    } else {
      ASSIGN_OR_RETURN(auto max, ReadOptional(dir + "/cpu.max"));
      if (!max) return Status::Ok();
      std::vector<std::string_view> f = Split(TrimSpace(*max), ' ');
      if (f.size() != 2 || !ParseNumber(f[1], &period) || period <= 0) {
        return Malformed(dir + "/cpu.max", *max);
      }
      if (f[0] == "max") return Status::Ok();
      if (!ParseNumber(f[0], &quota)) return Malformed(dir + "/cpu.max", *max);
    }
    KeepSmaller(&out->cpu_quota_milli, quota * 1000 / period);
    return Status::Ok();
  });
}

Status ReadMemoryLimit(const Placement& p, CgroupLimits* out) {
  const char* file = p.version == 1 ? "/memory.limit_in_bytes" : "/memory.max";
  return WalkUp(p, [&](const std::string& dir) -> Status {
    ASSIGN_OR_RETURN(auto text, ReadOptional(dir + file));
    if (!text) return Status::Ok();
    std::string_view v = TrimSpace(*text);
    if (v == "max") return Status::Ok();
    uint64_t bytes = 0;
    if (!ParseNumber(v, &bytes)) return Malformed(dir + file, *text);
    if (bytes >= kUnlimitedBytes) return Status::Ok();
    if (!out->memory_limit_bytes || bytes < *out->memory_limit_bytes) {
      out->memory_limit_bytes = bytes;
    }
    return Status::Ok();
  });
}

}  // namespace

Result<CgroupLimits> ReadCgroupLimits(const std::string& proc_root, const std::string& sys_root) {
  CgroupLimits limits;
  Result<std::string> self = ReadSmallFile(proc_root + "/self/cgroup");
  if (!self.ok()) {
    if (self.status().code() == StatusCode::kNotFound) return limits;  // no cgroups
    return self.status();
  }
  const std::string root = sys_root + "/fs/cgroup";
  if (auto cpu = FindController(*self, root, "cpu")) {
    RETURN_IF_ERROR(ReadCpuQuota(*cpu, &limits));
  }
  if (auto mem = FindController(*self, root, "memory")) {
    RETURN_IF_ERROR(ReadMemoryLimit(*mem, &limits));
    limits.memory_dir = mem->dir;
    limits.memory_version = mem->version;
  }
  return limits;
}

Result<uint64_t> ReadCgroupMemoryUsage(const std::string& dir, int version) {
  std::string usage_path = dir + (version == 1 ? "/memory.usage_in_bytes" : "/memory.current");
  ASSIGN_OR_RETURN(std::string text, ReadSmallFile(usage_path));
  uint64_t usage = 0;
  if (!ParseNumber(TrimSpace(text), &usage)) return Malformed(usage_path, text);
  // Page cache the kernel would drop under pressure is not really "used".
  std::string_view key = version == 1 ? "total_inactive_file" : "inactive_file";
  Result<std::string> stat = ReadSmallFile(dir + "/memory.stat");
  if (stat.ok()) {
    for (std::string_view line : Split(*stat, '\n')) {
      std::vector<std::string_view> f = Split(line, ' ');
      uint64_t inactive = 0;
      if (f.size() == 2 && f[0] == key && ParseNumber(f[1], &inactive)) {
        return usage - std::min(usage, inactive);
      }
    }
  }
  return usage;
}

}  // namespace drover::worker
