#include "worker/desktop/outside_load.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>
#include <string_view>
#include <utility>

#include "common/proc_stat.h"
#include "common/unique_fd.h"

namespace drover::worker {
namespace {

// A small /proc or cgroupfs file, whole.
Result<std::string> ReadProcFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    std::string why = path + ": " + std::strerror(errno);
    return errno == ENOENT ? NotFound(why) : Unavailable(why);
  }
  std::string text;
  char buffer[4096];
  for (;;) {
    ssize_t n = ::read(fd.fd(), buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Unavailable(path + ": " + std::strerror(errno));
    if (n == 0) return text;
    text.append(buffer, static_cast<size_t>(n));
  }
}

std::optional<uint64_t> ParseCounter(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// usage_usec of a cgroup v2 cpu.stat.
std::optional<uint64_t> ParseUsageUsec(std::string_view text) {
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (line.starts_with("usage_usec ")) return ParseCounter(line.substr(11));
  }
  return std::nullopt;
}

}  // namespace

OutsideLoad::OutsideLoad(std::string proc_root)
    : proc_root_(std::move(proc_root)), user_hz_(::sysconf(_SC_CLK_TCK)) {
  if (user_hz_ <= 0) user_hz_ = 100;
  Result<CpuJiffies> now = ReadStat();
  if (now.ok()) previous_ = *now;
}

Result<OutsideLoad::CpuJiffies> OutsideLoad::ReadStat() const {
  const std::string path = proc_root_ + "/stat";
  ASSIGN_OR_RETURN(std::string text, ReadProcFile(path));
  CpuJiffies sum;
  bool found = false;
  std::string_view rest = text;
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    if (!line.starts_with("cpu")) continue;
    if (!line.starts_with("cpu ")) {
      ++sum.cpus;  // cpuN: one line per online cpu
      continue;
    }
    std::string_view fields = line.substr(3);
    CpuStatJiffies jiffies;
    if (!AddCpuStatFields(fields, jiffies)) {
      return DataLoss(path + ": malformed line \"" + std::string(line) + "\"");
    }
    sum.busy += jiffies.busy;
    sum.total += jiffies.total;
    found = true;
  }
  if (!found) return DataLoss(path + ": no \"cpu\" line");
  if (sum.cpus == 0) return DataLoss(path + ": no cpuN line");
  return sum;
}

Result<double> OutsideLoad::Sample(Duration drover_cpu_delta) {
  ASSIGN_OR_RETURN(CpuJiffies now, ReadStat());
  const CpuJiffies before = std::exchange(previous_, now);
  // Counters only grow; a smaller value (a cpu went offline) restarts the
  // interval rather than producing a nonsense figure.
  if (now.total <= before.total || now.busy < before.busy) return 0.0;
  const double drover_jiffies =
      static_cast<double>(drover_cpu_delta.count()) * static_cast<double>(user_hz_) / 1e6;
  const double outside_jiffies = static_cast<double>(now.busy - before.busy) - drover_jiffies;
  return std::max(0.0, outside_jiffies * static_cast<double>(now.cpus) /
                           static_cast<double>(now.total - before.total));
}

Duration CgroupCpuTime(const std::vector<std::string>& dirs) {
  uint64_t nanos = 0;
  uint64_t micros = 0;
  // cgroup v1 mounts cpu and cpuacct together and links each name to the
  // pair: one directory may come under two names.
  std::vector<std::pair<dev_t, ino_t>> seen;
  for (const std::string& dir : dirs) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) continue;
    const std::pair<dev_t, ino_t> id(st.st_dev, st.st_ino);
    if (std::find(seen.begin(), seen.end(), id) != seen.end()) continue;
    seen.push_back(id);
    if (Result<std::string> v1 = ReadProcFile(dir + "/cpuacct.usage"); v1.ok()) {
      nanos += ParseCounter(*v1).value_or(0);
    } else if (Result<std::string> v2 = ReadProcFile(dir + "/cpu.stat"); v2.ok()) {
      micros += ParseUsageUsec(*v2).value_or(0);
    }
  }
  return Duration(static_cast<int64_t>(micros + nanos / 1000));
}

}  // namespace drover::worker
