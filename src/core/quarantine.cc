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

QuarantineBook::PerWorker& BookOf(State& s, uint32_t w) {
  if (s.quarantine.workers.size() <= w) s.quarantine.workers.resize(w + 1);
  return s.quarantine.workers[w];
}

// Records that `group` does not fail quickly on `w` from `since_us` on.
void NoteWell(State& s, uint64_t group, uint32_t w, int64_t since_us) {
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
void WellElsewhere(const State& s, uint64_t group, uint32_t w, int64_t window_start_us,
                   std::set<uint32_t>& out) {
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

// Quarantines `w` when its recent endings are the evidence (quarantine.h).
bool Judge(State& s, uint32_t w) {
  const QuarantineConfig& c = s.config.quarantine;
  Worker& worker = s.workers[w];
  if (worker.quarantined) return true;
  QuarantineBook::PerWorker& book = BookOf(s, w);
  const int64_t since = s.now_us - c.window.count();
  while (!book.recent.empty() && book.recent.front().at_us < since) book.recent.pop_front();
  uint32_t failures = 0;
  uint32_t others = 0;  // endings that were not quick failures
  std::set<uint32_t> elsewhere;
  for (const QuarantineBook::Ended& e : book.recent) {
    if (!e.short_failure) {
      ++others;
      continue;
    }
    std::set<uint32_t> ok;
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
  worker.quarantined = true;
  worker.quarantined_until = TimeFromMicros(s.now_us + length.count());
  worker.quarantine_why =
      std::to_string(failures) + (failures == 1 ? " attempt" : " attempts") + " failed in under " +
      FormatDuration(c.short_attempt) +
      " where the same groups ran well on " + std::to_string(elsewhere.size()) + " other worker" +
      (elsewhere.size() == 1 ? "" : "s") + "; " + std::to_string(others) +
      " ended otherwise (in " + FormatDuration(c.window) + ")";
  book.recent.clear();
  s.quarantine.quarantined.push_back(w);
  ++s.quarantine.total;
  SyncPolicy(s, w);
  return true;
}

}  // namespace

void NoteAttemptStart(State& s, uint32_t w, TaskRef r) {
  const QuarantineConfig& c = s.config.quarantine;
  if (!c.enabled || w == kNone || w >= s.workers.size()) return;
  NoteWell(s, GroupKey(r.job, s.task(r).group), w, s.now_us + c.short_attempt.count());
  Prune(s);
}

bool NoteAttemptEnd(State& s, uint32_t w, TaskRef r, bool failure) {
  const QuarantineConfig& c = s.config.quarantine;
  if (!c.enabled || w == kNone || w >= s.workers.size()) return false;
  const Task& t = s.task(r);
  const uint64_t group = GroupKey(r.job, t.group);
  const bool short_failure = failure && s.now_us - t.started_us < c.short_attempt.count();
  QuarantineBook::PerWorker& book = BookOf(s, w);
  book.recent.push_back({s.now_us, group, short_failure});
  while (book.recent.size() > c.recent) book.recent.pop_front();
  if (short_failure) {
    // It failed quickly here: no evidence that the group does well here.
    if (auto it = s.quarantine.successes.find(group); it != s.quarantine.successes.end()) {
      std::erase_if(it->second, [&](const auto& x) { return x.worker == w; });
    }
    QuarantineBook::FailedOn& failed = s.quarantine.failed_on[group];
    failed.last_us = s.now_us;
    std::vector<uint32_t>& on = failed.workers;
    if (std::find(on.begin(), on.end(), w) == on.end()) {
      if (on.size() >= 4 * QuarantineBook::kSuccessWorkers) on.erase(on.begin());
      on.push_back(w);
    }
    Prune(s);
    return Judge(s, w);
  }
  if (failure) return s.workers[w].quarantined;
  // A success: evidence at once, a probation passed, and a judgement of
  // the workers where the group failed quickly.
  book.probation = false;
  NoteWell(s, group, w, s.now_us);
  if (auto failed = s.quarantine.failed_on.find(group); failed != s.quarantine.failed_on.end()) {
    const std::vector<uint32_t> judge = failed->second.workers;
    for (uint32_t other : judge) {
      if (other != w) Judge(s, other);
    }
  }
  return false;
}

void EndQuarantines(State& s) {
  std::vector<uint32_t>& q = s.quarantine.quarantined;
  for (size_t i = 0; i < q.size();) {
    Worker& worker = s.workers[q[i]];
    if (worker.quarantined && ToMicros(worker.quarantined_until) > s.now_us) {
      ++i;
      continue;
    }
    if (worker.quarantined) {
      worker.quarantined = false;
      QuarantineBook::PerWorker& book = BookOf(s, q[i]);
      book.last_end_us = s.now_us;
      book.probation = true;
      SyncPolicy(s, q[i]);
    }
    q.erase(q.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

void LiftQuarantine(State& s, uint32_t w) {
  Worker& worker = s.workers[w];
  if (!worker.quarantined) return;
  worker.quarantined = false;
  BookOf(s, w).last_end_us = s.now_us;
  std::erase(s.quarantine.quarantined, w);
  SyncPolicy(s, w);
}

}  // namespace drover::core
