// The job model: jobs, their task groups, task states and outcomes.
//
// A job is what one job file or one `drover submit` describes (DESIGN.md
// section 8). It holds task groups: each group is one `[[task]]` entry, and
// an array group ("0-7") expands into one task per index. Tasks are numbered
// JOB.INDEX in submission order after expansion: groups in the order given,
// members of an array in index order. All members of a group share its spec
// (command, env, resources), so a queued array task costs a few dozen bytes.
//
// Thread safety: plain values.
#ifndef DROVER_CORE_MODEL_H_
#define DROVER_CORE_MODEL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "common/time.h"
#include "core/resources.h"

namespace drover::core {

// DESIGN.md section 3. Values are stable: they are journaled.
enum class TaskState : uint8_t {
  kWaiting = 0,    // dependencies not met yet
  kQueued = 1,     // ready; waiting for resources (or for its retry backoff)
  kAssigned = 2,   // resources chosen and leases claimed / sent to a worker
  kRunning = 3,    // the worker started the process
  kSucceeded = 4,
  kFailed = 5,
  kCanceled = 6,
};
inline constexpr int kTaskStateCount = 7;

// "waiting", "queued", "assigned", "running", "succeeded", "failed", "canceled".
std::string_view TaskStateName(TaskState state);
// True for succeeded, failed and canceled.
inline bool IsTerminal(TaskState s) { return s >= TaskState::kSucceeded; }

// An array range: indices first, first+step, ... (count of them).
struct ArrayRange {
  int64_t first = 0;
  uint32_t count = 1;
  int64_t step = 1;
  friend bool operator==(const ArrayRange&, const ArrayRange&) = default;
  int64_t IndexAt(uint32_t i) const { return first + static_cast<int64_t>(i) * step; }
};
// Parses "0-7" (8 indices), "5" (one), "0-99:2" (step 2). Errors name the text.
Result<ArrayRange> ParseArrayRange(std::string_view text);

// SIGTERM on Linux; the core does not include <csignal>.
inline constexpr int32_t kDefaultVacateSignal = 15;

// One file a task left in $DROVER_OUTPUT_DIR when it succeeded (its
// outputs; docs/design.md "Data plane"). `name` is the path relative to
// that directory, '/'-separated, never absolute and without "..".
struct OutputFile {
  std::string name;
  uint64_t size = 0;
  std::string sha256;  // 64 lower-case hex digits
  friend bool operator==(const OutputFile&, const OutputFile&) = default;
};
// At most this many outputs per task (a worker refuses more).
inline constexpr size_t kMaxOutputFiles = 10000;
// Why `name` cannot name an output (empty: it can): it must be a relative
// '/'-separated path of at most 1,024 bytes, without empty, "." or ".."
// parts and without control characters, so that it stays inside whatever
// directory a worker puts it in.
std::string OutputNameProblem(std::string_view name);
// True for 64 lower-case hex digits.
bool IsSha256Hex(std::string_view text);

// Disk I/O limits of each attempt, on the block device that holds its
// directory (`io_read_bps`, `io_write_bps`, `io_weight`); 0: none.
struct IoLimits {
  uint64_t read_bps = 0;   // bytes per second
  uint64_t write_bps = 0;  // bytes per second
  // Its share of the device against other tasks' (cgroup v2 io.weight,
  // 1 to 10000, 100 for a task without one); 0: the default.
  uint32_t weight = 0;
  bool Any() const { return read_bps != 0 || write_bps != 0 || weight != 0; }
  friend bool operator==(const IoLimits&, const IoLimits&) = default;
};
inline constexpr uint32_t kMaxIoWeight = 10000;

// When a worker fetches a task's container image (`image_pull`): when its
// store lacks it (the default), before every attempt, or never (only what
// is there: an offline network).
enum class ImagePull : uint8_t { kMissing, kAlways, kNever };
// "missing", "always", "never"; ParseImagePull reads them back (nullopt:
// another word).
const char* ImagePullName(ImagePull pull);
std::optional<ImagePull> ParseImagePull(std::string_view name);
// What is wrong with an image reference, for a person; empty: nothing. A
// reference is at most 255 characters of letters, digits and . _ - / : @
// ("registry.example:5000/team/image:tag", "name@sha256:..."), starting
// with a letter or digit: it is passed to the container runtime as one
// argument, and never as an option.
std::string ImageNameProblem(std::string_view image);

// One `[[task]]` of a job file.
// The most copies of a task's outputs (TaskGroupSpec::replicas).
inline constexpr uint32_t kMaxReplicas = 4;

struct TaskGroupSpec {
  std::string name;                        // the group's `id` ("train"); unique in its job
  std::vector<std::string> command;        // argv; "{index}" is replaced by the array index
  std::map<std::string, std::string> env;  // extra environment
  ResourceRequest resources;
  int32_t priority = 0;                    // higher runs first
  uint32_t retries = 0;                    // extra attempts after a failure
  Duration retry_backoff = Seconds(10);    // before the first retry; doubles each retry
  Duration timeout = Duration::zero();     // zero = none
  std::vector<std::string> depends_on;     // names of groups of the same job
  std::optional<ArrayRange> array;         // absent = a single task with index 0
  // Vacating an attempt (its workstation's owner came back, or a task of
  // higher priority preempts it): this signal first, so the program can
  // save a checkpoint, then KILL after vacate_grace. A vacated attempt goes
  // back to the queue without using a retry.
  int32_t vacate_signal = kDefaultVacateSignal;
  Duration vacate_grace = Seconds(30);
  // False: priority preemption never picks it (an owner's return still
  // vacates it: the machine is theirs).
  bool preemptible = true;
  // Which outputs of its dependencies it fetches into $DROVER_INPUTS
  // ("prep", "prep:train.csv", "prep:*.csv"; core/input_select.h). Absent:
  // every output; empty: none (results always go).
  std::optional<std::vector<std::string>> inputs;
  // The most its outputs may add up to, in bytes; over it the attempt
  // fails with a reason. 0: the server's default (`drover server
  // --max-output`). A worker's own --max-output, when lower, wins.
  uint64_t max_output_bytes = 0;
  // Files uploaded from the client (`drover submit --input`, job files'
  // `input_files`): each is placed, read-only, in the task's directory as
  // `name`, fetched from the server's file store by its SHA-256. A client
  // reading a job file holds a path in `name` and no sha256 until it has
  // uploaded the file (cli/upload_inputs.h); the server takes only
  // uploaded ones.
  std::vector<OutputFile> input_files;
  // Copies of its outputs to keep, on as many workers (1 to kMaxReplicas):
  // with 2, a second worker fetches them when the task succeeds, and
  // losing one worker loses no work (core/replicas.cc).
  uint32_t replicas = 1;
  // Its results reused by content (core/result_cache.h): a task whose key
  // (command, environment, inputs, `code`, user) matches an earlier
  // success whose outputs are still held succeeds at once without running.
  bool cache = false;
  // Files that are its code, for the key: each a path and its SHA-256,
  // hashed by the client at submit (a client reading a job file holds the
  // pattern in `name` and no sha256 until it has hashed the files it
  // matches, cli/code_files.h); the server takes only hashed ones.
  std::vector<OutputFile> code;
  // Disk I/O limits of each attempt (its network, which decides where it
  // may run, is resources.private_network).
  IoLimits io;
  // The OCI image each attempt runs in ("docker.io/library/python:3.12");
  // empty: on the worker's own system. Set together with
  // resources.container, which decides where it may run.
  std::string image;
  ImagePull image_pull = ImagePull::kMissing;

  friend bool operator==(const TaskGroupSpec&, const TaskGroupSpec&) = default;
  uint32_t TaskCount() const { return array ? array->count : 1; }
  int64_t IndexAt(uint32_t member) const { return array ? array->IndexAt(member) : 0; }
};

struct JobSpec {
  std::string name;
  std::string user;                    // quotas are per user
  std::vector<TaskGroupSpec> groups;   // at least one
  std::vector<JobId> after_jobs;       // `--after 12`: every task of job 12 must succeed
  std::vector<TaskId> after_tasks;     // `--after 12.3`: that task must succeed

  friend bool operator==(const JobSpec&, const JobSpec&) = default;
  // Total tasks after array expansion.
  uint64_t TaskCount() const;
};

// What a finished process used.
struct TaskUsage {
  Duration wall = Duration::zero();
  Duration cpu = Duration::zero();
  uint64_t peak_mem_bytes = 0;
  // Bytes its processes read from and wrote to block devices, as its
  // cgroup counted them (cgroup v2 io.stat; v1 only for a task with disk
  // I/O limits, which has a blkio cgroup of its own); absent: not counted.
  std::optional<uint64_t> io_read_bytes;
  std::optional<uint64_t> io_write_bytes;
  friend bool operator==(const TaskUsage&, const TaskUsage&) = default;
};

// The largest result string a task may leave; longer ones are truncated.
inline constexpr size_t kMaxResultBytes = 64 * 1024;

// How one attempt ended, as the worker reported it.
struct TaskOutcome {
  int32_t exit_code = 0;     // meaningful when signal == 0
  int32_t signal = 0;        // non-zero when killed by a signal
  bool oom_killed = false;
  TaskUsage usage;
  std::string result;        // <= kMaxResultBytes
  // The worker's own reason the attempt failed, whatever the exit code
  // ("stdout not saved: no space left on device (...)"); empty: the exit
  // code, signal and OOM flag decide.
  std::string reason;
  // A success's outputs, and the worker that holds them (set by the core
  // from the worker that reported the outcome; 0 = none).
  std::vector<OutputFile> outputs;
  WorkerId outputs_on = 0;
  // Further workers that hold copies of them (`replicas`; set by the core
  // as each reports its copy, OutputsReplicated).
  std::vector<WorkerId> replicas;
  // A success reused from the result cache (core/result_cache.h): the task
  // that ran, when it ended and how long it ran; none when this one ran.
  TaskId cached_from;
  Time cached_ended;
  Duration cached_ran = Duration::zero();
  // A person forgot this success from the result cache (ForgetCacheEntries):
  // it is no entry, after a restore too.
  bool uncached = false;
  // The digest of the image it ran in ("sha256:..."), as the worker's
  // store had it; empty: no image.
  std::string image_digest;
  friend bool operator==(const TaskOutcome&, const TaskOutcome&) = default;
};

// Replaces every "{index}" in `argv` with `index`. The shell calls this when
// it turns an Assign command into a message for the worker.
std::vector<std::string> ExpandCommand(const std::vector<std::string>& argv, int64_t index);

}  // namespace drover::core

#endif  // DROVER_CORE_MODEL_H_
