#include "cli/policy_file.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "common/quantity.h"

namespace drover::cli {

namespace {

using Kind = proto::ConfigEntry::Kind;

// "FILE:LINE:COL: [quota.ana] gpus: why".
Status PolicyError(const std::string& file, const proto::ConfigSection& section,
                   const proto::ConfigEntry& entry, const std::string& why) {
  const std::string table = section.sub.empty() ? section.name : section.name + "." + section.sub;
  return InvalidArgument(file + ":" + std::to_string(entry.line) + ":" +
                         std::to_string(entry.column) + ": [" + table + "] " + entry.key + ": " +
                         why);
}

Status TableError(const std::string& file, const proto::ConfigSection& section,
                  const std::string& why) {
  const std::string table = section.sub.empty() ? section.name : section.name + "." + section.sub;
  return InvalidArgument(file + ":" + std::to_string(section.line) + ":" +
                         std::to_string(section.column) + ": [" + table + "]: " + why);
}

// The text of a one-value entry of kind `a` or `b`; an error naming what was
// expected otherwise.
Result<std::string> ScalarOf(const std::string& file, const proto::ConfigSection& section,
                             const proto::ConfigEntry& entry, const std::string& expected, Kind a,
                             Kind b) {
  if (entry.kind != a && entry.kind != b) {
    return PolicyError(file, section, entry, "expected " + expected);
  }
  return entry.values.front();
}

Result<uint64_t> WholeNumber(const std::string& file, const proto::ConfigSection& section,
                             const proto::ConfigEntry& entry) {
  ASSIGN_OR_RETURN(std::string text,
                   ScalarOf(file, section, entry, "a whole number", Kind::kNumber, Kind::kNumber));
  uint64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return PolicyError(file, section, entry, "expected a whole number, got " + text);
  }
  return n;
}

// One limit key of a [quota.USER] or [group.NAME] table into `q`.
Status ReadLimit(const std::string& file, const proto::ConfigSection& section,
                 const proto::ConfigEntry& entry, core::UserQuota& q) {
  const std::string& key = entry.key;
  auto quantity = [&](const std::string& example) {
    return ScalarOf(file, section, entry, "a number or a quantity such as " + example,
                    Kind::kNumber, Kind::kString);
  };
  auto refused = [&](const Status& s) { return PolicyError(file, section, entry, s.message()); };
  if (key == "cpus") {
    ASSIGN_OR_RETURN(std::string text, quantity("8 or \"500m\""));
    Result<int64_t> milli = ParseCpus(text);
    if (!milli.ok()) return refused(milli.status());
    q.max_cpus_milli = *milli;
  } else if (key == "gpus") {
    ASSIGN_OR_RETURN(std::string text, quantity("2 or 0.5"));
    Result<int64_t> hundredths = ParseGpus(text);
    if (!hundredths.ok()) return refused(hundredths.status());
    q.max_gpus = *hundredths;
  } else if (key == "mem") {
    ASSIGN_OR_RETURN(std::string text, quantity("\"64GiB\""));
    Result<uint64_t> bytes = ParseBytes(text);
    if (!bytes.ok()) return refused(bytes.status());
    q.max_mem_bytes = *bytes;
  } else if (key == "tasks") {
    ASSIGN_OR_RETURN(uint64_t n, WholeNumber(file, section, entry));
    if (n > UINT32_MAX) return PolicyError(file, section, entry, "too large");
    q.max_tasks = static_cast<uint32_t>(n);
  } else if (key == "queued") {
    ASSIGN_OR_RETURN(q.max_queued, WholeNumber(file, section, entry));
  } else {
    return PolicyError(file, section, entry,
                       "unknown key (cpus, gpus, mem, tasks, queued" +
                           std::string(section.name == "group" ? ", members or share_outputs)" : ")"));
  }
  return Status::Ok();
}

Status ReadFairShare(const std::string& file, const proto::ConfigSection& section,
                     core::FairShareConfig& fs) {
  if (section.sub == "shares") {
    for (const proto::ConfigEntry& entry : section.entries) {
      ASSIGN_OR_RETURN(std::string text, ScalarOf(file, section, entry, "a number above 0",
                                                  Kind::kNumber, Kind::kNumber));
      const double share = std::strtod(text.c_str(), nullptr);
      if (!(share > 0)) return PolicyError(file, section, entry, "expected a number above 0");
      fs.shares[entry.key] = share;
    }
    return Status::Ok();
  }
  if (!section.sub.empty()) {
    return TableError(file, section, "unknown table: [fairshare] holds only [fairshare.shares]");
  }
  for (const proto::ConfigEntry& entry : section.entries) {
    if (entry.key == "half_life") {
      ASSIGN_OR_RETURN(std::string text, ScalarOf(file, section, entry, "a duration such as \"1d\"",
                                                  Kind::kString, Kind::kString));
      Result<Duration> d = ParseDuration(text);
      if (!d.ok()) return PolicyError(file, section, entry, d.status().message());
      if (*d <= Duration::zero()) return PolicyError(file, section, entry, "must be above 0");
      fs.half_life = *d;
    } else if (entry.key == "gpu_weight") {
      ASSIGN_OR_RETURN(std::string text,
                       ScalarOf(file, section, entry, "a number", Kind::kNumber, Kind::kNumber));
      fs.gpu_weight = std::strtod(text.c_str(), nullptr);
      if (fs.gpu_weight < 0) return PolicyError(file, section, entry, "must not be negative");
    } else if (entry.key == "enabled") {
      if (entry.kind != Kind::kBool)
        return PolicyError(file, section, entry, "expected true or false");
      fs.enabled = entry.values.front() == "true";
    } else {
      return PolicyError(file, section, entry,
                         "unknown key (half_life, gpu_weight, enabled; shares go in "
                         "[fairshare.shares])");
    }
  }
  return Status::Ok();
}

std::string PolicyWhere(const std::string& file, const proto::ConfigEntry& entry) {
  return file + ":" + std::to_string(entry.line);
}

}  // namespace

bool IsPolicyTable(const std::string& name) {
  for (const char* t : kPolicyTables) {
    if (name == t) return true;
  }
  return false;
}

Result<core::UserPolicy> PolicyFromSections(const std::vector<proto::ConfigSection>& sections,
                                            const std::string& file) {
  core::UserPolicy policy;
  std::map<std::string, std::string> member_of;  // user -> "group (FILE:LINE)"
  for (const proto::ConfigSection& section : sections) {
    if (section.name == "fairshare") {
      RETURN_IF_ERROR(ReadFairShare(file, section, policy.fair_share));
      continue;
    }
    if (section.name != "quota" && section.name != "group") continue;
    const bool group = section.name == "group";
    if (section.sub.empty()) {
      if (section.entries.empty()) continue;  // only the header of its tables
      return PolicyError(file, section, section.entries.front(),
                         group ? "a group's keys go in its own table: [group.NAME]"
                               : "a user's limits go in their own table: [quota.USER], or "
                                 "[quota.\"*\"] for everyone without one");
    }
    core::UserQuota q;
    bool has_members = false;
    for (const proto::ConfigEntry& entry : section.entries) {
      if (group && entry.key == "members") {
        const bool strings = std::all_of(entry.item_kinds.begin(), entry.item_kinds.end(),
                                         [](Kind k) { return k == Kind::kString; });
        if ((entry.kind != Kind::kArray && entry.kind != Kind::kString) || !strings) {
          return PolicyError(file, section, entry, "expected an array of user names (strings)");
        }
        std::vector<std::string>& members = policy.groups[section.sub];
        for (const std::string& user : entry.values) {
          if (user.empty() || user == "*") {
            return PolicyError(file, section, entry, "\"" + user + "\" is not a user name");
          }
          auto [it, fresh] =
              member_of.emplace(user, section.sub + " (" + PolicyWhere(file, entry) + ")");
          if (!fresh) {
            return PolicyError(file, section, entry,
                               user + " is already a member of group " + it->second +
                                   ": a user belongs to one group at most");
          }
          members.push_back(user);
        }
        has_members = true;
        continue;
      }
      if (group && entry.key == "share_outputs") {
        if (entry.kind != Kind::kBool) {
          return PolicyError(file, section, entry, "expected true or false");
        }
        if (entry.values.front() == "true") policy.sharing_groups.insert(section.sub);
        continue;
      }
      if (group && entry.key == "share_cache") {
        if (entry.kind != Kind::kBool) {
          return PolicyError(file, section, entry, "expected true or false");
        }
        if (entry.values.front() == "true") policy.cache_sharing_groups.insert(section.sub);
        continue;
      }
      RETURN_IF_ERROR(ReadLimit(file, section, entry, q));
    }
    if (group) {
      if (!has_members) return TableError(file, section, "a group needs members = [\"user\", ...]");
      if (policy.cache_sharing_groups.count(section.sub) &&
          !policy.sharing_groups.count(section.sub)) {
        // A reused result hands the task that ran's files to the one reusing it.
        return TableError(file, section,
                          "share_cache = true needs share_outputs = true: a result reused "
                          "from another member comes with that member's files");
      }
      policy.group_quotas[section.sub] = q;
    } else if (section.sub == "*") {
      policy.default_quota = q;
    } else {
      policy.quotas[section.sub] = q;
    }
  }
  return policy;
}

Result<core::UserPolicy> ReadPolicyFile(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return InvalidArgument(file + ": cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  ASSIGN_OR_RETURN(std::vector<proto::ConfigSection> sections,
                   proto::ParseConfigToml(text.str(), file));
  return PolicyFromSections(sections, file);
}

core::UserPolicy WithQuotaFlags(core::UserPolicy policy, const Quotas& flags) {
  for (const auto& [user, q] : flags.per_user) policy.quotas[user] = q;
  if (flags.everyone_set) policy.default_quota = flags.everyone;
  return policy;
}

std::string DescribePolicy(const core::UserPolicy& before, const core::UserPolicy& after) {
  const size_t users = after.quotas.size() + (after.default_quota == core::UserQuota{} ? 0 : 1);
  std::string out = std::to_string(users) + (users == 1 ? " user, " : " users, ") +
                    std::to_string(after.groups.size()) +
                    (after.groups.size() == 1 ? " group" : " groups");
  std::vector<std::string> changed;
  auto compare = [&changed](const auto& a, const auto& b, const std::string& prefix) {
    std::set<std::string> names;
    for (const auto& [name, v] : a) names.insert(name);
    for (const auto& [name, v] : b) names.insert(name);
    for (const std::string& name : names) {
      auto x = a.find(name);
      auto y = b.find(name);
      if (x == a.end() || y == b.end() || !(x->second == y->second))
        changed.push_back(prefix + name);
    }
  };
  compare(before.quotas, after.quotas, "");
  if (!(before.default_quota == after.default_quota)) changed.push_back("*");
  compare(before.group_quotas, after.group_quotas, "group ");
  compare(before.groups, after.groups, "members of ");
  if (before.sharing_groups != after.sharing_groups) changed.push_back("share_outputs");
  if (before.cache_sharing_groups != after.cache_sharing_groups) changed.push_back("share_cache");
  if (!(before.fair_share == after.fair_share)) changed.push_back("fairshare");
  if (changed.empty()) return out + "; nothing changed";
  out += "; changed:";
  for (size_t i = 0; i < changed.size(); ++i) out += (i == 0 ? " " : ", ") + changed[i];
  return out;
}

}  // namespace drover::cli
