// Trace: a workload to replay, read from a JSON Lines file (docs/sim.md).
//
// One line per task: when it is submitted, how long it runs, what it asks
// for, whom it belongs to and which earlier tasks it waits for:
//
//   {"id":"prep","submit":0,"duration":"5m","cpus":2,"mem":"4GiB"}
//   {"id":"train","submit":0,"duration":3600,"gpus":0.5,"gpu_mem":"20GiB","deps":["prep"]}
//
// "output" (bytes, "2GiB") is the size of the files a task leaves for its
// dependents, which read them from wherever it ran.
//
// "key" (a string) makes the task cached (core/result_cache.h): a task
// whose key and user an earlier task's were, with the same inputs, is
// reused without running once that one succeeded; a task's output is the
// same bytes whenever its key is. Resubmitted work is written so.
//
// Lines are in submission order (submit never decreases) and dependencies
// name tasks on earlier lines, so a trace can be read and replayed in one
// pass. A line with "owner" instead says when a lent workstation's owner is
// at it (idle-desktop mode); such lines may stand anywhere:
//
//   {"owner":"gpu-2","from":"9h","to":"17h"}
// Requests and users are interned: a task is a few dozen bytes, so a
// trace of a million tasks fits comfortably in memory.
//
// Thread safety: plain values; the parse functions are pure.
#ifndef DROVER_SIM_TRACE_H_
#define DROVER_SIM_TRACE_H_

#include <cstdint>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "core/resources.h"

namespace drover::sim {

struct TraceTask {
  Duration submit = Duration::zero();    // since the start of the trace
  Duration duration = Duration::zero();  // how long it runs once started
  Duration limit = Duration::zero();     // declared time limit (>= duration); 0: none
  uint32_t request = 0;                  // index into Trace::requests
  uint32_t user = 0;                     // index into Trace::users
  int32_t priority = 0;                  // higher runs first
  uint32_t deps_begin = 0;               // its dependencies are
  uint32_t deps_count = 0;               // Trace::deps[begin, begin + count)
  // Bytes of the output files it leaves; its dependents read them all, and
  // what they read from another worker moves over the network (data
  // locality, SimResult::moved_bytes). 0: none.
  uint64_t output_bytes = 0;
  uint32_t key = kNoKey;  // index into Trace::keys; kNoKey: not cached
  static constexpr uint32_t kNoKey = UINT32_MAX;
};

// The owner of worker `worker` is present over [from, to): the worker takes
// no new work, and what runs there is suspended, then vacated (docs/sim.md,
// "Owner presence").
struct OwnerPresence {
  std::string worker;                // a worker name of the cluster
  Duration from = Duration::zero();  // since the start of the trace
  Duration to = Duration::zero();    // > from
  size_t line = 0;                   // where it was written (the first, if merged)
};

struct Trace {
  std::string name;                             // as given to ParseTrace, for errors
  std::vector<TraceTask> tasks;                 // in file order
  std::vector<std::string> ids;                 // per task, as written (or "line N")
  std::vector<uint32_t> deps;                   // indices of earlier tasks
  std::vector<core::ResourceRequest> requests;  // distinct requests
  std::vector<std::string> users;               // distinct users
  std::vector<std::string> keys;                // distinct cache keys
  // Per worker, overlapping or touching intervals merged into one; sorted
  // by `from`, then by worker name. Workers are checked against the
  // cluster when simulating.
  std::vector<OwnerPresence> owners;

  const core::ResourceRequest& RequestOf(const TraceTask& t) const { return requests[t.request]; }
};

// Reads a whole trace. `name` prefixes errors, which name the line and the
// field: "week.jsonl:12: gpus: GPU quantity \"1.5\" ...". Errors
// (kInvalidArgument): invalid JSON, unknown or mistyped field, bad quantity,
// submit going backwards, duplicate id, dependency on an unknown or later
// task, an empty trace; for an owner line, a missing or mistyped field, or
// `to` not after `from`.
Result<Trace> ParseTrace(std::istream& in, std::string_view name);
// Opens `path` and parses it; kNotFound when it cannot be opened.
Result<Trace> LoadTrace(const std::string& path);

}  // namespace drover::sim

#endif  // DROVER_SIM_TRACE_H_
