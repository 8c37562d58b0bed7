// Fair share (fair_share.h): the book of decayed use, and the functions
// over State that charge it and hand the standings to the queues
// (fair_share_ops.h).
#include "core/fair_share.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <tuple>

#include "core/fair_share_ops.h"
#include "core/fair_share_report.h"
#include "core/scheduler_state.h"

namespace drover::core {

void FairShareBook::Configure(const UserPolicy& policy) {
  config_ = policy.fair_share;
  groups_ = policy.groups;
  parties_.clear();
  party_ids_.clear();
  for (uint32_t u = 0; u < users_.size(); ++u) Assign(u);
}

void FairShareBook::AddUser(uint32_t u, const std::string& name) {
  users_.resize(u + 1);
  users_[u].name = name;
  Assign(u);
}

std::pair<std::string, double> FairShareBook::PartyFor(const std::string& user) const {
  // Its own share first; otherwise the first group (by name) with a share
  // that lists it; otherwise itself with a share of 1.
  if (auto it = config_.shares.find(user); it != config_.shares.end()) {
    return {user, it->second > 0 ? it->second : 1};
  }
  for (const auto& [group, members] : groups_) {
    auto s = config_.shares.find(group);
    if (s == config_.shares.end()) continue;
    if (std::find(members.begin(), members.end(), user) == members.end()) continue;
    return {group, s->second > 0 ? s->second : 1};
  }
  return {user, 1};
}

void FairShareBook::Assign(uint32_t u) {
  auto [party, share] = PartyFor(users_[u].name);
  auto [it, inserted] = party_ids_.emplace(party, static_cast<uint32_t>(parties_.size()));
  if (inserted) parties_.push_back(Party{party, share});
  users_[u].party = it->second;
}

void FairShareBook::Charge(UserUse& user, int64_t now_us) const {
  if (now_us <= user.last_us) return;
  const double dt_s = static_cast<double>(now_us - user.last_us) / 1e6;
  const double rate = Rate(user.cpus_milli, user.gpus);
  const int64_t half_life = config_.half_life.count();
  if (half_life <= 0) {  // no decay
    user.use += rate * dt_s;
  } else {
    // Decay what there was, and add the integral of rate x 2^(-(now - s) / h)
    // over [last, now]: rate x h / ln 2 x (1 - 2^(-dt / h)).
    const double h_s = static_cast<double>(half_life) / 1e6;
    const double keep = std::exp2(-dt_s / h_s);
    user.use = user.use * keep + rate * h_s / std::numbers::ln2 * (1 - keep);
  }
  user.last_us = now_us;
}

void FairShareBook::AddPast(uint32_t u, const ResourceRequest& req, int64_t start_us,
                            int64_t end_us) {
  if (end_us <= start_us) return;
  UserUse& user = users_[u];
  if (end_us > user.last_us) Charge(user, end_us);
  const double rate = Rate(req.cpus_milli, req.gpus);
  const double span_s = static_cast<double>(end_us - start_us) / 1e6;
  const int64_t half_life = config_.half_life.count();
  if (half_life <= 0) {
    user.use += rate * span_s;
    return;
  }
  // As Charge adds a hold over [start, end], rate x h / ln 2 x (1 - 2^(-span / h))
  // (expm1: a span much shorter than h keeps its digits), then decayed from
  // end to last_us.
  const double h_s = static_cast<double>(half_life) / 1e6;
  const double after_s = static_cast<double>(user.last_us - end_us) / 1e6;
  const double decay = after_s > 0 ? std::exp2(-after_s / h_s) : 1.0;  // replay in time order: 1
  user.use +=
      rate * h_s / std::numbers::ln2 * -std::expm1(-span_s / h_s * std::numbers::ln2) * decay;
}

void FairShareBook::Standings(int64_t now_us, std::vector<double>& out) {
  out.assign(users_.size(), 0.0);
  if (!config_.enabled) return;
  std::vector<double> party_use(parties_.size(), 0.0);
  for (UserUse& user : users_) {
    Charge(user, now_us);
    party_use[user.party] += user.use;
  }
  for (size_t u = 0; u < users_.size(); ++u) {
    const uint32_t p = users_[u].party;
    out[u] = party_use[p] / parties_[p].share;
  }
}

double FairShareBook::UseAt(uint32_t u, int64_t now_us) const {
  UserUse user = users_[u];  // a copy: reading changes nothing
  Charge(user, now_us);
  return user.use;
}

double FairShareBook::ShareOf(uint32_t u) const { return parties_[users_[u].party].share; }

const std::string& FairShareBook::PartyOf(uint32_t u) const {
  return parties_[users_[u].party].name;
}

// --- State ----------------------------------------------------------------------

void SyncFairShareUsers(State& s) {
  while (s.fair_share.user_count() < s.users.size()) {
    const auto u = static_cast<uint32_t>(s.fair_share.user_count());
    s.fair_share.AddUser(u, s.users[u].account.name());
  }
}

void ReplayUse(State& s, TaskRef r, const TaskRecord& record) {
  const Task& t = s.task(r);  // as the records before this one left it
  const uint64_t key = ExtraKey(r);
  const int64_t at = ToMicros(record.at);
  const auto charge = [&](int64_t start_us, int64_t end_us) {
    const uint32_t u = s.jobs[r.job].user;
    if (u >= s.fair_share.user_count()) SyncFairShareUsers(s);
    s.fair_share.AddPast(u, s.RequestOf(r), start_us, end_us);
  };
  if (record.state == TaskState::kAssigned || record.state == TaskState::kRunning) {
    // A snapshot's record of an attempt assigned and not started
    // (snapshot.cc) carries the task's latest start or end, not the
    // assignment's time, and the task's reason: zero, or a reason, which no
    // journaled assignment has (Transition(kAssigned, "")). Its start, if a
    // record of it follows, is then the best known; else the restart.
    if (record.state == TaskState::kAssigned && (record.at == Time() || !record.reason.empty())) {
      return;
    }
    s.fair_share.ReplayHeld(key, record.attempt, at);
    return;
  }
  const std::optional<int64_t> since = s.fair_share.ReplayEnded(key);
  if (t.state == TaskState::kAssigned || t.state == TaskState::kRunning) {
    if (!since) return;
    int64_t end = at;
    // A snapshot writes a past attempt that had started with no `started`
    // (the journal always has one then). If that attempt succeeded, a
    // rerun (lineage.cc) made it history at `at`, long after it held
    // anything; its success's time is not kept, so the worker's measure of
    // its run stands in (nothing when there is none).
    if (t.state == TaskState::kRunning && record.started == Time()) {
      auto e = s.extras.find(key);
      if (e != s.extras.end() && e->second.outcome && e->second.outcome_attempt == record.attempt) {
        const TaskOutcome& o = *e->second.outcome;
        if (o.exit_code == 0 && o.signal == 0 && !o.oom_killed && o.reason.empty()) {
          end = std::min(at, *since + o.usage.wall.count());
        }
      }
    }
    charge(*since, end);
    return;
  }
  // A snapshot keeps an ended task's last attempt as its terminal record
  // alone, with when it started (`started`: the task's latest start, this
  // attempt's unless that came before the end of the one before it).
  if (IsTerminal(record.state) && record.attempt > t.attempt && record.started != Time() &&
      ToMicros(record.started) >= t.finished_us) {
    charge(ToMicros(record.started), at);
  }
}

void FinishReplayUse(State& s) {
  // Attempts still held at the restart held since their assignment; they
  // hold again from now (NewActive).
  s.fair_share.TakeReplayHeld([&](uint64_t key, int64_t since_us) {
    const TaskRef r{static_cast<uint32_t>(key >> 32), static_cast<uint32_t>(key)};
    if (r.job >= s.jobs.size() || s.jobs[r.job].forgotten) return;
    if (s.task(r).state != TaskState::kAssigned && s.task(r).state != TaskState::kRunning) return;
    const uint32_t u = s.jobs[r.job].user;
    if (u >= s.fair_share.user_count()) SyncFairShareUsers(s);
    s.fair_share.AddPast(u, s.RequestOf(r), since_us, s.now_us);
  });
  UpdateStandings(s);  // the first placements already follow the past use
}

void UpdateStandings(State& s) {
  SyncFairShareUsers(s);
  s.fair_share.Standings(s.now_us, s.standings_scratch);
  for (uint32_t u = 0; u < s.standings_scratch.size(); ++u) {
    s.queues.SetStanding(u, s.standings_scratch[u]);
  }
}

std::vector<FairShareLine> Scheduler::FairShares(Time now) const {
  const State& s = *state_;
  const int64_t at = std::max(s.now_us, ToMicros(now));
  std::vector<FairShareLine> out;
  out.reserve(s.users.size());
  for (uint32_t u = 0; u < s.users.size(); ++u) {
    FairShareLine& line = out.emplace_back();
    line.user = s.users[u].account.name();
    if (u < s.fair_share.user_count()) {
      line.party = s.fair_share.PartyOf(u);
      line.share = s.fair_share.ShareOf(u);
      line.use_s = s.fair_share.UseAt(u, at);
    } else {  // nothing held yet, and no Tick since it came
      std::tie(line.party, line.share) = s.fair_share.PartyFor(line.user);
    }
    line.standing = s.queues.Standing(u);
  }
  std::sort(out.begin(), out.end(),
            [](const FairShareLine& a, const FairShareLine& b) { return a.user < b.user; });
  return out;
}

}  // namespace drover::core
