#include "sim/report.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/quantity.h"
#include "core/placement.h"

namespace drover::sim {

namespace {

std::string Fixed(double v, int decimals = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string Percent(double fraction) { return Fixed(fraction * 100.0) + "%"; }

double Ratio(const SimResult& r, const MakespanBound& b) {
  return b.value_s() > 0 ? r.makespan_s / b.value_s() : 0;
}

std::string PolicyLabel(const SimResult& r) {
  std::string name(core::PolicyName(r.policy));
  return r.reservations ? name : name + " (no reservations)";
}

std::string BoundText(const MakespanBound& b) {
  return Fixed(b.value_s()) + " s (GPU work " + Fixed(b.gpu_area_s) + " s, cpu work " +
         Fixed(b.cpu_area_s) + " s, longest chain " + Fixed(b.chain_s) + " s)";
}

std::string Pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

std::string PadLeft(const std::string& s, size_t width) {
  return s.size() < width ? std::string(width - s.size(), ' ') + s : s;
}

}  // namespace

std::string FormatText(const SimResult& r, const MakespanBound& b, const Cluster& cluster) {
  std::string s = "policy " + PolicyLabel(r) + ": " + std::to_string(r.tasks) + " tasks in " +
                  std::to_string(r.jobs) + " jobs on " + std::to_string(cluster.workers.size()) +
                  " workers (" + std::to_string(cluster.TotalCores()) + " cpus, " +
                  FormatBytes(cluster.TotalMemBytes()) + ", " +
                  std::to_string(cluster.TotalGpus()) + " GPUs)\n";
  s += "makespan    " + FormatDuration(Duration(std::llround(r.makespan_s * 1e6))) + " (" +
       Fixed(r.makespan_s) + " s), " + Fixed(Ratio(r, b), 3) + "x the lower bound " + BoundText(b) +
       "\n";
  s += "queue wait  mean " + Fixed(r.wait.mean_s) + " s, p50 " + Fixed(r.wait.p50_s) + " s, p95 " +
       Fixed(r.wait.p95_s) + " s, max " + Fixed(r.wait.max_s) + " s\n";
  s += "utilization cpu " + Percent(r.cpu_utilization) + ", mem " + Percent(r.mem_utilization) +
       ", gpu " + Percent(r.gpu_utilization) + "\n";
  s += "GPU idle while a fitting task waited: " + Fixed(r.idle_other_gpu_s) +
       " GPU-s outside reservations, " + Fixed(r.idle_reservation_gpu_s) +
       " GPU-s held for a reservation\n";
  if (r.owners.presences > 0) s += FormatOwners(r);
  if (!r.black_hole.worker.empty()) {
    const BlackHoleFigures& h = r.black_hole;
    s += "black hole  " + h.worker + " (quarantine " + (h.quarantine ? "on" : "off") + "): " +
         std::to_string(h.failed_attempts) + " attempts failed there, " +
         std::to_string(h.failed_tasks) + " tasks failed (" +
         Percent(r.tasks ? static_cast<double>(h.failed_tasks) / static_cast<double>(r.tasks) : 0) +
         "), " + std::to_string(h.canceled_tasks) + " dependents canceled; goodput " +
         Percent(h.goodput) + "\n";
  }
  if (r.cache.on) {
    const CacheFigures& c = r.cache;
    s += "cache       " + std::to_string(c.reused_tasks) + " of " +
         std::to_string(c.keyed_tasks) + " cached tasks reused without running (" +
         Percent(r.tasks ? static_cast<double>(c.reused_tasks) / static_cast<double>(r.tasks) : 0) +
         " of all), " + Fixed(c.saved_gpu_s / 3600.0) + " GPU-hours and " +
         Fixed(c.saved_cpu_s / 3600.0) +
         " core-hours saved (the lower bound counts their work: it runs every task)\n";
  }
  if (r.input_bytes > 0) {
    s += "inputs      " + FormatBytes(r.input_bytes) + " read by dependents, " +
         FormatBytes(r.moved_bytes) + " of it (" +
         Percent(static_cast<double>(r.moved_bytes) / static_cast<double>(r.input_bytes)) +
         ") from another worker" + (r.locality ? "" : " (locality off)") + "\n";
  }
  if (r.users.size() > 1) s += FormatUsers(r);
  return s;
}

std::string FormatUsers(const SimResult& r) {
  size_t width = 0;
  for (const UserFigures& u : r.users) width = std::max(width, u.user.size());
  std::string s = std::string("users       fair share ") + (r.fair_share ? "on" : "off") + "\n";
  for (const UserFigures& u : r.users) {
    s += "  " + u.user + std::string(width - u.user.size(), ' ') + "  " + std::to_string(u.tasks) +
         (u.tasks == 1 ? " task, " : " tasks, ") + Fixed(u.gpu_s) + " GPU-s, " + Fixed(u.cpu_s) +
         " core-s; wait mean " + Fixed(u.wait_mean_s) + " s, p95 " + Fixed(u.wait_p95_s) +
         " s, max " + Fixed(u.wait_max_s) + " s\n";
  }
  const ShareFigures& sh = r.shares;
  auto percents = [&](const std::vector<double>& shares) {
    std::string line;
    for (size_t u = 0; u < shares.size() && u < r.users.size(); ++u) {
      line += (u == 0 ? "" : ", ") + r.users[u].user + " " + Fixed(shares[u] * 100) + "%";
    }
    return line;
  };
  if (!sh.busy.empty()) {
    s += std::string("  share of ") + (sh.gpus ? "GPU-s" : "core-s") + " while all wait, " +
         Fixed(sh.busy_from_s) + " s to " + Fixed(sh.busy_to_s) + " s: " + percents(sh.busy) + "\n";
  }
  for (const ShareFigures::Window& w : sh.windows) {
    s += "  " + Fixed(w.from_s) + " s to " + Fixed(w.to_s) + " s: " + percents(w.shares) + "\n";
  }
  return s;
}

std::string FormatOwners(const SimResult& r) {
  const OwnerFigures& o = r.owners;
  std::string s = "owners      " + std::to_string(o.presences) + " presences took back " +
                  Fixed(o.capacity_gpu_s) + " GPU-s of capacity; " +
                  std::to_string(o.suspended_attempts) + " attempts suspended, holding " +
                  Fixed(o.suspended_gpu_s) + " GPU-s (" + Fixed(o.suspended_cpu_s) + " core-s)\n";
  s += "            " + std::to_string(o.vacated_attempts) + " attempts vacated, " +
       Fixed(o.vacated_gpu_s) + " GPU-s (" + Fixed(o.vacated_cpu_s) + " core-s) of work lost; " +
       std::to_string(o.timed_out_tasks) + " tasks killed at their limit (" +
       Fixed(o.timed_out_gpu_s) + " GPU-s), " + std::to_string(o.canceled_tasks) +
       " canceled after them\n";
  s += "            throughput kept " + Percent(o.throughput_kept) + " (" + Fixed(o.useful_gpu_s) +
       " GPU-s of finished work over the capacity the owners left)\n";
  return s;
}

std::string FormatIdleProfile(const SimResult& r, const Cluster& cluster) {
  const IdleProfile& p = r.idle;
  const double gpus = static_cast<double>(cluster.TotalGpus());
  const double total = p.total_gpu_s();
  auto row = [&](const char* what, double gpu_s) {
    return "  " + Pad(what, 36) + PadLeft(Fixed(gpu_s), 11) + " GPU-s  " +
           PadLeft(Percent(total > 0 ? gpu_s / total : 0), 6) + "  " +
           PadLeft(Fixed(gpus > 0 ? gpu_s / gpus : 0), 9) + " s of makespan\n";
  };
  std::string s = "GPU idle by cause (" + Fixed(total) +
                  " GPU-s = " + Fixed(gpus > 0 ? total / gpus : 0) +
                  " s of makespan above total GPU work / GPUs):\n";
  s += row("held for a reservation", p.reservation_gpu_s);
  s += row("fitting task waited, nothing held it", p.other_gpu_s);
  s += row("fragmentation (waiting fit no gap)", p.fragmentation_gpu_s);
  s += row("GPU tasks wait for dependencies", p.dependency_gpu_s);
  s += row("no GPU task waiting", p.queue_empty_gpu_s);
  if (r.owners.presences > 0) s += row("owner present (worker paused)", p.owner_gpu_s);
  s += row("of all these, after the last submit", p.after_last_submit_gpu_s);
  return s;
}

std::string FormatJson(const SimResult& r, const MakespanBound& b) {
  nlohmann::ordered_json j;
  j["policy"] = std::string(core::PolicyName(r.policy));
  j["reservations"] = r.reservations;
  j["tasks"] = r.tasks;
  j["jobs"] = r.jobs;
  j["events"] = r.events;
  j["makespan_s"] = r.makespan_s;
  j["lower_bound_s"] = b.value_s();
  j["gpu_area_bound_s"] = b.gpu_area_s;
  j["cpu_area_bound_s"] = b.cpu_area_s;
  j["chain_bound_s"] = b.chain_s;
  j["makespan_ratio_to_bound"] = Ratio(r, b);
  j["plain_bound_s"] = b.plain_s();
  j["makespan_ratio_to_plain_bound"] = b.plain_s() > 0 ? r.makespan_s / b.plain_s() : 0;
  j["wait_mean_s"] = r.wait.mean_s;
  j["wait_p50_s"] = r.wait.p50_s;
  j["wait_p95_s"] = r.wait.p95_s;
  j["wait_max_s"] = r.wait.max_s;
  j["cpu_utilization"] = r.cpu_utilization;
  j["mem_utilization"] = r.mem_utilization;
  j["gpu_utilization"] = r.gpu_utilization;
  j["idle_while_waiting_gpu_s"] = r.idle_other_gpu_s;
  j["reservation_idle_gpu_s"] = r.idle_reservation_gpu_s;
  j["idle_fragmentation_gpu_s"] = r.idle.fragmentation_gpu_s;
  j["idle_dependency_gpu_s"] = r.idle.dependency_gpu_s;
  j["idle_queue_empty_gpu_s"] = r.idle.queue_empty_gpu_s;
  j["idle_after_last_submit_gpu_s"] = r.idle.after_last_submit_gpu_s;
  const OwnerFigures& o = r.owners;
  j["idle_owner_gpu_s"] = r.idle.owner_gpu_s;
  j["owner_presences"] = o.presences;
  j["owner_capacity_gpu_s"] = o.capacity_gpu_s;
  j["suspended_attempts"] = o.suspended_attempts;
  j["suspended_gpu_s"] = o.suspended_gpu_s;
  j["suspended_cpu_s"] = o.suspended_cpu_s;
  j["vacated_attempts"] = o.vacated_attempts;
  j["vacated_gpu_s"] = o.vacated_gpu_s;
  j["vacated_cpu_s"] = o.vacated_cpu_s;
  j["timed_out_tasks"] = o.timed_out_tasks;
  j["timed_out_gpu_s"] = o.timed_out_gpu_s;
  j["canceled_tasks"] = o.canceled_tasks;
  j["useful_gpu_s"] = o.useful_gpu_s;
  j["throughput_kept"] = o.throughput_kept;
  if (!r.black_hole.worker.empty()) {
    j["black_hole"] = r.black_hole.worker;
    j["quarantine"] = r.black_hole.quarantine;
    j["black_hole_failed_attempts"] = r.black_hole.failed_attempts;
    j["black_hole_failed_tasks"] = r.black_hole.failed_tasks;
    j["black_hole_canceled_tasks"] = r.black_hole.canceled_tasks;
    j["goodput"] = r.black_hole.goodput;
  }
  if (r.cache.on) {
    j["cache_keyed_tasks"] = r.cache.keyed_tasks;
    j["cache_reused_tasks"] = r.cache.reused_tasks;
    j["cache_saved_gpu_s"] = r.cache.saved_gpu_s;
    j["cache_saved_cpu_s"] = r.cache.saved_cpu_s;
  }
  j["locality"] = r.locality;
  j["input_bytes"] = r.input_bytes;
  j["moved_bytes"] = r.moved_bytes;
  j["fair_share"] = r.fair_share;
  nlohmann::ordered_json users = nlohmann::ordered_json::array();
  for (const UserFigures& u : r.users) {
    users.push_back({{"user", u.user},
                     {"tasks", u.tasks},
                     {"cpu_s", u.cpu_s},
                     {"gpu_s", u.gpu_s},
                     {"wait_mean_s", u.wait_mean_s},
                     {"wait_p95_s", u.wait_p95_s},
                     {"wait_max_s", u.wait_max_s}});
  }
  j["users"] = std::move(users);
  if (!r.shares.busy.empty() || !r.shares.windows.empty()) {
    nlohmann::ordered_json windows = nlohmann::ordered_json::array();
    for (const ShareFigures::Window& w : r.shares.windows) {
      windows.push_back({{"from_s", w.from_s}, {"to_s", w.to_s}, {"shares", w.shares}});
    }
    j["shares"] = {{"unit", r.shares.gpus ? "gpu_s" : "core_s"},
                   {"busy_from_s", r.shares.busy_from_s},
                   {"busy_to_s", r.shares.busy_to_s},
                   {"busy", r.shares.busy},
                   {"windows", std::move(windows)}};
  }
  return j.dump();
}

std::string FormatTable(const std::vector<SimResult>& results, const MakespanBound& b) {
  static constexpr const char* kHeader[] = {"makespan_s",      "x_bound",         "wait_mean_s",
                                            "wait_p50_s",      "wait_p95_s",      "gpu_util",
                                            "idle_resv_gpu_s", "idle_other_gpu_s"};
  size_t name_width = 6;
  for (const SimResult& r : results) name_width = std::max(name_width, PolicyLabel(r).size());
  std::string s = "lower bound " + BoundText(b) + "\n" + Pad("policy", name_width);
  for (const char* h : kHeader) s += "  " + std::string(h);
  s += "\n";
  bool owners = false;
  for (const SimResult& r : results) owners = owners || r.owners.presences > 0;
  if (owners) s.insert(s.size() - 1, "  vacated  kept");
  for (const SimResult& r : results) {
    const std::string cells[] = {Fixed(r.makespan_s),
                                 Fixed(Ratio(r, b), 3),
                                 Fixed(r.wait.mean_s),
                                 Fixed(r.wait.p50_s),
                                 Fixed(r.wait.p95_s),
                                 Percent(r.gpu_utilization),
                                 Fixed(r.idle_reservation_gpu_s),
                                 Fixed(r.idle_other_gpu_s)};
    s += Pad(PolicyLabel(r), name_width);
    for (size_t i = 0; i < std::size(cells); ++i) {
      s += "  " + PadLeft(cells[i], std::string(kHeader[i]).size());
    }
    if (owners) {
      s += "  " + PadLeft(std::to_string(r.owners.vacated_attempts), 7) + "  " +
           PadLeft(Percent(r.owners.throughput_kept), 5);
    }
    s += "\n";
  }
  return s;
}

}  // namespace drover::sim
