// Report: a replay's figures for people (text, a comparison table) and for
// programs (one JSON object per line).
//
// All output is a function of the results only (no wall-clock figures), so
// the same trace gives byte-identical reports.
//
// Thread safety: pure functions.
#ifndef DROVER_SIM_REPORT_H_
#define DROVER_SIM_REPORT_H_

#include <string>
#include <vector>

#include "sim/bound.h"
#include "sim/cluster.h"
#include "sim/simulator.h"

namespace drover::sim {

// Several lines:
//   policy spread: 2000 tasks in 412 jobs on 4 workers (128 cpus, 1 TiB, 16 GPUs)
//   makespan    31h12m4s (112324.0 s), 1.031x the lower bound 108934.2 s
//               (GPU work 108934.2 s, cpu work 40233.1 s, longest chain 14400.0 s)
//   queue wait  mean 5231.2 s, p50 4100.0 s, p95 15022.9 s, max 20011.0 s
//   utilization cpu 41.2%, mem 22.0%, gpu 96.9%
//   GPU idle while a fitting task waited: 0.0 GPU-s outside reservations,
//               1234.5 GPU-s held for a reservation
// With owner presence in the trace, FormatOwners follows; with more than
// one user, FormatUsers.
std::string FormatText(const SimResult& result, const MakespanBound& bound, const Cluster& cluster);

// What the owners' presence cost (SimResult::owners), three lines:
//   owners      12 presences took back 345600.0 GPU-s of capacity; 9 attempts
//               suspended, holding 2400.0 GPU-s (1200.0 core-s)
//               7 attempts vacated, 3100.0 GPU-s (...) of work lost; 1 tasks
//               killed at their limit (...), 0 canceled after them
//               throughput kept 93.1% (... GPU-s of finished work over ...)
std::string FormatOwners(const SimResult& result);

// What each user got (SimResult::users), under whether fair share was on:
//   users       fair share on
//     u1  412 tasks, 1234.0 GPU-s, 567.0 core-s; wait mean 12.0 s, p95 40.0 s, max 60.0 s
std::string FormatUsers(const SimResult& result);

// Where the free GPU time went (SimResult::idle), one line per cause with
// its GPU-seconds, its share and the makespan it stands for:
//   GPU idle by cause (128928.0 GPU-s = 8058.0 s of makespan above ...):
//     held for a reservation                 20320.4 GPU-s   15.8%   1270.0 s of makespan
//     ...
std::string FormatIdleProfile(const SimResult& result, const Cluster& cluster);

// One JSON object (no newline) with every figure: policy, reservations,
// tasks, jobs, events, makespan_s, lower_bound_s, gpu_area_bound_s,
// cpu_area_bound_s, chain_bound_s, makespan_ratio_to_bound, plain_bound_s
// (max of all GPU-seconds / GPUs and the chain), makespan_ratio_to_plain_bound,
// wait_mean_s,
// wait_p50_s, wait_p95_s, wait_max_s, cpu_utilization, mem_utilization,
// gpu_utilization, idle_while_waiting_gpu_s (outside reservations),
// reservation_idle_gpu_s, idle_fragmentation_gpu_s, idle_dependency_gpu_s,
// idle_queue_empty_gpu_s, idle_after_last_submit_gpu_s (SimResult::idle),
// idle_owner_gpu_s, and SimResult::owners: owner_presences,
// owner_capacity_gpu_s, suspended_attempts, suspended_gpu_s,
// suspended_cpu_s, vacated_attempts, vacated_gpu_s, vacated_cpu_s,
// timed_out_tasks, timed_out_gpu_s, canceled_tasks, useful_gpu_s,
// throughput_kept, locality, input_bytes, moved_bytes, fair_share, and
// users: one object per user of the trace (user, tasks, cpu_s, gpu_s,
// wait_mean_s, wait_p95_s, wait_max_s).
std::string FormatJson(const SimResult& result, const MakespanBound& bound);

// One row per result, under a header line, with the bound written above
// (with owner presence, two more columns: vacated attempts, throughput kept):
//   lower bound 108934.2 s (GPU work 108934.2 s, cpu work ..., longest chain ...)
//   policy       makespan_s  x_bound  wait_mean_s  wait_p50_s  wait_p95_s  gpu_util  ...
std::string FormatTable(const std::vector<SimResult>& results, const MakespanBound& bound);

}  // namespace drover::sim

#endif  // DROVER_SIM_REPORT_H_
