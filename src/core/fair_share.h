// FairShareBook: each user's past use of the pool, decayed, and the
// standing that orders users' tasks among equal priorities
// (SchedulerConfig::users.fair_share; TaskQueues::SetStanding).
//
// Use is charged while a user's attempts hold an Active slot (assigned or
// running, as quotas count them): per second, the cores they asked for plus
// `gpu_weight` x their GPUs. It decays with `half_life` (use one half-life
// ago counts half; a half-life of 0 keeps it whole). A user's standing is the decayed use of their
// party divided by the party's share; the lowest standing goes first. A party is the user, or, for
// a user without a share of their own who is a member of a group with one (the first such group by
// name), that group: its members' use adds up against the group's share, and among themselves they
// go in submission order. Shares default to 1.
//
// Standings are read for everyone at one instant (Standings, every Tick),
// all decayed to that instant; between two readings the order is fixed, as
// with Slurm's priority recalculation period.
//
// Invariants: a user's use is charged and decayed up to `last_us` at the rate
// their held requests give; the held requests sum to what their Active
// slots hold (Hold on claim, Release on end), so the rate is zero when they
// hold nothing. With fair share off every standing is 0.
//
// Not journaled: after a restart every use starts again from zero.
//
// Thread safety: none; owned by the scheduler's State.
#ifndef DROVER_CORE_FAIR_SHARE_H_
#define DROVER_CORE_FAIR_SHARE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/resources.h"
#include "core/scheduler.h"

namespace drover::core {

class FairShareBook {
 public:
  // Takes the settings (at start and at each reload of the user policy):
  // shares and parties are derived again from `policy`; use so far is
  // kept. Standings change: read them again (Standings).
  void Configure(const UserPolicy& policy);

  // Makes user `u` (the scheduler's dense index, named `name`) known; users
  // are added in index order, once each.
  void AddUser(uint32_t u, const std::string& name);
  size_t user_count() const { return users_.size(); }

  // User u's attempts start (Hold) or stop (Release) holding `req` at
  // `now_us`: their use is charged up to then at the old rate.
  // (Inline: one of each per attempt, in B1's path.)
  void Hold(uint32_t u, const ResourceRequest& req, int64_t now_us) {
    UserUse& user = users_[u];
    if (now_us > user.last_us) Charge(user, now_us);
    user.cpus_milli += req.cpus_milli;
    user.gpus += req.gpus;
  }
  void Release(uint32_t u, const ResourceRequest& req, int64_t now_us) {
    UserUse& user = users_[u];
    if (now_us > user.last_us) Charge(user, now_us);
    user.cpus_milli -= req.cpus_milli;
    user.gpus -= req.gpus;
  }

  // Charges every user up to `now_us` and writes each user's standing
  // (party use / party share; 0 with fair share off) into `out`, one per
  // user in index order.
  void Standings(int64_t now_us, std::vector<double>& out);

  // User u's use as of `now_us`, decayed, in weighted resource-seconds
  // (CPU-seconds + gpu_weight x GPU-seconds), and their party's share.
  double UseAt(uint32_t u, int64_t now_us) const;
  double ShareOf(uint32_t u) const;
  // The party's name: the user's own, or the group it counts with.
  const std::string& PartyOf(uint32_t u) const;

  bool enabled() const { return config_.enabled; }

 private:
  struct UserUse {
    std::string name;
    uint32_t party = 0;  // index into parties_
    double use = 0;      // weighted resource-seconds, decayed to last_us
    int64_t last_us = 0;
    int64_t cpus_milli = 0;  // held now
    int64_t gpus = 0;        // hundredths, held now
  };
  struct Party {
    std::string name;
    double share = 1;
  };
  // Charges and decays `user` up to now_us at its rate (reads only the
  // book's settings).
  void Charge(UserUse& user, int64_t now_us) const;
  void Assign(uint32_t u);

  FairShareConfig config_;
  std::map<std::string, std::vector<std::string>> groups_;
  std::vector<UserUse> users_;
  std::vector<Party> parties_;
  std::map<std::string, uint32_t> party_ids_;
};

}  // namespace drover::core

#endif  // DROVER_CORE_FAIR_SHARE_H_
