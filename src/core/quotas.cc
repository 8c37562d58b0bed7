// Quotas across users and groups: building the accounts from the policy
// (UserPolicy), replacing it at run time (UserPolicyChanged), waking the
// parked tasks of a group's members, counting queued tasks, and the
// Quotas() query. The check itself is UserAccount::Exceeds
// (user_account.h); placement parks and unparks in dispatch.cc.
#include <algorithm>

#include "core/dispatch_ops.h"
#include "core/quotas_ops.h"
#include "core/scheduler_state.h"

namespace drover::core {

namespace {

void AddUse(QuotaUsage& to, const QuotaUsage& from) {
  to.cpus_milli += from.cpus_milli;
  to.gpus += from.gpus;
  to.mem_bytes += from.mem_bytes;
  to.tasks += from.tasks;
}

QuotaLine LineOf(const std::string& name, const UserQuota& q, const QuotaUsage& used,
                 int64_t queued) {
  QuotaLine line;
  line.name = name;
  line.max_cpus_milli = q.max_cpus_milli;
  line.max_gpus = q.max_gpus;
  line.max_mem_bytes = q.max_mem_bytes;
  line.max_tasks = q.max_tasks;
  line.max_queued = q.max_queued;
  line.use.cpus_milli = used.cpus_milli;
  line.use.gpus = used.gpus;
  line.use.mem_bytes = used.mem_bytes;
  line.use.tasks = used.tasks;
  line.use.queued = static_cast<uint64_t>(std::max<int64_t>(0, queued));
  return line;
}

}  // namespace

UserAccount AccountFor(State& s, const std::string& name) {
  const UserPolicy& policy = s.config.users;
  auto q = policy.quotas.find(name);
  std::vector<std::shared_ptr<GroupAccount>> groups;
  for (const auto& [group, members] : policy.groups) {
    if (std::find(members.begin(), members.end(), name) == members.end()) continue;
    auto account = s.group_accounts.find(group);
    if (account != s.group_accounts.end()) groups.push_back(account->second);
  }
  return UserAccount(name, q == policy.quotas.end() ? policy.default_quota : q->second,
                     std::move(groups));
}

void UnparkFreed(State& s, uint32_t u) {
  if (!s.users[u].parked.empty()) Unpark(s, u);
  // Room a member gave back to a limited group may be what another
  // member's parked tasks wait for.
  for (const auto& group : s.users[u].account.groups()) {
    if (group->quota == UserQuota{}) continue;
    auto members = s.config.users.groups.find(group->name);
    if (members == s.config.users.groups.end()) continue;
    for (const std::string& member : members->second) {
      auto it = s.user_ids.find(member);
      if (it == s.user_ids.end() || it->second == u || s.users[it->second].parked.empty()) continue;
      Unpark(s, it->second);
    }
  }
}

void ApplyUserPolicy(State& s, const UserPolicy& policy) {
  s.config.users = policy;
  s.fair_share.Configure(s.config.users);
  s.group_accounts.clear();
  auto add_group = [&](const std::string& name) {
    auto& account = s.group_accounts[name];
    if (account != nullptr) return;
    account = std::make_shared<GroupAccount>();
    account->name = name;
    auto q = policy.group_quotas.find(name);
    if (q != policy.group_quotas.end()) account->quota = q->second;
  };
  for (const auto& [name, quota] : policy.group_quotas) add_group(name);
  for (const auto& [name, members] : policy.groups) add_group(name);
  // Each account keeps what its user holds and queues; the groups' use is
  // their members' again.
  for (User& user : s.users) {
    UserAccount fresh = AccountFor(s, user.account.name());
    user.account.Reset(fresh.quota(), fresh.groups());
    for (const auto& group : user.account.groups()) {
      AddUse(group->used, user.account.used());
      group->queued += user.account.queued();
    }
  }
  // A raised limit: parked tasks that fit now go back to their queues (and
  // Dispatch places them). A lowered one parks only what has not started.
  for (uint32_t u = 0; u < s.users.size(); ++u) {
    if (!s.users[u].parked.empty()) Unpark(s, u);
  }
}

void RecountQueued(State& s) {
  for (User& user : s.users) user.account.AddQueued(-user.account.queued());
  for (const Job& job : s.jobs) {
    if (job.forgotten) continue;
    const uint64_t queued = job.counts[static_cast<int>(TaskState::kWaiting)] +
                            job.counts[static_cast<int>(TaskState::kQueued)];
    if (queued != 0) s.users[job.user].account.AddQueued(static_cast<int64_t>(queued));
  }
}

QuotaReport Scheduler::Quotas() const {
  const State& s = *state_;
  const UserPolicy& policy = s.config.users;
  QuotaReport report;
  std::map<std::string, QuotaLine> users;
  for (const auto& [name, q] : policy.quotas) users.emplace(name, LineOf(name, q, {}, 0));
  for (const User& user : s.users) {
    const UserAccount& a = user.account;
    const bool own = policy.quotas.count(a.name()) != 0;
    if (!own && a.used().tasks == 0 && a.queued() == 0) continue;
    QuotaLine line = LineOf(a.name(), a.quota(), a.used(), a.queued());
    line.own = own;
    users[a.name()] = std::move(line);
  }
  for (const auto& [group, members] : policy.groups) {
    for (const std::string& member : members) {
      auto it = users.find(member);
      if (it != users.end()) it->second.related.push_back(group);
    }
  }
  for (auto& [name, line] : users) report.users.push_back(std::move(line));
  for (const auto& [name, account] : s.group_accounts) {
    QuotaLine line = LineOf(name, account->quota, account->used, account->queued);
    auto members = policy.groups.find(name);
    if (members != policy.groups.end()) line.related = members->second;
    report.groups.push_back(std::move(line));
  }
  return report;
}

}  // namespace drover::core
