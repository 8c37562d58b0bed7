// The result cache (result_cache.h).
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "core/attempt_events_ops.h"
#include "core/input_select.h"
#include "core/locality_ops.h"
#include "core/replicas_ops.h"
#include "core/result_cache_ops.h"
#include "core/scheduler_state.h"

namespace drover::core {
namespace {

// Length-prefixed fields: no two different inputs make the same bytes.
class KeyMaterial {
 public:
  void Field(std::string_view v) {
    bytes_ += std::to_string(v.size());
    bytes_ += ':';
    bytes_ += v;
  }
  void Count(size_t n) { Field(std::to_string(n)); }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_ = "drover-cache-v1;";
};

// Whose entries a user's tasks reuse: their own, or their group's when it
// shares its cache (UserPolicy::cache_sharing_groups).
std::string ScopeOf(const State& s, const std::string& user) {
  for (const std::string& group : s.config.users.cache_sharing_groups) {
    auto members = s.config.users.groups.find(group);
    if (members != s.config.users.groups.end() &&
        std::find(members->second.begin(), members->second.end(), user) != members->second.end()) {
      return "group " + group;
    }
  }
  return "user " + user;
}

std::string KeyOf(const State& s, TaskRef r) {
  const Job& job = s.jobs[r.job];
  const Task& t = s.task(r);
  const TaskGroupSpec& spec = job.spec->groups[t.group];
  KeyMaterial m;
  m.Field(ScopeOf(s, job.spec->user));
  const std::vector<std::string> argv =
      ExpandCommand(spec.command, spec.IndexAt(r.index - job.groups[t.group].first));
  m.Count(argv.size());
  for (const std::string& arg : argv) m.Field(arg);
  m.Count(spec.env.size());
  for (const auto& [name, value] : spec.env) {
    m.Field(name);
    m.Field(value);
  }
  for (const std::vector<OutputFile>* files : {&spec.input_files, &spec.code}) {
    m.Count(files->size());
    for (const OutputFile& f : *files) {
      m.Field(f.name);
      m.Field(f.sha256);
    }
  }
  uint32_t after = 0;  // --after producers by their place in the job's list, not their ids
  ForEachInput(s, r, [&](TaskId from, const TaskOutcome& o, const std::string* group) {
    std::vector<OutputFile> files = group ? SelectOutputs(spec, *group, o.outputs) : o.outputs;
    if (o.result.empty() && files.empty()) return;  // as the assignment leaves it out
    if (group) {
      const uint32_t g = job.tasks[from.index].group;
      m.Field(*group);
      m.Count(from.index - job.groups[g].first);
    } else {
      m.Field("after");
      m.Count(after++);
    }
    m.Field(o.result);
    m.Count(files.size());
    for (const OutputFile& f : files) {
      m.Field(f.name);
      m.Count(f.size);
      m.Field(f.sha256);
    }
  });
  return s.config.result_cache.digest(m.bytes());
}

// The task behind an entry, when it can be reused now (result_cache.h).
const Task* Usable(const State& s, TaskId id, TaskRef* ref, const TaskOutcome** outcome) {
  auto slot = s.job_slots.find(id.job);
  if (slot == s.job_slots.end()) return nullptr;
  const Job& job = s.jobs[slot->second];
  if (id.index >= job.tasks.size()) return nullptr;
  *ref = TaskRef{slot->second, id.index};
  const Task& t = s.task(*ref);
  if (t.state != TaskState::kSucceeded) return nullptr;
  *outcome = nullptr;
  if (auto e = s.extras.find(ExtraKey(*ref)); e != s.extras.end() && e->second.outcome) {
    *outcome = &*e->second.outcome;
  }
  if (*outcome != nullptr && !(*outcome)->outputs.empty()) {
    // Its files are held by a worker that is here.
    bool held = false;
    std::vector<WorkerId> holders = (*outcome)->replicas;
    holders.push_back((*outcome)->outputs_on);
    for (WorkerId h : holders) {
      auto w = s.worker_slots.find(h);
      held = held || (w != s.worker_slots.end() && !s.workers[w->second].lost);
    }
    if (!held) return nullptr;
    // And not yet released: a job that ended keeps them keep_outputs.
    uint64_t terminal = 0;
    for (TaskState st : {TaskState::kSucceeded, TaskState::kFailed, TaskState::kCanceled}) {
      terminal += job.counts[static_cast<int>(st)];
    }
    if (terminal == job.tasks.size() &&
        job.changed_us + s.config.result_cache.keep_outputs.count() <= s.now_us) {
      return nullptr;
    }
  }
  return &t;
}

using EntryIt = std::unordered_map<std::string, ResultCache::Entry>::iterator;

EntryIt EraseEntry(State& s, EntryIt entry) {
  if (auto slot = s.job_slots.find(entry->second.task.job); slot != s.job_slots.end()) {
    --s.jobs[slot->second].cache_entries;
  }
  s.result_cache.bytes -= entry->second.bytes;
  return s.result_cache.entries.erase(entry);
}

// Past max_bytes: the oldest entries go, down to 90% of it.
void Trim(State& s) {
  const uint64_t max = s.config.result_cache.max_bytes;
  if (max == 0 || s.result_cache.bytes <= max) return;
  std::vector<std::pair<int64_t, std::string>> by_age;
  by_age.reserve(s.result_cache.entries.size());
  for (const auto& [key, entry] : s.result_cache.entries) by_age.emplace_back(entry.at_us, key);
  std::sort(by_age.begin(), by_age.end());
  for (const auto& [at, key] : by_age) {
    if (s.result_cache.bytes <= max - max / 10) break;
    EraseEntry(s, s.result_cache.entries.find(key));
  }
}

// Adds entry `key` -> the task `r`, unless the key has one.
void AddEntry(State& s, const std::string& key, TaskRef r) {
  ResultCache::Entry entry{s.IdOf(r), 0, s.task(r).finished_us};
  if (auto e = s.extras.find(ExtraKey(r)); e != s.extras.end() && e->second.outcome) {
    for (const OutputFile& f : e->second.outcome->outputs) entry.bytes += f.size;
  }
  if (!s.result_cache.entries.try_emplace(key, entry).second) return;
  ++s.jobs[r.job].cache_entries;
  s.result_cache.bytes += entry.bytes;
  Trim(s);
}

}  // namespace

bool TryResultCache(State& s, TaskRef r) {
  const Job& job = s.jobs[r.job];
  Task& t = s.task(r);
  if (!job.spec->groups[t.group].cache || !s.config.result_cache.digest || t.attempt != 0) {
    return false;
  }
  Extra& extra = s.extras[ExtraKey(r)];
  extra.cache_key = KeyOf(s, r);
  auto entry = s.result_cache.entries.find(extra.cache_key);
  if (entry == s.result_cache.entries.end()) return false;
  TaskRef from;
  const TaskOutcome* ran = nullptr;
  const Task* source = Usable(s, entry->second.task, &from, &ran);
  if (source == nullptr) {
    EraseEntry(s, entry);  // this task runs, and its success takes the key
    return false;
  }
  TaskOutcome o;
  if (ran != nullptr) {
    o.result = ran->result;
    o.outputs = ran->outputs;
    o.outputs_on = ran->outputs_on;
    o.replicas = ran->replicas;
  }
  o.cached_from = entry->second.task;
  o.cached_ended = TimeFromMicros(source->finished_us);
  o.cached_ran = Micros(source->finished_us - source->started_us);
  const TaskId id = s.IdOf(r);
  s.out->push_back(Persist{OutcomeRecord{id, t.attempt, o, TimeFromMicros(s.now_us)}});
  extra.outcome = std::move(o);
  extra.outcome_attempt = t.attempt;
  ++s.result_cache.hits;
  ++s.jobs[r.job].cached;
  s.jobs[r.job].changed_us = s.now_us;
  t.finished_us = s.now_us;
  Transition(s, r, TaskState::kSucceeded);
  return true;
}

void NoteCacheable(State& s, TaskRef r) {
  auto e = s.extras.find(ExtraKey(r));
  if (e == s.extras.end() || e->second.cache_key.empty()) return;
  AddEntry(s, e->second.cache_key, r);
}

void DropCorruptSource(State& s, TaskId source, WorkerId holder) {
  Result<TaskRef> r = s.Find(source);
  if (!r.ok()) return;
  auto e = s.extras.find(ExtraKey(*r));
  if (e == s.extras.end() || !e->second.outcome || e->second.cache_key.empty()) return;
  const TaskOutcome& o = *e->second.outcome;
  const std::vector<WorkerId> holders = HoldersOf(o);
  if (std::find(holders.begin(), holders.end(), holder) == holders.end()) return;
  if (holders.size() > 1) {
    DropHolder(s, *r, holder);
    return;
  }
  auto entry = s.result_cache.entries.find(e->second.cache_key);
  if (entry != s.result_cache.entries.end() && entry->second.task == source) EraseEntry(s, entry);
}

Status OnForgetCacheEntries(State& s, const ForgetCacheEntries& e) {
  if (e.task.job == 0 && e.job == 0 && !e.all) {
    return InvalidArgument("forget which cache entries: a task, a job, or all");
  }
  for (auto it = s.result_cache.entries.begin(); it != s.result_cache.entries.end();) {
    const TaskId id = it->second.task;
    auto slot = s.job_slots.find(id.job);
    bool match = e.task.job != 0 ? id == e.task : e.job != 0 ? id.job == e.job : true;
    if (match && e.task.job == 0 && e.job == 0 && !e.user.empty()) {
      match = slot != s.job_slots.end() && s.jobs[slot->second].spec->user == e.user;
    }
    if (!match) {
      ++it;
      continue;
    }
    if (slot != s.job_slots.end()) {
      // Marked in its outcome, journaled: a restore does not make it an
      // entry again.
      const TaskRef r{slot->second, id.index};
      Extra& extra = s.extras[ExtraKey(r)];
      if (!extra.outcome) {
        extra.outcome.emplace();
        extra.outcome_attempt = s.task(r).attempt;
      }
      extra.outcome->uncached = true;
      s.out->push_back(Persist{OutcomeRecord{id, extra.outcome_attempt, *extra.outcome,
                                             TimeFromMicros(s.task(r).finished_us)}});
    }
    it = EraseEntry(s, it);
  }
  return Status::Ok();
}

void ForgetCached(State& s, uint32_t slot) {
  if (s.jobs[slot].cache_entries == 0) return;
  s.jobs[slot].cache_entries = 0;
  const JobId id = s.jobs[slot].id;
  std::erase_if(s.result_cache.entries, [&](const auto& e) {
    if (e.second.task.job != id) return false;
    s.result_cache.bytes -= e.second.bytes;
    return true;
  });
}

void RestoreResultCache(State& s) {
  for (uint32_t j = 0; j < s.jobs.size(); ++j) {
    Job& job = s.jobs[j];
    if (job.forgotten) continue;
    for (uint32_t g = 0; g < job.groups.size(); ++g) {
      if (!job.spec->groups[g].cache) continue;
      for (uint32_t i = job.groups[g].first; i < job.groups[g].first + job.groups[g].count; ++i) {
        const TaskRef r{j, i};
        const Task& t = s.task(r);
        if (t.state != TaskState::kSucceeded) continue;
        if (t.attempt == 0) {  // a hit: it did not run
          auto e = s.extras.find(ExtraKey(r));
          if (e != s.extras.end() && e->second.outcome && e->second.outcome->cached_from.job != 0) {
            ++job.cached;
          }
          continue;
        }
        if (!s.config.result_cache.digest) continue;
        if (auto e = s.extras.find(ExtraKey(r));
            e != s.extras.end() && e->second.outcome && e->second.outcome->uncached) {
          continue;  // forgotten by a person
        }
        Extra& extra = s.extras[ExtraKey(r)];
        extra.cache_key = KeyOf(s, r);
        AddEntry(s, extra.cache_key, r);
      }
    }
  }
}

}  // namespace drover::core
