// Explain: why a task is where it is, in words a person can act on.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>

#include "common/quantity.h"
#include "core/attempt_events_ops.h"
#include "core/leases_ops.h"
#include "core/lookup_ops.h"
#include "core/preemption_ops.h"
#include "core/quarantine_ops.h"
#include "core/scheduler_state.h"

namespace drover::core {

namespace {

std::string Plural(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// "2026-05-04 14:32:05 UTC": the core knows no time zone.
std::string FormatUtcTime(int64_t us) {
  namespace c = std::chrono;
  const c::sys_seconds t = c::floor<c::seconds>(c::sys_time<c::microseconds>(c::microseconds(us)));
  const c::sys_days day = c::floor<c::days>(t);
  const c::year_month_day ymd(day);
  const c::hh_mm_ss<c::seconds> hms(t - day);
  const auto two = [](int64_t n) { return (n < 10 ? "0" : "") + std::to_string(n); };
  return std::to_string(static_cast<int>(ymd.year())) + "-" +
         two(static_cast<unsigned>(ymd.month())) + "-" + two(static_cast<unsigned>(ymd.day())) +
         " " + two(hms.hours().count()) + ":" + two(hms.minutes().count()) + ":" +
         two(hms.seconds().count()) + " UTC";
}

// Two significant digits below 10, no trailing zeros: "12", "3.2", "1",
// "0.25", "0.017", "0" (fair-share use in hours, shares).
std::string TwoDigits(double v) {
  if (v >= 10) return std::to_string(std::llround(v));
  int decimals = 1;
  while (decimals < 6 && v * std::pow(10.0, decimals) < 10) ++decimals;
  if (v * std::pow(10.0, decimals) < 0.5) return "0";
  char buf[32];
  const auto end = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, decimals);
  std::string out(buf, end.ptr);
  while (out.back() == '0') out.pop_back();
  if (out.back() == '.') out.pop_back();
  return out;
}

// "3.1, 3.4".
std::string TaskList(const std::vector<TaskId>& ids) {
  std::string out;
  for (const TaskId& id : ids) out += (out.empty() ? "" : ", ") + id.ToString();
  return out;
}

// The workers placement may use (neither lost, drained, paused by its
// owner nor unhealthy); `left_out` says why the others were, when none is
// live: "all workers are drained" (or "in use by their owners", or
// "unhealthy (w3: /scratch not mounted)", or several of these), else "".
std::vector<const WorkerState*> LiveWorkers(const State& s, std::string& left_out) {
  const std::vector<Worker>& workers = s.workers;
  std::vector<const WorkerState*> live;
  bool drained = false;
  bool paused = false;
  std::string unhealthy;  // the first one's reason
  std::string quarantined;  // likewise
  for (const Worker& worker : workers) {
    if (worker.lost) continue;
    if (worker.drained || worker.paused || !worker.unhealthy.empty() || worker.quarantined) {
      drained = drained || worker.drained;
      paused = paused || (worker.paused && !worker.drained);
      if (unhealthy.empty() && !worker.drained && !worker.paused) unhealthy = worker.unhealthy;
      if (quarantined.empty() && !worker.drained && !worker.paused && worker.unhealthy.empty() &&
          worker.quarantined) {
        const QuarantineBook::PerWorker* q = QuarantineOf(s, worker.id);
        quarantined = q ? q->why : "";
      }
      continue;
    }
    live.push_back(worker.res.get());
  }
  left_out.clear();
  if (live.empty() && (drained || paused || !unhealthy.empty() || !quarantined.empty())) {
    std::vector<std::string> why;
    if (drained) why.push_back("drained");
    if (paused) why.push_back("in use by their owners");
    if (!unhealthy.empty()) why.push_back("unhealthy (" + unhealthy + ")");
    if (!quarantined.empty()) why.push_back("quarantined (" + quarantined + ")");
    left_out = "all workers are " + why[0];
    for (size_t i = 1; i < why.size(); ++i) left_out += (i + 1 == why.size() ? " or " : ", ") + why[i];
  }
  return live;
}

// Why no live worker could ever run the request, or "" if some could.
std::string NeverFits(const std::vector<const WorkerState*>& live, const ResourceRequest& req) {
  if (live.empty()) return "no workers are connected";
  auto any = [&](auto pred) {
    return std::any_of(live.begin(), live.end(), [&](const WorkerState* w) { return pred(*w); });
  };
  for (const auto& [key, value] : req.labels) {
    if (!any([&](const WorkerState& w) {
          auto it = w.resources().labels.find(key);
          return it != w.resources().labels.end() && it->second == value;
        })) {
      return "no worker has label " + key + "=" + value;
    }
  }
  if (req.private_network &&
      !any([](const WorkerState& w) { return w.resources().private_network; })) {
    return "no worker can give a task a private network (network = \"none\" needs a worker "
           "that may create network namespaces: root, or one whose kernel allows unprivileged "
           "user namespaces)";
  }
  if (req.container &&
      !any([](const WorkerState& w) { return !w.resources().container_runtime.empty(); })) {
    return "no worker can run containers (a task with an image needs a worker where podman "
           "runs; `drover worker --check` says what a machine has)";
  }
  if (req.container && req.gpus > 0 &&
      !any([&](const WorkerState& w) { return w.ContainerFits(req); })) {
    return "no worker can give a container only its own GPUs (a task with an image and GPUs "
           "needs the NVIDIA container toolkit's CDI spec, /etc/cdi/nvidia.yaml, on the worker)";
  }
  if (req.disk_bytes > 0 && !any([&](const WorkerState& w) { return w.DiskFits(req); })) {
    uint64_t most = 0;
    for (const WorkerState* w : live) most = std::max(most, w->resources().disk_free_bytes);
    return "no worker has " + FormatBytes(req.disk_bytes) +
           " free for its directory (disk; the most free is " + FormatBytes(most) + ")";
  }
  if (req.gpus > 0 && !req.gpu_types.empty()) {
    bool offered = any([&](const WorkerState& w) {
      return std::any_of(w.resources().gpus.begin(), w.resources().gpus.end(),
                         [&](const GpuDevice& d) { return GpuModelAccepted(req.gpu_types, d.model); });
    });
    if (!offered) {
      std::string types;
      for (size_t i = 0; i < req.gpu_types.size(); ++i) types += (i ? "|" : "") + req.gpu_types[i];
      return "no worker offers gpu_type " + types;
    }
  }
  if (req.gpus > 0 && req.gpu_mem_bytes > 0) {
    bool offered = any([&](const WorkerState& w) {
      return std::any_of(w.resources().gpus.begin(), w.resources().gpus.end(),
                         [&](const GpuDevice& d) { return d.memory_bytes >= req.gpu_mem_bytes; });
    });
    if (!offered) return "no worker has a GPU with " + FormatBytes(req.gpu_mem_bytes) + " of memory";
  }
  for (const auto& [name, amount] : req.counters) {
    if (!any([&](const WorkerState& w) {
          auto it = w.resources().counters.find(name);
          return it != w.resources().counters.end() && it->second >= amount;
        })) {
      return "no worker offers " + std::to_string(amount) + " of counter " + name;
    }
  }
  if (!any([&](const WorkerState& w) { return w.CanEverFit(req); })) {
    return "no worker is large enough for " + req.ToString();
  }
  return "";
}

// Why every worker that fits leaves too soon for a task with this timeout
// (WorkerResources::ends_at), or "" if one stays long enough.
std::string LeaveTooSoon(const std::vector<const WorkerState*>& fit, Duration timeout,
                         int64_t now_us) {
  int64_t latest = 0;  // the latest end among the fitting workers
  for (const WorkerState* w : fit) {
    if (w->resources().EndsInTime(timeout, TimeFromMicros(now_us))) return "";
    latest = std::max(latest, ToMicros(*w->resources().ends_at));
  }
  if (fit.empty()) return "";
  const std::string leaves =
      latest > now_us ? "in " + FormatDuration(Seconds((latest - now_us) / 1'000'000)) : "now";
  if (timeout.count() <= 0) {
    return "every worker that fits it leaves at a set time (the last " + leaves +
           ") and it has no timeout to end by then";
  }
  return "every worker that fits it leaves before its timeout of " + FormatDuration(timeout) +
         " would end (the last " + leaves + ")";
}

// The first dimension in which no worker has room now, with the largest
// free amount, e.g. "needs 2 GPUs, largest free is 1".
std::string Shortest(const std::vector<const WorkerState*>& fit, const ResourceRequest& req) {
  if (req.gpus > 0) {
    if (req.IsGpuShare()) {
      int64_t best = 0;
      for (const WorkerState* w : fit) {
        for (size_t i = 0; i < w->resources().gpus.size(); ++i) {
          if (GpuModelAccepted(req.gpu_types, w->resources().gpus[i].model) &&
              w->gpu_free_mem(i) >= req.gpu_mem_bytes) {
            best = std::max(best, w->gpu_free_share(i));
          }
        }
      }
      if (best < req.gpus) {
        return "needs " + FormatGpus(req.gpus) + " of a GPU, largest free share is " +
               FormatGpus(best);
      }
    } else {
      uint32_t best = 0;
      for (const WorkerState* w : fit) best = std::max(best, w->MatchingFreeWholeGpus(req));
      if (best < req.GpuCount()) {
        return "needs " + Plural(req.GpuCount(), "GPU", "GPUs") + ", largest free is " +
               std::to_string(best);
      }
    }
  }
  uint32_t cores = 0;
  uint64_t mem = 0;
  for (const WorkerState* w : fit) {
    cores = std::max(cores, w->free_core_count());
    mem = std::max(mem, w->free_mem());
  }
  if (cores < req.CoreCount()) {
    return "needs " + Plural(req.CoreCount(), "cpu", "cpus") + ", largest free is " +
           std::to_string(cores);
  }
  if (mem < req.mem_bytes) {
    return "needs " + FormatBytes(req.mem_bytes) + " memory, largest free is " + FormatBytes(mem);
  }
  for (const auto& [name, amount] : req.counters) {
    int64_t best = 0;
    for (const WorkerState* w : fit) {
      auto it = w->free_counters().find(name);
      if (it != w->free_counters().end()) best = std::max(best, it->second);
    }
    if (best < amount) {
      return "needs " + std::to_string(amount) + " " + name + ", largest free is " +
             std::to_string(best);
    }
  }
  return "no single worker has all of " + req.ToString() + " free";
}

// "a", "a and b", "a, b and c".
std::string AndList(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
  }
  return out;
}

// "fair share: ana has used 3.2 CPU-h (share 1), bob 0.4 CPU-h goes first":
// each party's use as the standings that order the queues give it
// (standing x share, as of the last Tick), for `user` and for the users
// `first` whose lower standing puts their tasks ahead (a group with a share
// once, as "group lab"; the first three named). name_of(u): user u's name.
template <typename NameOf>
std::string FairShareNote(const FairShareBook& book, const TaskQueues& queues, NameOf name_of,
                          uint32_t user, const std::vector<uint32_t>& first) {
  const auto party_of = [&](uint32_t u) {
    return u < book.user_count() ? std::make_pair(book.PartyOf(u), book.ShareOf(u))
                                 : book.PartyFor(name_of(u));
  };
  const auto use = [&](uint32_t u, double share) {
    return TwoDigits(queues.Standing(u) * share / 3600) + " CPU-h";
  };
  const auto [party, share] = party_of(user);
  const std::string& name = name_of(user);
  std::string note = "fair share: " + (party == name ? name : name + "'s group " + party) +
                     " has used " + use(user, share) + " (share " + TwoDigits(share) + "), ";
  std::vector<std::string> parties;  // "bob", "group lab"
  std::vector<std::string> ahead;
  for (uint32_t u : first) {
    const auto [other, other_share] = party_of(u);
    const std::string label = other == name_of(u) ? other : "group " + other;
    if (std::find(parties.begin(), parties.end(), label) != parties.end()) continue;
    parties.push_back(label);
    ahead.push_back(label + " " + use(u, other_share) +
                    (other_share != 1 ? " (share " + TwoDigits(other_share) + ")" : ""));
  }
  constexpr size_t kNamed = 3;
  const size_t more = ahead.size() > kNamed ? ahead.size() - kNamed : 0;
  ahead.resize(ahead.size() - more);
  if (more > 0) ahead.push_back(std::to_string(more) + " more");
  return note + AndList(ahead) + (parties.size() == 1 ? " goes first" : " go first");
}

}  // namespace

Result<std::string> Scheduler::Explain(TaskId id) const {
  const State& s = *state_;
  ASSIGN_OR_RETURN(TaskRef r, s.Find(id));
  const Job& job = s.jobs[r.job];
  const Task& t = s.task(r);
  const std::string reason = ReasonOf(s, r).text;
  switch (t.state) {
    case TaskState::kSucceeded:
      return std::string("succeeded");
    case TaskState::kFailed:
    case TaskState::kCanceled:
      return std::string(TaskStateName(t.state)) + ": " + reason;
    case TaskState::kAssigned:
    case TaskState::kRunning: {
      const Active& act = s.actives[t.active];
      std::string where = "worker " + std::to_string(t.worker);
      if (act.lost) return where + " lost; waiting for its leases to expire";
      if (t.state == TaskState::kRunning) {
        return "running on " + where + " (attempt " + std::to_string(t.attempt) + ")";
      }
      if (act.prev != kNone) {
        const std::string behind =
            s.IdOf(s.actives[act.prev].task).ToString() + " on " + where;
        if (t.flags.Has(TaskFlag::kWithdraw)) {
          for (const auto& [w, held] : s.queue_ahead.holds) {
            if (held == r) {
              return "moving to worker " + std::to_string(s.workers[w].id) +
                     ", where room freed first (waited behind " + behind + ")";
            }
          }
          if (auto d = s.queue_ahead.displaced.find(r); d != s.queue_ahead.displaced.end()) {
            return "making way for " + s.IdOf(d->second).ToString() +
                   " of higher priority (waited behind " + behind + ")";
          }
        }
        return "waits behind " + behind + (act.granted ? "" : " (lease claim pending)");
      }
      return "assigned to " + where + (act.granted ? "" : " (lease claim pending)");
    }
    case TaskState::kWaiting: {
      for (uint32_t d : job.groups[t.group].deps) {
        const Group& g = job.groups[d];
        for (uint32_t i = 0; i < g.count; ++i) {
          if (job.tasks[g.first + i].state != TaskState::kSucceeded) {
            return "waiting for dependency " + TaskId{job.id, g.first + i}.ToString();
          }
        }
      }
      for (const TaskId& after : job.spec->after_tasks) {
        if (s.task(s.Find(after).value()).state != TaskState::kSucceeded) {
          return "waiting for dependency " + after.ToString();
        }
      }
      for (JobId after : job.spec->after_jobs) {
        if (s.jobs[s.job_slots.at(after)].not_succeeded > 0) {
          return "waiting for job " + std::to_string(after);
        }
      }
      return std::string("waiting");
    }
    case TaskState::kQueued:
      break;
  }

  if (s.adoption.settling) {
    const size_t attached = s.adoption.settle_expected - s.adoption.settle_waiting.size();
    return "held: server restarted, waiting for workers to re-attach (" + std::to_string(attached) +
           " of " + std::to_string(s.adoption.settle_expected) + ")";
  }
  const TaskGroupSpec& spec = s.SpecOf(r);
  if (t.flags.Has(TaskFlag::kBackoff)) {
    const int64_t at = t.finished_us + BackoffFor(s, r).count();
    return "backing off: retry " + std::to_string(t.failures) + " of " +
           std::to_string(spec.retries) + " in " +
           FormatDuration(Duration(std::max<int64_t>(0, at - s.now_us)));
  }
  const ResourceRequest& req = spec.resources;
  if (t.flags.Has(TaskFlag::kParked)) {
    // Parked until its user's (or a group's) usage drops (Unpark): the
    // limit it passes.
    return s.users[job.user].account.Explain(req);
  }

  std::string left_out;
  const std::vector<const WorkerState*> live = LiveWorkers(s, left_out);
  std::vector<const WorkerState*> fit;
  for (const WorkerState* w : live) {
    if (w->CanEverFit(req)) fit.push_back(w);
  }
  if (!left_out.empty()) return left_out;
  std::string never = NeverFits(live, req);
  if (!never.empty()) return never;
  if (std::string leaving = LeaveTooSoon(fit, s.SpecOf(r).timeout, s.now_us); !leaving.empty()) {
    return leaving;
  }

  // Queue position among live entries of its class, and the users of its
  // priority there whose lower fair-share standing puts them first.
  uint64_t ahead = 0;
  std::vector<uint32_t> first_by_standing;
  const double standing = s.queues.Standing(job.user);
  s.queues.ForEach(job.groups[t.group].cls, [&](const QueueEntry& e) {
    if (e.task == r) return false;
    const Task& other = s.task(e.task);
    if (other.state != TaskState::kQueued ||
        other.flags.Any(TaskFlag::kBackoff | TaskFlag::kParked)) {
      return true;
    }
    ++ahead;
    const uint32_t user = s.jobs[e.task.job].user;
    if (s.fair_share.enabled() && s.queues.Standing(user) < standing &&
        s.SpecOf(e.task).priority == spec.priority &&
        std::find(first_by_standing.begin(), first_by_standing.end(), user) ==
            first_by_standing.end()) {
      first_by_standing.push_back(user);
    }
    return true;
  });
  if (ahead > 0) {
    std::string why = "behind " + Plural(ahead, "task", "tasks") + " of its class";
    if (first_by_standing.empty()) return why;
    const auto name_of = [&](uint32_t u) -> const std::string& {
      return s.users[u].account.name();
    };
    return why + "; " + FairShareNote(s.fair_share, s.queues, name_of, job.user, first_by_standing);
  }

  // Preemption (preemption.h): its victims are ending, or the only ones it
  // could have are cooling down.
  if (const Preemption* p = s.preemption.For(r); p != nullptr && !p->victims.empty()) {
    std::vector<TaskId> ids;
    for (const auto& [victim, attempt] : p->victims) ids.push_back(s.IdOf(victim));
    return "preempting " + TaskList(ids) + " on worker " + std::to_string(s.workers[p->worker].id);
  }
  if (s.config.preempt_priority && spec.priority >= *s.config.preempt_priority &&
      ChooseVictims(s, r, false).worker == kNone) {
    const VictimChoice cooling = ChooseVictims(s, r, true);
    if (cooling.worker != kNone && cooling.cooldown_until > 0) {
      std::vector<TaskId> ids;
      for (uint32_t a : cooling.actives) ids.push_back(s.IdOf(s.actives[a].task));
      return "would preempt " + TaskList(ids) + ", in cool-down until " +
             FormatUtcTime(cooling.cooldown_until);
    }
  }

  // It fits now on worker slot w and on no other live worker.
  const auto only_room_on = [&](uint32_t w) {
    if (!Schedulable(s, w) || !s.workers[w].res->Fits(req, false)) return false;
    for (uint32_t v = 0; v < s.workers.size(); ++v) {
      if (v != w && Schedulable(s, v) && s.workers[v].res->Fits(req, false)) return false;
    }
    return true;
  };
  if (s.reservation.active && !(s.reservation.task == r) &&
      s.ClassOf(r) != s.ClassOf(s.reservation.task) && only_room_on(s.reservation.worker)) {
    return "held back: reservation for " + s.IdOf(s.reservation.task).ToString();
  }
  for (const Preemption& p : s.preemption.in_flight) {
    if (!(p.preemptor == r) && only_room_on(p.worker)) {
      return "held back: preemption by " + s.IdOf(p.preemptor).ToString() + " on worker " +
             std::to_string(s.workers[p.worker].id);
    }
  }
  return Shortest(fit, req);
}

Result<std::vector<std::string>> Scheduler::Unrunnable(JobId id) const {
  const State& s = *state_;
  auto slot = s.job_slots.find(id);
  if (slot == s.job_slots.end()) return NotFound("no job " + std::to_string(id));
  // After a restart the workers are still coming back: none is missing yet.
  if (s.adoption.settling) return std::vector<std::string>{};
  std::string left_out;
  const std::vector<const WorkerState*> live = LiveWorkers(s, left_out);
  if (live.empty()) {
    return std::vector<std::string>{!left_out.empty() ? left_out : "no workers are connected"};
  }
  std::vector<std::string> out;
  for (const TaskGroupSpec& group : s.jobs[slot->second].spec->groups) {
    std::string never = NeverFits(live, group.resources);
    if (!never.empty()) out.push_back("task group " + group.name + ": " + never);
  }
  return out;
}

}  // namespace drover::core
