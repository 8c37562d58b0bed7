#include "cli/views.h"

#include <cinttypes>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/table.h"
#include "common/quantity.h"

namespace drover::cli {

namespace {

using nlohmann::json;

constexpr const char* kStates[] = {"waiting",   "queued", "assigned", "running",
                                   "succeeded", "failed", "canceled"};

std::string Str(const json& j, const char* key) {
  if (!j.is_object()) return "-";
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "-";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number_integer() || it->is_number_unsigned() || it->is_boolean()) return it->dump();
  if (it->is_number_float()) return it->dump();
  return "-";
}

// An integer field, or `fallback` when it is missing / not a number.
int64_t Int(const json& j, const char* key, int64_t fallback = -1) {
  if (!j.is_object()) return fallback;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return fallback;
  return it->get<int64_t>();
}

bool Bool(const json& j, const char* key) {
  if (!j.is_object()) return false;
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

const json& Array(const json& j, const char* key) {
  static const json kEmpty = json::array();
  if (!j.is_object()) return kEmpty;
  auto it = j.find(key);
  return it != j.end() && it->is_array() ? *it : kEmpty;
}

// "2024-05-01T12:00:00.250Z" -> "2024-05-01 12:00:00Z" for tables.
std::string ShortTime(const json& j, const char* key) {
  std::string t = Str(j, key);
  if (t.size() >= 19 && t[10] == 'T') return t.substr(0, 10) + " " + t.substr(11, 8) + "Z";
  return t;
}

// Wall time of the latest attempt: finished - started, or now - started.
std::string TaskTime(const json& task, int64_t now_ms) {
  const int64_t started = Int(task, "started_at_ms");
  if (started < 0) return "-";
  int64_t finished = Int(task, "finished_at_ms");
  if (finished < started) finished = now_ms;
  return FormatSpan(finished - started);
}

std::string CoreList(const json& cores) {
  if (!cores.is_array() || cores.empty()) return "-";
  std::string out;
  for (const json& c : cores) {
    if (!out.empty()) out += ",";
    out += c.dump();
  }
  return out;
}

// "waits on its worker behind 7.0" for a task assigned behind another
// (queue-ahead, the API's "after"); empty otherwise.
std::string QueuedBehind(const json& task) {
  const std::string after = Str(task, "after");
  return after.empty() || after == "-" ? "" : "waits on its worker behind " + after;
}

}  // namespace

std::string FormatSpan(int64_t ms) {
  if (ms < 0) return "-";
  char buf[32];
  if (ms < 60'000) {
    std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(ms) / 1000.0);
  } else if (ms < 3'600'000) {
    std::snprintf(buf, sizeof buf, "%" PRId64 "m%02" PRId64 "s", ms / 60'000, ms / 1000 % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%" PRId64 "h%02" PRId64 "m", ms / 3'600'000,
                  ms / 60'000 % 60);
  }
  return buf;
}

std::string CountsSummary(const json& counts) {
  std::string out;
  for (const char* state : kStates) {
    const int64_t n = Int(counts, state, 0);
    if (n <= 0) continue;
    if (!out.empty()) out += ", ";
    out += std::to_string(n) + " " + state;
  }
  return out.empty() ? "-" : out;
}

std::string JobsView(const json& list) {
  Table table({"ID", "NAME", "USER", "TASKS", "STATE", "SUBMITTED"});
  for (const json& job : Array(list, "jobs")) {
    table.AddRow({Str(job, "id"), Str(job, "name"), Str(job, "user"), Str(job, "task_count"),
                  (Bool(job, "done") ? "done: " : "") + CountsSummary(job.value("counts", json())),
                  ShortTime(job, "submitted_at")});
  }
  if (table.rows() == 0) return "no jobs\n";
  return table.Render();
}

std::string TaskTable(const json& tasks, int64_t now_ms) {
  Table table({"TASK", "GROUP", "INDEX", "STATE", "ATTEMPT", "WORKER", "TIME", "REASON"});
  for (const json& t : tasks.is_array() ? tasks : json::array()) {
    std::string reason = Str(t, "reason");
    if (reason.empty()) reason = QueuedBehind(t);
    if (reason.empty()) reason = "-";
    table.AddRow({Str(t, "id"), Str(t, "group"), Str(t, "array_index"), Str(t, "state"),
                  Str(t, "attempt"), Str(t, "worker"), TaskTime(t, now_ms), reason});
  }
  return table.Render();
}

std::string JobView(const json& job, int64_t now_ms) {
  const std::string user = Str(job, "user");
  const std::string who = user.empty() || user == "-" ? "" : " (" + user + ")";
  std::string out =
      "job " + Str(job, "id") + " \"" + Str(job, "name") + "\"" + who + ", " +
      Str(job, "task_count") + " tasks: " + (Bool(job, "done") ? "done, " : "") +
      CountsSummary(job.value("counts", json())) +
      (Int(job, "cached", 0) > 0 ? " (" + Str(job, "cached") + " from the cache, without running)"
                                 : "") +
      "\n";
  out += "submitted " + ShortTime(job, "submitted_at") + "\n\n";
  const json& tasks = Array(job, "tasks");
  out += TaskTable(tasks, now_ms);
  const int64_t count = Int(job, "task_count", 0);
  const int64_t offset = Int(job, "offset", 0);
  if (offset + static_cast<int64_t>(tasks.size()) < count) {
    out += "(tasks " + std::to_string(offset) + ".." +
           std::to_string(offset + static_cast<int64_t>(tasks.size())) + " of " +
           std::to_string(count) + "; see --offset/--limit)\n";
  }
  return out;
}

// "network none (loopback only); directory at most 20 GiB; disk writes 10
// MiB/s, weight 200": what the task asked
// for beyond its resources (nothing: "").
std::string IsolationText(const json& task) {
  std::vector<std::string> parts;
  if (Str(task, "network") == "none") parts.push_back("network none (loopback only)");
  if (const int64_t disk = Int(task, "disk", 0); disk > 0) {
    parts.push_back("directory at most " + FormatBytes(static_cast<uint64_t>(disk)));
  }
  const json& io = task.value("io", json());
  if (io.is_object()) {
    std::string disk;
    auto add = [&](const std::string& what) { disk += (disk.empty() ? "disk " : ", ") + what; };
    if (const int64_t r = Int(io, "read_bps", 0); r > 0) {
      add("reads " + FormatBytes(static_cast<uint64_t>(r)) + "/s");
    }
    if (const int64_t w = Int(io, "write_bps", 0); w > 0) {
      add("writes " + FormatBytes(static_cast<uint64_t>(w)) + "/s");
    }
    if (const int64_t weight = Int(io, "weight", 0); weight > 0) {
      add("weight " + std::to_string(weight));
    }
    if (!disk.empty()) parts.push_back(disk);
  }
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

namespace {

// A Python function call's result (python/drover/_call.py) is a pickle in
// base64, for the client that made the call: said in words instead.
std::string CallResultText(const std::string& result, const std::string& id) {
  static constexpr std::string_view kValue = "drover-call:v1:value:";
  static constexpr std::string_view kError = "drover-call:v1:error:";
  if (result.starts_with(kValue)) {
    return "a Python value, pickled (" + std::to_string(result.size() - kValue.size()) +
           " bytes of base64), for the Python client that made the call";
  }
  if (result.starts_with(kError)) {
    return "a Python exception, pickled, for the Python client that made the call; its "
           "traceback: drover logs --stderr " +
           id;
  }
  if (result == "drover-call:v1:file") {
    return "a Python value, pickled, in its output drover-value.pkl (drover get " + id + ")";
  }
  return result;
}

}  // namespace

std::string TaskView(const json& task, int64_t now_ms) {
  Table table({"FIELD", "VALUE"});
  auto row = [&](const char* name, std::string value) {
    if (value.empty()) value = "-";
    table.AddRow({name, std::move(value)});
  };
  row("task", Str(task, "id"));
  row("group", Str(task, "group") + " (index " + Str(task, "array_index") + ")");
  row("state", Str(task, "state"));
  const json& from = task.value("outcome", json());
  if (from.is_object() && from.contains("cached_from")) {
    // Reused from the result cache: it did not run.
    row("cached", "same inputs as " + Str(from, "cached_from") + " (" +
                      ShortTime(from, "cached_ended") + ", ran " +
                      FormatSpan(Int(from, "cached_ran_ms", 0)) + ")");
  }
  row("reason", Str(task, "reason").empty() ? QueuedBehind(task) : Str(task, "reason"));
  row("attempt", Str(task, "attempt"));
  row("worker", Str(task, "worker"));
  row("submitted", ShortTime(task, "submitted_at"));
  row("started", ShortTime(task, "started_at"));
  row("finished", ShortTime(task, "finished_at"));
  if (Int(task, "retry_at_ms") >= 0) row("retry at", ShortTime(task, "retry_at"));
  row("time", TaskTime(task, now_ms));
  row("cores", CoreList(task.value("cores", json())));
  std::string gpus;
  for (const json& g : Array(task, "gpus")) {
    if (!gpus.empty()) gpus += ", ";
    gpus += Str(g, "index") + " (" + FormatGpus(Int(g, "share", 100)) + ")";
  }
  row("gpus", gpus);
  if (std::string isolation = IsolationText(task); !isolation.empty()) row("isolation", isolation);
  if (const std::string image = Str(task, "image"); image != "-" && !image.empty()) {
    // With the digest of what the latest attempt ran, once one ran.
    const json& ran = task.value("outcome", json());
    const std::string digest = ran.is_object() ? Str(ran, "image_digest") : "-";
    row("image", image + (digest == "-" || digest.empty() ? "" : " (" + digest + ")"));
  }
  const json outcome = task.value("outcome", json());
  if (outcome.is_object()) {
    const int64_t signal = Int(outcome, "signal", 0);
    row("exit", signal != 0 ? "signal " + std::to_string(signal)
                            : "code " + Str(outcome, "exit_code"));
    if (Bool(outcome, "oom_killed")) row("oom", "killed by the OOM killer");
    row("cpu time", FormatSpan(Int(outcome, "cpu_ms")));
    const int64_t peak = Int(outcome, "peak_mem_bytes");
    row("peak mem", peak >= 0 ? FormatBytes(static_cast<uint64_t>(peak)) : "-");
    const int64_t read = Int(outcome, "io_read_bytes");
    const int64_t written = Int(outcome, "io_write_bytes");
    if (read >= 0 || written >= 0) {
      row("disk io", "read " + (read >= 0 ? FormatBytes(static_cast<uint64_t>(read)) : "-") +
                         ", written " +
                         (written >= 0 ? FormatBytes(static_cast<uint64_t>(written)) : "-"));
    }
  }
  std::string out = table.Render();
  // Another user's task: the server left out what only its job's readers see.
  if (Bool(task, "contents_hidden")) {
    out += "\ncontents: private (a job's logs, result and files are for its user, admins and "
           "viewers)\n";
  }
  if (outcome.is_object()) {
    std::string result = CallResultText(Str(outcome, "result"), Str(task, "id"));
    if (result != "-" && !result.empty()) {
      if (result.back() != '\n') result += '\n';
      out += "\nresult:\n" + result;
    }
    // Its outputs ($DROVER_OUTPUT_DIR), which dependents get as inputs and
    // `drover get` downloads.
    const json& outputs = Array(outcome, "outputs");
    if (!outputs.empty()) {
      Table files({"OUTPUT", "SIZE", "SHA-256"});
      for (const json& f : outputs) {
        const int64_t size = Int(f, "size");
        files.AddRow({Str(f, "name"), size >= 0 ? FormatBytes(static_cast<uint64_t>(size)) : "-",
                      Str(f, "sha256").substr(0, 16) + "..."});
      }
      std::string where = "on worker " + Str(outcome, "outputs_on");
      const json& copies = Array(outcome, "replicas");
      for (size_t i = 0; i < copies.size(); ++i) {
        where += (i == 0 ? ", copies on " : ", ") + copies[i].dump();
      }
      out += "\noutputs (" + where + "):\n" + files.Render();
    }
  }
  // The latest saved $DROVER_CHECKPOINT_DIR, which the next attempt starts
  // from wherever it runs.
  const json checkpoint = task.value("checkpoint", json());
  if (checkpoint.is_object()) {
    Table files({"CHECKPOINT FILE", "SIZE", "SHA-256"});
    for (const json& f : Array(checkpoint, "files")) {
      const int64_t size = Int(f, "size");
      files.AddRow({Str(f, "name"), size >= 0 ? FormatBytes(static_cast<uint64_t>(size)) : "-",
                    Str(f, "sha256").substr(0, 16) + "..."});
    }
    out += "\ncheckpoint (attempt " + Str(checkpoint, "attempt") + " on worker " +
           Str(checkpoint, "worker") + ", saved " + ShortTime(checkpoint, "saved_at") + "):\n" +
           files.Render();
  }
  // Every attempt, when there was more than one (the one attempt is above).
  const json& attempts = Array(task, "attempts");
  if (attempts.size() > 1) {
    Table history({"ATTEMPT", "WORKER", "STARTED", "FINISHED", "ENDED AS", "EXIT", "REASON"});
    for (const json& a : attempts) {
      const json o = a.value("outcome", json());
      std::string exit = "-";
      if (o.is_object()) {
        const int64_t signal = Int(o, "signal", 0);
        exit = signal != 0 ? "signal " + std::to_string(signal) : Str(o, "exit_code");
      }
      std::string reason = Str(a, "reason");
      if (reason.empty()) reason = "-";
      history.AddRow({Str(a, "attempt"), Str(a, "worker"), ShortTime(a, "started_at"),
                      ShortTime(a, "finished_at"), Str(a, "state"), exit, reason});
    }
    out += "\nattempts:\n" + history.Render();
  }
  std::string explain = Str(task, "explain");
  if (explain != "-" && !explain.empty()) {
    if (explain.back() != '\n') explain += '\n';
    out += "\nexplain:\n" + explain;
  }
  return out;
}

std::string WorkersView(const json& list) {
  Table table({"ID", "NAME", "STATE", "CORES", "MEM", "DISK FREE", "GPUS", "TASKS", "CPU%"});
  for (const json& w : Array(list, "workers")) {
    const std::string unhealthy = Str(w, "unhealthy");
    const bool sick = unhealthy != "-" && !unhealthy.empty();
    const std::string quarantine = Str(w, "quarantined");
    const bool held = quarantine != "-" && !quarantine.empty();
    std::string state = Bool(w, "lost")       ? "lost"
                        : Bool(w, "drained")  ? "drained"
                        : Bool(w, "paused")   ? "paused"
                        : sick                ? "unhealthy"
                        : held                ? "quarantined"
                        : Bool(w, "refusing") ? "refusing"
                                              : "ready";
    // Its own health checks fail: why, since when.
    if (sick) state += " (" + unhealthy + ", since " + ShortTime(w, "unhealthy_since") + ")";
    // A black hole: until when, and the evidence.
    if (held) state += " (until " + ShortTime(w, "quarantined_until") + ": " + quarantine + ")";
    // A workstation in idle-desktop mode says where its owner is.
    if (std::string note = Str(w, "note"); note != "-" && !note.empty()) {
      state += " (" + note + ", since " + ShortTime(w, "note_since") + ")";
    }
    // A worker that came back with another offer than before is flagged:
    // its size changed under running work (or someone claims its name).
    if (Int(w, "offer_changes") > 0) {
      state += " (offer changed " + ShortTime(w, "offer_changed_at") + ")";
    }
    // It leaves then (an allocation's end): it takes only tasks that end by then.
    if (Int(w, "ends_at_ms") >= 0) state += " (leaves " + ShortTime(w, "ends_at") + ")";
    const json& cores = Array(w, "cpu_cores");
    const json& free_cores = Array(w, "free_cores");
    const int64_t mem = Int(w, "mem_bytes");
    const int64_t free_mem = Int(w, "free_mem_bytes");
    std::string mem_text = mem >= 0 && free_mem >= 0
                               ? FormatBytes(static_cast<uint64_t>(free_mem)) + " free of " +
                                     FormatBytes(static_cast<uint64_t>(mem))
                               : "-";
    std::string gpus;
    for (const json& g : Array(w, "gpus")) {
      if (!gpus.empty()) gpus += ", ";
      gpus += Str(g, "index") + ":" + Str(g, "model");
      // Out of the offer: its worker found it sick.
      if (std::string sick = Str(g, "sick"); sick != "-" && !sick.empty()) {
        gpus += " (sick: " + sick + ")";
      }
    }
    const json util = w.value("utilization", json());
    // Its work directory's free space, as its last heartbeat said (what a
    // task's `disk` is placed against).
    const int64_t disk = Int(w, "disk_free_bytes");
    table.AddRow({Str(w, "id"), Str(w, "name"), state,
                  std::to_string(free_cores.size()) + "/" + std::to_string(cores.size()) + " free",
                  mem_text, disk >= 0 ? FormatBytes(static_cast<uint64_t>(disk)) : "-",
                  gpus.empty() ? "-" : gpus, std::to_string(Array(w, "tasks").size()),
                  Str(util, "cpu_percent")});
  }
  if (table.rows() == 0) return "no workers\n";
  return table.Render();
}

}  // namespace drover::cli
