#include "cli/quota_flags.h"

#include <charconv>

#include "common/quantity.h"

namespace drover::cli {

namespace {

Status Bad(const std::string& flag, const std::string& why) {
  return InvalidArgument("--quota " + flag + ": " + why);
}

// One "key=value" of a user's line into `q`.
Status ApplyLimit(const std::string& flag, const std::string& item, core::UserQuota& q) {
  const size_t eq = item.find('=');
  if (eq == std::string::npos || eq == 0) {
    return Bad(flag, "expected LIMIT=VALUE, got \"" + item + "\"");
  }
  const std::string key = item.substr(0, eq);
  const std::string value = item.substr(eq + 1);
  if (key == "cpus") {
    Result<int64_t> milli = ParseCpus(value);
    if (!milli.ok()) return Bad(flag, "cpus: " + milli.status().message());
    q.max_cpus_milli = *milli;
  } else if (key == "gpus") {
    Result<int64_t> hundredths = ParseGpus(value);
    if (!hundredths.ok()) return Bad(flag, "gpus: " + hundredths.status().message());
    q.max_gpus = *hundredths;
  } else if (key == "mem") {
    Result<uint64_t> bytes = ParseBytes(value);
    if (!bytes.ok()) return Bad(flag, "mem: " + bytes.status().message());
    q.max_mem_bytes = *bytes;
  } else if (key == "queued") {
    uint64_t n = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || end != value.data() + value.size() || value.empty()) {
      return Bad(flag, "queued: expected a whole number, got \"" + value + "\"");
    }
    q.max_queued = n;
  } else if (key == "tasks") {
    uint32_t n = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || end != value.data() + value.size() || value.empty()) {
      return Bad(flag, "tasks: expected a whole number, got \"" + value + "\"");
    }
    q.max_tasks = n;
  } else {
    return Bad(flag, "unknown limit \"" + key + "\" (cpus, gpus, mem, tasks or queued)");
  }
  return Status::Ok();
}

}  // namespace

Result<Quotas> ParseQuotas(const std::vector<std::string>& flags) {
  Quotas out;
  bool everyone_seen = false;
  for (const std::string& flag : flags) {
    const size_t colon = flag.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == flag.size()) {
      return Bad(flag, "expected USER:LIMIT=VALUE,... (e.g. ana:gpus=2,cpus=8, or *:tasks=10)");
    }
    const std::string user = flag.substr(0, colon);
    core::UserQuota q;
    size_t start = colon + 1;
    while (start <= flag.size()) {
      const size_t comma = flag.find(',', start);
      const size_t end = comma == std::string::npos ? flag.size() : comma;
      RETURN_IF_ERROR(ApplyLimit(flag, flag.substr(start, end - start), q));
      start = end + 1;
    }
    if (user == "*") {
      if (everyone_seen) return Bad(flag, "a second line for * (everyone)");
      everyone_seen = true;
      out.everyone = q;
      out.everyone_set = true;
    } else if (!out.per_user.emplace(user, q).second) {
      return Bad(flag, "a second line for user " + user);
    }
  }
  return out;
}

}  // namespace drover::cli
