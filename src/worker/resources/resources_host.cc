#include "worker/resources/resources_host.h"

#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

namespace drover::worker {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool ParseInt(std::string_view s, int* out) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size() && *out >= 0;
}

// Parses the "<number> kB" value of one /proc/meminfo line.
bool ParseMeminfoValue(std::string_view rest, uint64_t* bytes) {
  rest = Trim(rest);
  uint64_t scale = 1;
  if (rest.ends_with("kB")) {
    scale = 1024;
    rest = Trim(rest.substr(0, rest.size() - 2));
  }
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), v);
  if (ec != std::errc() || ptr != rest.data() + rest.size()) return false;
  *bytes = v * scale;
  return true;
}

}  // namespace

Result<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    int err = errno;
    if (err == ENOENT || err == ENOTDIR) return NotFound(path + ": no such file");
    return Unavailable(path + ": " + std::strerror(err));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return Unavailable(path + ": read error");
  return buffer.str();
}

Result<std::vector<int>> ParseCpuList(std::string_view text) {
  std::vector<int> ids;
  std::string_view rest = Trim(text);
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view item = Trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    size_t dash = item.find('-');
    int first = 0;
    int last = 0;
    bool ok = dash == std::string_view::npos ? ParseInt(item, &first) && ParseInt(item, &last)
                                             : ParseInt(Trim(item.substr(0, dash)), &first) &&
                                                   ParseInt(Trim(item.substr(dash + 1)), &last);
    if (!ok || last < first || last - first > 65536) {
      return InvalidArgument("cpu list \"" + std::string(text) + "\": bad element \"" +
                             std::string(item) + "\" (expected e.g. 0-3,8)");
    }
    for (int id = first; id <= last; ++id) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

std::string FormatCpuList(const std::vector<int>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(ids[i]);
    if (j > i) out += '-' + std::to_string(ids[j]);
    i = j + 1;
  }
  return out;
}

Result<std::vector<int>> ReadAffinity() {
  // A fixed cpu_set_t holds 1024 cpus; allocate for more so large hosts work.
  for (int ncpus = 1024; ncpus <= (1 << 16); ncpus *= 4) {
    cpu_set_t* set = CPU_ALLOC(ncpus);
    size_t size = CPU_ALLOC_SIZE(ncpus);
    CPU_ZERO_S(size, set);
    if (sched_getaffinity(0, size, set) != 0) {
      int err = errno;
      CPU_FREE(set);
      if (err == EINVAL) continue;  // the kernel's mask is larger than ours
      return Internal(std::string("sched_getaffinity: ") + std::strerror(err));
    }
    std::vector<int> ids;
    for (int cpu = 0; cpu < ncpus; ++cpu) {
      if (CPU_ISSET_S(cpu, size, set)) ids.push_back(cpu);
    }
    CPU_FREE(set);
    return ids;
  }
  return Internal("sched_getaffinity: cpu mask larger than 65536 cpus");
}

Result<HostMemory> ReadHostMemory(const std::string& proc_root) {
  std::string path = proc_root + "/meminfo";
  ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path));
  HostMemory mem;
  bool have_total = false;
  std::string_view rest = text;
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view key = line.substr(0, colon);
    if (key == "MemTotal") {
      if (!ParseMeminfoValue(line.substr(colon + 1), &mem.total_bytes)) {
        return DataLoss(path + ": malformed line \"" + std::string(line) + "\"");
      }
      have_total = true;
    } else if (key == "MemAvailable") {
      if (!ParseMeminfoValue(line.substr(colon + 1), &mem.available_bytes)) {
        return DataLoss(path + ": malformed line \"" + std::string(line) + "\"");
      }
    }
  }
  if (!have_total) return DataLoss(path + ": no MemTotal line");
  return mem;
}

std::string ReadHostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

HostPlatform ReadPlatform() {
  struct utsname u = {};
  HostPlatform p{"unknown", "unknown"};
  if (uname(&u) != 0) return p;
  p.os = u.sysname;
  std::transform(p.os.begin(), p.os.end(), p.os.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  p.arch = u.machine;
  return p;
}

}  // namespace drover::worker
