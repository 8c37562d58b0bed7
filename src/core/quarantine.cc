// Black-hole quarantine (quarantine.h).
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <set>
#include <string>

#include "common/quantity.h"
#include "core/leases_ops.h"
#include "core/quarantine_ops.h"
#include "core/scheduler_state.h"
#include "core/worker_events_ops.h"

namespace drover::core {
namespace {

// The slot of worker `id` when it has joined since the start; kNone else.
uint32_t SlotOf(const State& s, WorkerId id) {
  auto it = s.worker_slots.find(id);
  return it == s.worker_slots.end() ? kNone : it->second;
}

// Ends `id`'s quarantine, whose cool-down ended at `at_us`: on probation.
void Release(State& s, WorkerId id, int64_t at_us) {
  QuarantineBook::PerWorker& book = s.quarantine.workers[id];
  book.until_us = 0;
  book.why.clear();
  book.last_end_us = at_us;
  book.probation = true;
  if (const uint32_t w = SlotOf(s, id); w != kNone && s.workers[w].quarantined) {
    s.workers[w].quarantined = false;
    SyncPolicy(s, w);
  }
}

// Records that `group` does not fail quickly on `w` from `since_us` on.
void NoteWell(State& s, uint64_t group, WorkerId w, int64_t since_us) {
  std::vector<QuarantineBook::Success>& ok = s.quarantine.successes[group];
  auto same = std::find_if(ok.begin(), ok.end(), [&](const auto& x) { return x.worker == w; });
  if (same != ok.end()) {
    same->since_us = std::min(same->since_us, since_us);
    return;
  }
  if (ok.size() >= QuarantineBook::kSuccessWorkers) {
    ok.erase(std::min_element(ok.begin(), ok.end(), [](const auto& a, const auto& b) {
      return a.since_us < b.since_us;
    }));
  }
  ok.push_back({w, since_us});
}

// The other workers where `group` did not fail quickly, as of now, within
// the window.
void WellElsewhere(const State& s, uint64_t group, WorkerId w, int64_t window_start_us,
                   std::set<WorkerId>& out) {
  auto it = s.quarantine.successes.find(group);
  if (it == s.quarantine.successes.end()) return;
  for (const QuarantineBook::Success& ok : it->second) {
    if (ok.worker != w && ok.since_us <= s.now_us && ok.since_us >= window_start_us) {
      out.insert(ok.worker);
    }
  }
}

// Drops the groups the window has passed by from both maps (quarantine.h:
// prune_at), so they hold what a judgement can still use.
void Prune(State& s) {
  QuarantineBook& book = s.quarantine;
  if (book.successes.size() + book.failed_on.size() < book.prune_at) return;
  const int64_t since = s.now_us - s.config.quarantine.window.count();
  for (auto it = book.successes.begin(); it != book.successes.end();) {
    std::erase_if(it->second, [&](const auto& ok) { return ok.since_us < since; });
    it = it->second.empty() ? book.successes.erase(it) : std::next(it);
  }
  std::erase_if(book.failed_on, [&](const auto& entry) { return entry.second.last_us < since; });
  book.prune_at = std::max<size_t>(1024, 2 * (book.successes.size() + book.failed_on.size()));
}

// Quarantines worker `w` when its recent endings are the evidence
// (quarantine.h).
bool Judge(State& s, WorkerId w) {
  const QuarantineConfig& c = s.config.quarantine;
  QuarantineBook::PerWorker& book = s.quarantine.workers[w];
  if (book.until_us != 0) return true;
  const int64_t since = s.now_us - c.window.count();
  while (!book.recent.empty() && book.recent.front().at_us < since) book.recent.pop_front();
  uint32_t failures = 0;
  uint32_t others = 0;  // endings that were not quick failures
  std::set<WorkerId> elsewhere;
  for (const QuarantineBook::Ended& e : book.recent) {
    if (!e.short_failure) {
      ++others;
      continue;
    }
    std::set<WorkerId> ok;
    WellElsewhere(s, e.group, w, since, ok);
    // Not judged (yet): it may fail everywhere; but a worker on probation
    // (released, no success since) is judged by its own failures.
    if (ok.empty() && !book.probation) continue;
    ++failures;
    elsewhere.insert(ok.begin(), ok.end());
  }
  const uint32_t needed = book.probation ? 1 : c.min_failures;
  if (failures < needed || failures < c.min_fraction * static_cast<double>(failures + others)) {
    return false;
  }
  // Quiet stretches since the last one forget doublings.
  if (book.last_end_us > 0) {
    int64_t quiet = s.now_us - book.last_end_us;
    while (book.repeats > 0 && book.last_length_us > 0 && quiet >= 2 * book.last_length_us) {
      --book.repeats;
      quiet -= 2 * book.last_length_us;
    }
  }
  Duration length = c.cooldown;
  for (uint32_t i = 0; i < book.repeats && length < c.max_cooldown; ++i) length *= 2;
  length = std::min(length, c.max_cooldown);
  ++book.repeats;
  book.last_length_us = length.count();
  book.until_us = s.now_us + length.count();
  book.why = std::to_string(failures) + (failures == 1 ? " attempt" : " attempts") +
             " failed in under " + FormatDuration(c.short_attempt) +
             " where the same groups ran well on " + std::to_string(elsewhere.size()) +
             " other worker" + (elsewhere.size() == 1 ? "" : "s") + "; " + std::to_string(others) +
             " ended otherwise (in " + FormatDuration(c.window) + ")";
  book.recent.clear();
  s.quarantine.quarantined.push_back(w);
  if (!s.quarantine.replaying) ++s.quarantine.total;
  if (const uint32_t slot = SlotOf(s, w); slot != kNone) {
    s.workers[slot].quarantined = true;
    SyncPolicy(s, slot);
  }
  return true;
}

// Notes how an attempt of `group` that started at `started_us` ended on
// worker `w` now (NoteAttemptEnd); true when `w` is quarantined now.
bool NoteEnd(State& s, WorkerId w, uint64_t group, int64_t started_us, bool failure) {
  const QuarantineConfig& c = s.config.quarantine;
  const bool short_failure = failure && s.now_us - started_us < c.short_attempt.count();
  QuarantineBook::PerWorker& book = s.quarantine.workers[w];
  book.recent.push_back({s.now_us, group, short_failure});
  while (book.recent.size() > c.recent) book.recent.pop_front();
  if (short_failure) {
    // It failed quickly here: no evidence that the group does well here.
    if (auto it = s.quarantine.successes.find(group); it != s.quarantine.successes.end()) {
      std::erase_if(it->second, [&](const auto& x) { return x.worker == w; });
    }
    QuarantineBook::FailedOn& failed = s.quarantine.failed_on[group];
    failed.last_us = s.now_us;
    std::vector<WorkerId>& on = failed.workers;
    if (std::find(on.begin(), on.end(), w) == on.end()) {
      if (on.size() >= 4 * QuarantineBook::kSuccessWorkers) on.erase(on.begin());
      on.push_back(w);
    }
    Prune(s);
    return Judge(s, w);
  }
  if (failure) return book.until_us != 0;
  // A success: evidence at once, a probation passed, and a judgement of
  // the workers where the group failed quickly.
  book.probation = false;
  NoteWell(s, group, w, s.now_us);
  if (auto failed = s.quarantine.failed_on.find(group); failed != s.quarantine.failed_on.end()) {
    const std::vector<WorkerId> judge = failed->second.workers;
    for (WorkerId other : judge) {
      if (other != w) Judge(s, other);
    }
  }
  return false;
}

}  // namespace

void NoteAttemptStart(State& s, uint32_t w, TaskRef r) {
  const QuarantineConfig& c = s.config.quarantine;
  if (!c.enabled || w == kNone || w >= s.workers.size()) return;
  NoteWell(s, GroupKey(r.job, s.task(r).group), s.workers[w].id,
           s.now_us + c.short_attempt.count());
  Prune(s);
}

bool NoteAttemptEnd(State& s, uint32_t w, TaskRef r, bool failure) {
  if (!s.config.quarantine.enabled || w == kNone || w >= s.workers.size()) return false;
  const Task& t = s.task(r);
  return NoteEnd(s, s.workers[w].id, GroupKey(r.job, t.group), t.started_us, failure);
}

void EndQuarantines(State& s) {
  std::vector<WorkerId>& q = s.quarantine.quarantined;
  for (size_t i = 0; i < q.size();) {
    const int64_t until = s.quarantine.workers[q[i]].until_us;
    if (until > s.now_us) {
      ++i;
      continue;
    }
    if (until != 0) Release(s, q[i], until);
    q.erase(q.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

void LiftQuarantine(State& s, uint32_t w) {
  Worker& worker = s.workers[w];
  QuarantineBook::PerWorker& book = s.quarantine.workers[worker.id];
  if (book.until_us == 0) return;
  book.until_us = 0;
  book.why.clear();
  book.last_end_us = s.now_us;
  std::erase(s.quarantine.quarantined, worker.id);
  worker.quarantined = false;
  SyncPolicy(s, w);
}

void ResumeQuarantine(State& s, uint32_t w) {
  auto it = s.quarantine.workers.find(s.workers[w].id);
  if (it == s.quarantine.workers.end() || it->second.until_us == 0) return;
  if (it->second.until_us <= s.now_us) {
    EndQuarantines(s);
    return;
  }
  s.workers[w].quarantined = true;
}

const QuarantineBook::PerWorker* QuarantineOf(const State& s, WorkerId id) {
  auto it = s.quarantine.workers.find(id);
  return it == s.quarantine.workers.end() || it->second.until_us == 0 ? nullptr : &it->second;
}

namespace {

void Gather(State& s, QuarantineBook::Restored a) {
  QuarantineBook& book = s.quarantine;
  book.restored_latest_us = std::max({book.restored_latest_us, a.start_us, a.end_us});
  book.restored.push_back(a);
  if (book.restored.size() < book.restored_compact_at) return;
  // A long journal: what is older than the replay's horizon is dropped as
  // it goes, so the gathering stays as large as the horizon needs.
  const int64_t since = book.restored_latest_us - QuarantineHorizon(s.config.quarantine).count();
  std::erase_if(book.restored,
                [&](const auto& x) { return std::max(x.start_us, x.end_us) < since; });
  book.restored_compact_at = std::max<size_t>(4096, 2 * book.restored.size());
}

}  // namespace

void NoteRestoredRecord(State& s, TaskRef r, const TaskRecord& record) {
  if (!s.config.quarantine.enabled) return;
  using End = QuarantineBook::Restored::End;
  const Task& t = s.task(r);
  const bool active = t.state == TaskState::kAssigned || t.state == TaskState::kRunning;
  // As OnFinished notes it: a success, the task's own failure, or an end
  // that is neither (cancel, preemption, vacate, lost worker).
  const End end = record.state == TaskState::kSucceeded ? End::kSuccess
                  : record.kind == EndKind::kFailed || record.kind == EndKind::kTimedOut
                      ? End::kFailure
                      : End::kOther;
  if (active && record.attempt == t.attempt &&
      (record.state == TaskState::kQueued || IsTerminal(record.state))) {
    // An attempt ends (a journal's own record, or a snapshot's past one).
    if (t.state != TaskState::kRunning || t.worker == 0) return;  // it never started
    Gather(s, {t.worker, GroupKey(r.job, t.group), t.started_us, ToMicros(record.at), end});
  } else if (!active && IsTerminal(record.state) && end != End::kOther && record.worker != 0 &&
             record.started != Time()) {
    // A snapshot's ended task: its last attempt, in one record.
    Gather(s, {record.worker, GroupKey(r.job, t.group), ToMicros(record.started),
               ToMicros(record.at), end});
  }
}

void NoteRestoredRunning(State& s, TaskRef r) {
  const Task& t = s.task(r);
  if (!s.config.quarantine.enabled || t.state != TaskState::kRunning || t.worker == 0) return;
  Gather(s, {t.worker, GroupKey(r.job, t.group), t.started_us, 0,
             QuarantineBook::Restored::End::kRunning});
}

void ReplayRestoredAttempts(State& s) {
  QuarantineBook& book = s.quarantine;
  const std::vector<QuarantineBook::Restored> attempts = std::move(book.restored);
  book.restored = {};
  if (!s.config.quarantine.enabled || attempts.empty()) return;
  using End = QuarantineBook::Restored::End;
  const QuarantineConfig& c = s.config.quarantine;
  const int64_t now = s.now_us;
  const int64_t since = now - QuarantineHorizon(c).count();
  // Starts and ends in time order (a snapshot lists them task by task); at
  // the same time a start goes first, as it did live.
  struct Step {
    int64_t at_us;
    bool end;
    uint32_t index;
  };
  std::vector<Step> steps;
  for (uint32_t i = 0; i < attempts.size(); ++i) {
    const QuarantineBook::Restored& a = attempts[i];
    if (std::max(a.start_us, a.end_us) < since) continue;
    steps.push_back({a.start_us, false, i});
    if (a.end == End::kSuccess || a.end == End::kFailure) steps.push_back({a.end_us, true, i});
  }
  std::stable_sort(steps.begin(), steps.end(), [](const Step& x, const Step& y) {
    return x.at_us != y.at_us ? x.at_us < y.at_us : !x.end && y.end;
  });
  book.replaying = true;
  for (const Step& step : steps) {
    const QuarantineBook::Restored& a = attempts[step.index];
    s.now_us = std::min(step.at_us, now);
    if (!book.quarantined.empty()) EndQuarantines(s);
    if (!step.end) {
      NoteWell(s, a.group, a.worker, a.start_us + c.short_attempt.count());
      Prune(s);
    } else {
      NoteEnd(s, a.worker, a.group, a.start_us, a.end == End::kFailure);
    }
  }
  s.now_us = now;
  if (!book.quarantined.empty()) EndQuarantines(s);
  book.replaying = false;
}

}  // namespace drover::core
