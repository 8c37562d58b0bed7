#include "sim/user_figures.h"

#include <algorithm>

#include "core/resources.h"
#include "sim/simulator.h"

namespace drover::sim {

std::vector<UserFigures> ComputeUserFigures(const Trace& trace, const std::vector<Duration>& waits,
                                            const std::vector<bool>& started) {
  std::vector<UserFigures> figures(trace.users.size());
  std::vector<std::vector<Duration>> user_waits(trace.users.size());
  for (size_t u = 0; u < trace.users.size(); ++u) figures[u].user = trace.users[u];
  for (size_t i = 0; i < trace.tasks.size(); ++i) {
    const TraceTask& t = trace.tasks[i];
    UserFigures& f = figures[t.user];
    ++f.tasks;
    if (!started[i]) continue;
    const core::ResourceRequest& req = trace.RequestOf(t);
    const double seconds = static_cast<double>(t.duration.count()) / 1e6;
    f.cpu_s += static_cast<double>(req.cpus_milli) / 1000.0 * seconds;
    f.gpu_s += static_cast<double>(req.gpus) / core::kWholeGpu * seconds;
    user_waits[t.user].push_back(waits[i]);
  }
  for (size_t u = 0; u < figures.size(); ++u) {
    const WaitStats w = ComputeWaitStats(user_waits[u]);
    figures[u].wait_mean_s = w.mean_s;
    figures[u].wait_p95_s = w.p95_s;
    figures[u].wait_max_s = w.max_s;
  }
  return figures;
}

ShareFigures ComputeShares(const Trace& trace, const std::vector<Duration>& starts,
                           const std::vector<bool>& started, double end_s, size_t windows) {
  ShareFigures out;
  const size_t users = trace.users.size();
  if (users < 2 || trace.tasks.empty()) return out;
  out.gpus = false;
  for (const TraceTask& t : trace.tasks) out.gpus = out.gpus || trace.RequestOf(t).gpus > 0;
  auto seconds = [](Duration d) { return static_cast<double>(d.count()) / 1e6; };
  auto weight = [&](const TraceTask& t) {
    const core::ResourceRequest& req = trace.RequestOf(t);
    return out.gpus ? static_cast<double>(req.gpus) / core::kWholeGpu
                    : static_cast<double>(req.cpus_milli) / 1000.0;
  };
  // The busy period: every user has submitted, none has started all it has.
  std::vector<double> first_submit(users, -1), last_start(users, 0);
  for (size_t i = 0; i < trace.tasks.size(); ++i) {
    const TraceTask& t = trace.tasks[i];
    const double submit = seconds(t.submit);
    if (first_submit[t.user] < 0 || submit < first_submit[t.user]) first_submit[t.user] = submit;
    if (started[i]) last_start[t.user] = std::max(last_start[t.user], seconds(starts[i]));
  }
  out.busy_from_s = *std::max_element(first_submit.begin(), first_submit.end());
  out.busy_to_s = *std::min_element(last_start.begin(), last_start.end());
  // What each user got over [from, to).
  auto given = [&](double from, double to) {
    std::vector<double> got(users, 0);
    for (size_t i = 0; i < trace.tasks.size(); ++i) {
      if (!started[i]) continue;
      const TraceTask& t = trace.tasks[i];
      const double a = std::max(from, seconds(starts[i]));
      const double b = std::min(to, seconds(starts[i]) + seconds(t.duration));
      if (b > a) got[t.user] += (b - a) * weight(t);
    }
    double total = 0;
    for (double g : got) total += g;
    if (total > 0) {
      for (double& g : got) g /= total;
    }
    return got;
  };
  if (out.busy_to_s > out.busy_from_s) out.busy = given(out.busy_from_s, out.busy_to_s);
  double begin = -1;
  for (double f : first_submit) begin = begin < 0 ? f : std::min(begin, f);
  if (windows > 0 && end_s > begin) {
    const double step = (end_s - begin) / static_cast<double>(windows);
    for (size_t w = 0; w < windows; ++w) {
      ShareFigures::Window win;
      win.from_s = begin + step * static_cast<double>(w);
      win.to_s = w + 1 == windows ? end_s : win.from_s + step;
      win.shares = given(win.from_s, win.to_s);
      out.windows.push_back(std::move(win));
    }
  }
  return out;
}

}  // namespace drover::sim
