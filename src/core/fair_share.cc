// Fair share (fair_share.h): the book of decayed use, and the State
// functions that charge it and hand the standings to the queues.
#include "core/fair_share.h"

#include <algorithm>
#include <cmath>
#include <numbers>

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

void FairShareBook::Assign(uint32_t u) {
  // Its own share first; otherwise the first group (by name) with a share
  // that lists it; otherwise itself with a share of 1.
  std::string party = users_[u].name;
  double share = 1;
  if (auto it = config_.shares.find(party); it != config_.shares.end()) {
    share = it->second;
  } else {
    for (const auto& [group, members] : groups_) {
      auto s = config_.shares.find(group);
      if (s == config_.shares.end()) continue;
      if (std::find(members.begin(), members.end(), party) == members.end()) continue;
      party = group;
      share = s->second;
      break;
    }
  }
  auto [it, inserted] = party_ids_.emplace(party, static_cast<uint32_t>(parties_.size()));
  if (inserted) parties_.push_back(Party{party, share > 0 ? share : 1});
  users_[u].party = it->second;
}

void FairShareBook::Charge(UserUse& user, int64_t now_us) const {
  if (now_us <= user.last_us) return;
  const double dt_s = static_cast<double>(now_us - user.last_us) / 1e6;
  const double rate = static_cast<double>(user.cpus_milli) / 1000.0 +
                      config_.gpu_weight * static_cast<double>(user.gpus) / 100.0;
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

void Scheduler::State::SyncFairShareUsers() {
  while (fair_share.user_count() < users.size()) {
    const auto u = static_cast<uint32_t>(fair_share.user_count());
    fair_share.AddUser(u, users[u].account.name());
  }
}

void Scheduler::State::UpdateStandings() {
  SyncFairShareUsers();
  fair_share.Standings(now_us, standings_scratch);
  for (uint32_t u = 0; u < standings_scratch.size(); ++u) {
    queues.SetStanding(u, standings_scratch[u]);
  }
}

}  // namespace drover::core
