// Quotas (quotas.cc): each user's account (user_account.h) with its quota
// and groups from config.users; a head over quota is parked on its user's
// list (dispatch.cc) and put back when the user or a member of its limited
// groups gives room back.
//
// Internal to src/core. Thread safety: none, like Scheduler.
#ifndef DROVER_CORE_QUOTAS_OPS_H_
#define DROVER_CORE_QUOTAS_OPS_H_

#include <cstdint>
#include <string>

#include "core/scheduler_state.h"

namespace drover::core {

// A new user's account: its quota and its groups from config.users.
UserAccount AccountFor(State& s, const std::string& name);
// After `user` gave room back: Unpark it and the other members of its
// limited groups that have parked tasks.
void UnparkFreed(State& s, uint32_t user);
// UserPolicyChanged: the new limits and groups, each account's use kept.
void ApplyUserPolicy(State& s, const UserPolicy& policy);
// Each user's queued tasks counted again from the jobs (after a restore).
void RecountQueued(State& s);

}  // namespace drover::core

#endif  // DROVER_CORE_QUOTAS_OPS_H_
