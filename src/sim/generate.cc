#include "sim/generate.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "sim/random.h"

namespace drover::sim {

namespace {

struct Shape {
  uint32_t weight;   // per cent of bursts
  const char* gpus;  // as written in the trace; "" = none
  int64_t gpu_hundredths;
  const char* gpu_mem;  // "" = none
  const char* mem;
};
constexpr Shape kShapes[] = {
    {15, "0.5", 50, "40GiB", "16GiB"}, {30, "1", 100, "", "32GiB"}, {15, "2", 200, "", "64GiB"},
    {10, "4", 400, "", "128GiB"},      {30, "", 0, "", ""},  // CPU only: cpus and mem drawn per
                                                             // task
};
constexpr int kCpuShape = 4;

constexpr double kMedianSeconds = 600;
constexpr double kSigma = 1.0;
constexpr int64_t kMinMs = 30 * 1000;
constexpr int64_t kMaxMs = 4 * 3600 * 1000;
constexpr double kPrepMedianSeconds = 60;
constexpr uint32_t kUsers = 8;
constexpr uint64_t kMaxTasks = 100'000'000;

struct Task {
  int shape = 0;
  int64_t cpus = 1;      // CPU-only tasks
  uint32_t mem_gib = 4;  // CPU-only tasks
  int64_t duration_ms = 0;
  uint32_t burst = 0;
  bool prep = false;        // the head of a pipeline burst
  bool after_prep = false;  // depends on its burst's prep task
  uint64_t key = 0;         // its cache key's number (GenerateOptions::resubmit)
};

struct Burst {
  uint32_t user = 0;
  int32_t priority = 0;
  int64_t submit_ms = 0;
  uint64_t first = 0;  // its tasks
  uint64_t size = 0;
};

int PickShape(Random& rng) {
  uint64_t x = rng.Below(100);
  for (int s = 0; s < 5; ++s) {
    if (x < kShapes[s].weight) return s;
    x -= kShapes[s].weight;
  }
  return kCpuShape;
}

int64_t DrawMs(Random& rng, double median_s) {
  const double ms = rng.LogNormal(std::log(median_s * 1000.0), kSigma);
  return std::clamp<int64_t>(std::llround(ms), kMinMs, kMaxMs);
}

void DrawCpuTask(Random& rng, Task& t) {
  static constexpr int64_t kCpus[] = {1, 2, 4};
  static constexpr uint32_t kMem[] = {4, 8};
  t.cpus = kCpus[rng.Below(3)];
  t.mem_gib = kMem[rng.Below(2)];
}

// The time limit a person would declare for a task of `ms`: the next
// round value at or above it (a limit is a promise the task ends by then).
int64_t LimitSeconds(int64_t ms) {
  static constexpr int64_t kLimits[] = {60,   120,  300,  600,  900,   1200, 1800,
                                        2700, 3600, 5400, 7200, 10800, 14400};
  for (int64_t s : kLimits) {
    if (s * 1000 >= ms) return s;
  }
  return (ms + 999) / 1000;
}

// "12.345" from milliseconds.
std::string Seconds(int64_t ms) {
  std::string frac = std::to_string(ms % 1000);
  return std::to_string(ms / 1000) + "." + std::string(3 - frac.size(), '0') + frac;
}

}  // namespace

Status WriteSyntheticTrace(const GenerateOptions& options, std::ostream& out) {
  if (options.tasks == 0 || options.tasks > kMaxTasks) {
    return InvalidArgument("tasks: must be between 1 and " + std::to_string(kMaxTasks));
  }
  if (options.gpus == 0) return InvalidArgument("gpus: the load needs a cluster with GPUs");
  if (!(options.load > 0 && options.load <= 100)) {
    return InvalidArgument("load: must be above 0 and at most 100");
  }
  if (!(options.resubmit >= 0 && options.resubmit <= 0.9)) {
    return InvalidArgument("resubmit: expected a share from 0 to 0.9");
  }
  if (options.owners > 10000) return InvalidArgument("owners: at most 10000");
  Random rng(options.seed);

  // First the work, burst by burst; then the arrival times, scaled to the load.
  std::vector<Task> tasks;
  std::vector<Burst> bursts;
  std::vector<double> gaps;
  tasks.reserve(options.tasks);
  double gpu_ms = 0;
  Random again(options.seed ^ 0x616761696e216167ull);  // "again!ag": resubmissions
  while (tasks.size() < options.tasks) {
    const uint32_t b = static_cast<uint32_t>(bursts.size());
    if (options.resubmit > 0 && b > 0 && again.Uniform() < options.resubmit) {
      // An earlier burst again, by its user, with one task changed (a new
      // key): the rest may be reused.
      const Burst src = bursts[again.Below(b)];
      Burst& burst = bursts.emplace_back();
      burst.user = src.user;
      burst.priority = src.priority;
      burst.first = tasks.size();
      burst.size = std::min<uint64_t>(src.size, options.tasks - tasks.size());
      gaps.push_back(rng.Exponential(1.0));
      const uint64_t changed = again.Below(burst.size);
      for (uint64_t k = 0; k < burst.size; ++k) {
        Task t = tasks[src.first + k];
        t.burst = b;
        if (k == changed) t.key = tasks.size();
        if (!t.prep) {
          gpu_ms += static_cast<double>(kShapes[t.shape].gpu_hundredths) / 100.0 *
                    static_cast<double>(t.duration_ms);
        }
        tasks.push_back(t);
      }
      continue;
    }
    Burst& burst = bursts.emplace_back();
    burst.first = tasks.size();
    burst.user = static_cast<uint32_t>(rng.Below(kUsers));
    burst.priority = rng.Below(10) == 0 ? 1 : 0;
    gaps.push_back(b == 0 ? 0.0 : rng.Exponential(1.0));
    uint64_t size = 1 + std::min<uint64_t>(63, static_cast<uint64_t>(rng.Exponential(5.0)));
    size = std::min<uint64_t>(size, options.tasks - tasks.size());
    const bool pipeline = size >= 3 && rng.Below(10) == 0;
    const bool uniform = rng.Below(4) != 0;
    const int burst_shape = PickShape(rng);
    burst.size = size;
    for (uint64_t k = 0; k < size; ++k) {
      Task& t = tasks.emplace_back();
      t.burst = b;
      t.key = tasks.size() - 1;
      if (pipeline && k == 0) {
        t.prep = true;
        t.shape = kCpuShape;
        DrawCpuTask(rng, t);
        t.duration_ms = DrawMs(rng, kPrepMedianSeconds);
        continue;
      }
      t.after_prep = pipeline;
      t.shape = uniform ? burst_shape : PickShape(rng);
      if (t.shape == kCpuShape) DrawCpuTask(rng, t);
      t.duration_ms = DrawMs(rng, kMedianSeconds);
      gpu_ms += static_cast<double>(kShapes[t.shape].gpu_hundredths) / 100.0 *
                static_cast<double>(t.duration_ms);
    }
  }
  double raw = 0;
  for (double g : gaps) raw += g;
  const double window_ms = gpu_ms / (options.gpus * options.load);
  const double scale = raw > 0 ? window_ms / raw : 0;
  double at = 0;
  for (size_t b = 0; b < bursts.size(); ++b) {
    at += gaps[b] * scale;
    bursts[b].submit_ms = std::llround(at);
  }

  Random sizes(options.seed ^ 0x6f75747075747321ull);  // "outputs!"
  std::string line;
  uint64_t prep_line = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const Task& t = tasks[i];
    const Burst& burst = bursts[t.burst];
    const Shape& shape = kShapes[t.shape];
    if (t.prep) prep_line = i;
    line = "{\"id\":\"t" + std::to_string(i) + "\",\"submit\":" + Seconds(burst.submit_ms) +
           ",\"duration\":" + Seconds(t.duration_ms);
    if (options.limits) line += ",\"limit\":" + std::to_string(LimitSeconds(t.duration_ms));
    if (t.shape == kCpuShape) {
      line += ",\"cpus\":" + std::to_string(t.cpus) + ",\"mem\":\"" + std::to_string(t.mem_gib) +
              "GiB\"";
    } else {
      line += ",\"cpus\":" + std::to_string(std::max<int64_t>(1, shape.gpu_hundredths / 50)) +
              ",\"mem\":\"" + shape.mem + "\",\"gpus\":" + shape.gpus;
      if (*shape.gpu_mem) line += ",\"gpu_mem\":\"" + std::string(shape.gpu_mem) + "\"";
    }
    line += ",\"user\":\"u" + std::to_string(burst.user + 1) + "\"";
    if (options.outputs && t.prep) {
      line += ",\"output\":\"" + std::to_string(1 + sizes.Below(16)) + "GiB\"";
    }
    if (burst.priority != 0) line += ",\"priority\":" + std::to_string(burst.priority);
    if (t.after_prep) line += ",\"deps\":[\"t" + std::to_string(prep_line) + "\"]";
    if (options.resubmit > 0) line += ",\"key\":\"k" + std::to_string(t.key) + "\"";
    line += "}\n";
    out << line;
  }
  // A working day per worker: the owner is at the desk 9h-17h.
  constexpr int64_t kDayS = 86400;
  const int64_t days = (bursts.back().submit_ms / 1000) / kDayS + 3;
  for (int64_t d = 0; d < days; ++d) {
    for (uint32_t w = 1; w <= options.owners; ++w) {
      out << "{\"owner\":\"gpu-" << w << "\",\"from\":" << d * kDayS + 9 * 3600
          << ",\"to\":" << d * kDayS + 17 * 3600 << "}\n";
    }
  }
  out.flush();
  if (!out) return DataLoss("could not write the trace");
  return Status::Ok();
}

}  // namespace drover::sim
