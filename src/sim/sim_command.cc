#include "sim/sim_command.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include "common/quantity.h"
#include "core/placement.h"
#include "sim/bound.h"
#include "sim/cluster.h"
#include "sim/report.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace drover::sim {

namespace {

int Fail(std::ostream& err, const Status& status) {
  err << "drover sim: " << status.message() << "\n";
  const bool usage =
      status.code() == StatusCode::kInvalidArgument || status.code() == StatusCode::kNotFound;
  return usage ? kSimExitUsage : kSimExitFailure;
}

int Generate(const SimCommandOptions& options, std::ostream& out, std::ostream& err) {
  if (options.generate_path == "-") {
    Status s = WriteSyntheticTrace(options.generate, out);
    return s.ok() ? kSimExitOk : Fail(err, s);
  }
  std::ofstream file(options.generate_path, std::ios::trunc);
  if (!file) return Fail(err, Unavailable("cannot write " + options.generate_path));
  Status s = WriteSyntheticTrace(options.generate, file);
  if (!s.ok()) return Fail(err, s.WithContext(options.generate_path));
  return kSimExitOk;
}

// --share USER=N, each into `config.shares`.
Status ParseShares(const std::vector<std::string>& shares, core::FairShareConfig& config) {
  for (const std::string& text : shares) {
    const size_t eq = text.find('=');
    if (eq == 0 || eq == std::string::npos) {
      return InvalidArgument("--share " + text + ": expected USER=N, e.g. ann=2");
    }
    const std::string number = text.substr(eq + 1);
    double share = 0;
    const char* end = number.data() + number.size();
    const auto [ptr, ec] = std::from_chars(number.data(), end, share);
    if (ec != std::errc() || ptr != end || number.empty() || !(share > 0) ||
        !std::isfinite(share)) {
      return InvalidArgument("--share " + text + ": " + (number.empty() ? "\"\"" : number) +
                             " is not a number above 0");
    }
    config.shares[text.substr(0, eq)] = share;
  }
  return Status::Ok();
}

}  // namespace

int RunSimCommand(const SimCommandOptions& options, std::ostream& out, std::ostream& err) {
  if (!options.generate_path.empty()) return Generate(options, out, err);
  if (options.trace_path.empty() || options.cluster_path.empty()) {
    return Fail(err, InvalidArgument("a TRACE and --cluster CLUSTER are needed (or --generate "
                                     "FILE to write a synthetic trace)"));
  }
  std::vector<core::PolicyKind> policies;
  if (options.policy == "all") {
    policies = {core::PolicyKind::kSpread, core::PolicyKind::kPack, core::PolicyKind::kRoundRobin};
  } else {
    Result<core::PolicyKind> kind = core::ParsePolicy(options.policy);
    if (!kind.ok()) return Fail(err, kind.status().WithContext("--policy"));
    policies = {*kind};
  }
  Result<Duration> suspend_for = ParseDuration(options.suspend_for);
  if (!suspend_for.ok()) return Fail(err, suspend_for.status().WithContext("--suspend-for"));
  core::FairShareConfig fair_share;
  fair_share.enabled = !options.no_fair_share;
  Result<Duration> half_life = ParseDuration(options.half_life);
  if (!half_life.ok()) return Fail(err, half_life.status().WithContext("--half-life"));
  if (half_life->count() <= 0) {
    return Fail(err, InvalidArgument("--half-life: " + options.half_life +
                                     ": expected a duration above 0, e.g. 1d"));
  }
  fair_share.half_life = *half_life;
  if (Status s = ParseShares(options.shares, fair_share); !s.ok()) return Fail(err, s);
  Result<Cluster> cluster = LoadCluster(options.cluster_path);
  if (!cluster.ok()) return Fail(err, cluster.status());
  Result<Trace> trace = LoadTrace(options.trace_path);
  if (!trace.ok()) return Fail(err, trace.status());

  const MakespanBound bound = ComputeBound(*trace, *cluster);
  std::vector<SimResult> results;
  for (core::PolicyKind policy : policies) {
    Result<SimResult> r =
        Simulate(*trace, *cluster,
                 SimOptions{policy, !options.no_reservations, *suspend_for, options.checkpoint,
                            !options.no_locality, fair_share, options.black_hole,
                            !options.no_quarantine});
    if (!r.ok()) return Fail(err, r.status());
    results.push_back(std::move(*r));
  }
  if (options.json) {
    for (const SimResult& r : results) out << FormatJson(r, bound) << "\n";
  } else if (results.size() == 1) {
    out << FormatText(results.front(), bound, *cluster);
    if (options.idle_profile) out << FormatIdleProfile(results.front(), *cluster);
  } else {
    out << FormatTable(results, bound);
    if (options.idle_profile) {
      for (const SimResult& r : results) {
        out << "policy " << core::PolicyName(r.policy) << ": " << FormatIdleProfile(r, *cluster);
      }
    }
  }
  out.flush();
  return out ? kSimExitOk : kSimExitFailure;
}

}  // namespace drover::sim
