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
// Standings are read for everyone at one instant (Standings, every Tick and
// as a restore finishes), all decayed to that instant; between two readings
// the order is fixed, as with Slurm's priority recalculation period.
//
// Invariants: a user's use is charged and decayed up to `last_us` at the rate
// their held requests give; the held requests sum to what their Active
// slots hold (Hold on claim, Release on end), so the rate is zero when they
// hold nothing. With fair share off every standing is 0.
//
// Restarts: the book is not journaled; Restore rebuilds it from the task
// records it replays (restore.cc: ReplayUse, FinishReplayUse). An
// attempt counts from its assignment record to the record that ends it,
// with its request and the settings at the restart; one still assigned or
// running at the restart counts from its assignment to then, and holds
// again from then on (as live: charged while it runs). Replaying the whole
// journal so gives every use live had at the restart instant. What does
// not survive:
//   - a compaction (Scheduler::Snapshot) keeps no assignment times: an
//     attempt counts from its start (one not started when the snapshot
//     was taken: from its start after it, or the restart), one that never
//     started counts nothing, and only a task's latest kMaxPastAttempts
//     (16) count. A success that a rerun (lineage.cc) made history counts
//     the run time its worker measured, or nothing (the snapshot keeps the
//     rerun's time as its end, not the success's);
//   - a forgotten job's use, once a compaction dropped its records
//     (retention, forget.cc);
//   - an attempt the journal never saw, which a worker reports after the
//     restart (adoption), counts only from its adoption: its start is not
//     reported;
//   - the settings it was charged under: a changed half-life or gpu_weight
//     weighs all past use anew.
//
// Thread safety: none; owned by the scheduler's State.
#ifndef DROVER_CORE_FAIR_SHARE_H_
#define DROVER_CORE_FAIR_SHARE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
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
  // The party and share a user of that name counts with (known or not).
  std::pair<std::string, double> PartyFor(const std::string& user) const;

  bool enabled() const { return config_.enabled; }

  // --- rebuilding use at a restart (restore.cc) ---
  // User u's attempt held `req` from `start_us` to `end_us` and has ended:
  // adds what Hold at start_us and Release at end_us would have charged,
  // i.e. the exact integral of its rate over the span, decayed from each
  // instant of it to the user's latest charge (moved up to end_us first
  // when that is later). Each span decays on its own, so the order of the
  // calls does not matter (a snapshot replays attempts task by task, not
  // in time order). Nothing for an empty or reversed span. Users are made
  // known (AddUser) before.
  void AddPast(uint32_t u, const ResourceRequest& req, int64_t start_us, int64_t end_us);

  // While records are replayed: the attempts that hold now, by task (its
  // ExtraKey, task.h), and since when. ReplayHeld notes attempt `attempt`
  // of `task` as held since `since_us` unless that attempt is
  // noted already (its assignment came before its start). ReplayEnded
  // forgets the task's attempt and says since when it held (nullopt: none
  // noted). TakeReplayHeld calls f(task, since_us) for every attempt still
  // noted and forgets them all.
  // (Inline, and the map's nodes reused: a million-task restore meets
  // them once an attempt.)
  void ReplayHeld(uint64_t task, uint32_t attempt, int64_t since_us) {
    if (auto it = replay_held_.find(task); it != replay_held_.end()) {
      if (it->second.attempt != attempt) it->second = HeldSince{attempt, since_us};
      return;
    }
    if (replay_spare_.empty()) {
      replay_held_.emplace(task, HeldSince{attempt, since_us});
      return;
    }
    auto node = std::move(replay_spare_.back());
    replay_spare_.pop_back();
    node.key() = task;
    node.mapped() = HeldSince{attempt, since_us};
    replay_held_.insert(std::move(node));
  }
  std::optional<int64_t> ReplayEnded(uint64_t task) {
    auto node = replay_held_.extract(task);
    if (node.empty()) return std::nullopt;
    const int64_t since = node.mapped().since_us;
    replay_spare_.push_back(std::move(node));
    return since;
  }
  template <typename F>
  void TakeReplayHeld(F f) {
    for (const auto& [task, held] : replay_held_) f(task, held.since_us);
    replay_held_ = ReplayMap();  // freed: a restore happens once
    replay_spare_ = std::vector<ReplayMap::node_type>();
  }

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
  struct HeldSince {
    uint32_t attempt = 0;
    int64_t since_us = 0;
  };
  // Charges and decays `user` up to now_us at its rate (reads only the
  // book's settings).
  void Charge(UserUse& user, int64_t now_us) const;
  // Weighted resource-seconds per second of holding that much.
  double Rate(int64_t cpus_milli, int64_t gpus) const {
    return static_cast<double>(cpus_milli) / 1000.0 +
           config_.gpu_weight * static_cast<double>(gpus) / 100.0;
  }
  void Assign(uint32_t u);

  FairShareConfig config_;
  std::map<std::string, std::vector<std::string>> groups_;
  std::vector<UserUse> users_;
  std::vector<Party> parties_;
  std::map<std::string, uint32_t> party_ids_;
  // Only while restoring: the attempts replayed as held, and spare nodes.
  using ReplayMap = std::unordered_map<uint64_t, HeldSince>;
  ReplayMap replay_held_;
  std::vector<ReplayMap::node_type> replay_spare_;
};

}  // namespace drover::core

#endif  // DROVER_CORE_FAIR_SHARE_H_
