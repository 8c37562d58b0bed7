#include "server/alloc.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <utility>

#include "common/quantity.h"
#include "common/run_program.h"
#include "net/http_types.h"
#include "server/rest_api.h"

namespace drover::server {
namespace {

using nlohmann::json;

constexpr size_t kEndedKept = 20;  // ended allocations listed per queue
constexpr Duration kSlurmTimeout = Seconds(30);

// Single quotes for sh: 'it'\''s'.
std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool Active(const Allocation& a) { return !a.ended; }

json QueueJson(const AllocQueue& q, bool for_file) {
  json allocations = json::array();
  for (const Allocation& a : q.allocations) {
    json j{{"job", a.job},
           {"slurm_state", a.slurm_state},
           {"ended", a.ended},
           {"attached", a.attached},
           {"worker", AllocWorkerName(q.id, a.job)}};
    if (for_file) {
      j["submitted_at_us"] = ToMicros(a.submitted_at);
      if (a.ended_at) j["ended_at_us"] = ToMicros(*a.ended_at);
    } else {
      j["submitted_at"] = proto::FormatRfc3339(a.submitted_at);
      j["ended_at"] = a.ended_at ? json(proto::FormatRfc3339(*a.ended_at)) : json(nullptr);
    }
    allocations.push_back(std::move(j));
  }
  json j{{"id", q.id},
         {"kind", q.spec.kind},
         {"max_workers", q.spec.max_workers},
         {"time_limit", FormatDuration(q.spec.time_limit)},
         {"idle_timeout", FormatDuration(q.spec.idle_timeout)},
         {"server_address", q.spec.server_address},
         {"sbatch_args", q.spec.sbatch_args},
         {"worker_args", q.spec.worker_args},
         {"failures", q.failures},
         {"last_error", q.last_error},
         {"allocations", std::move(allocations)}};
  if (for_file) {
    if (q.retry_at) j["retry_at_us"] = ToMicros(*q.retry_at);
  } else {
    j["retry_at"] = q.retry_at ? json(proto::FormatRfc3339(*q.retry_at)) : json(nullptr);
    j["worker_lifetime"] = FormatDuration(AllocWorkerLifetime(q.spec));
  }
  return j;
}

class RealSlurmCommands : public SlurmCommands {
 public:
  Result<std::string> Submit(const std::vector<std::string>& args,
                             const std::string& script) override {
    std::vector<std::string> argv = {"sbatch", "--parsable"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back(script);
    ASSIGN_OR_RETURN(std::string out, RunProgram(argv, kSlurmTimeout));
    // "12" or "12;cluster".
    std::string job;
    std::istringstream(out.substr(0, out.find(';'))) >> job;
    if (job.empty() || job.find_first_not_of("0123456789_") != std::string::npos) {
      return Internal("sbatch answered \"" + out.substr(0, 200) + "\", not a job id");
    }
    return job;
  }
  Result<std::map<std::string, std::string>> States(
      const std::vector<std::string>& names) override {
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "" : ",") + n;
    ASSIGN_OR_RETURN(std::string out,
                     RunProgram({"squeue", "-h", "-o", "%i %T", "--name=" + list}, kSlurmTimeout));
    return ParseSqueue(out);
  }
  Status Cancel(const std::string& job) override {
    return RunProgram({"scancel", job}, kSlurmTimeout).status();
  }
};

}  // namespace

std::string AllocWorkerName(uint64_t queue, const std::string& job) {
  return "slurm-" + std::to_string(queue) + "-" + job;
}

Duration AllocWorkerLifetime(const proto::AllocQueueRequest& spec) {
  return spec.time_limit - std::min<Duration>(spec.time_limit / 10, Seconds(60));
}

Duration AllocBackoff(uint32_t failures) {
  Duration d = Seconds(10);
  for (uint32_t i = 1; i < failures && d < Seconds(600); ++i) d *= 2;
  return std::min<Duration>(d, Seconds(600));
}

bool ShouldSubmit(const AllocQueue& queue, size_t demand, size_t waiting, Time now) {
  if (demand == 0 || waiting > 0) return false;
  if (queue.retry_at && now < *queue.retry_at) return false;
  const size_t active = std::count_if(queue.allocations.begin(), queue.allocations.end(), Active);
  return active < queue.spec.max_workers;
}

Result<std::map<std::string, std::string>> ParseSqueue(std::string_view text) {
  std::map<std::string, std::string> states;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    std::string job;
    std::string state;
    std::istringstream fields(line);
    if (!(fields >> job)) continue;  // a blank line
    // A job id is digits, with "_N" for an array task or "+N" for a part
    // of a heterogeneous job.
    if (!(fields >> state) || !std::isdigit(static_cast<unsigned char>(job[0])) ||
        job.find_first_not_of("0123456789_+") != std::string::npos) {
      return InvalidArgument("squeue: expected \"JOB STATE\", got \"" + line + "\"");
    }
    states[job] = state;
  }
  return states;
}

std::string AllocScript(const AllocQueue& queue, const WorkerLaunch& launch) {
  std::string s = "#!/bin/sh\n";
  s += "# Written by the drover server for allocation queue " + std::to_string(queue.id) +
       " (drover alloc list); run by sbatch.\n";
  s += "exec " + ShellQuote(launch.drover) + " worker --server " +
       ShellQuote(launch.server_address) + " --token-file " + ShellQuote(launch.token_file);
  s += launch.fingerprint.empty() ? " --no-tls" : " --fingerprint " + launch.fingerprint;
  s += " --name \"slurm-" + std::to_string(queue.id) + "-$SLURM_JOB_ID\"";
  s += " --workdir \"${TMPDIR:-/tmp}/drover-slurm-$SLURM_JOB_ID\"";
  s += " --lifetime " + FormatDuration(AllocWorkerLifetime(queue.spec));
  s += " --idle-timeout " + FormatDuration(queue.spec.idle_timeout);
  for (const std::string& arg : queue.spec.worker_args) s += " " + ShellQuote(arg);
  s += "\n";
  return s;
}

std::unique_ptr<SlurmCommands> RealSlurm() { return std::make_unique<RealSlurmCommands>(); }

// One round: what the loop decided (cancels, submissions, the names to
// ask about), carried out on the round's thread, and what Slurm answered.
struct AllocManager::Round {
  std::vector<std::string> cancel;
  std::vector<std::string> names;  // the job names of every queue
  struct Submission {
    uint64_t queue = 0;
    std::vector<std::string> args;
    std::string script;
    Result<std::string> job = std::string();
  };
  std::vector<Submission> submit;
  Result<std::map<std::string, std::string>> states = std::map<std::string, std::string>();
  std::vector<std::string> cancel_errors;
};

AllocManager::AllocManager(net::EventLoop& loop, const Clock& clock,
                           const core::Scheduler& scheduler, std::unique_ptr<SlurmCommands> slurm,
                           AllocOptions options)
    : loop_(loop),
      clock_(clock),
      scheduler_(scheduler),
      slurm_(std::move(slurm)),
      options_(std::move(options)),
      timer_(loop) {}

Result<std::unique_ptr<AllocManager>> AllocManager::Start(net::EventLoop& loop, const Clock& clock,
                                                          const core::Scheduler& scheduler,
                                                          std::unique_ptr<SlurmCommands> slurm,
                                                          AllocOptions options) {
  std::unique_ptr<AllocManager> m(
      new AllocManager(loop, clock, scheduler, std::move(slurm), std::move(options)));
  RETURN_IF_ERROR(m->Load());
  m->timer_.ArmAfter(m->options_.interval, [p = m.get()] { p->Tick(); });
  return m;
}

AllocManager::~AllocManager() { Stop(); }

void AllocManager::Stop() {
  stopped_ = true;
  *alive_ = false;
  timer_.Cancel();
  if (round_thread_.joinable()) round_thread_.join();
}

std::string AllocManager::JobName(uint64_t queue) const {
  return "drover-" + options_.server_id.substr(0, 8) + "-q" + std::to_string(queue);
}

Status AllocManager::Load() {
  const std::string path = options_.state_dir + "/allocs.json";
  std::ifstream in(path);
  if (!in) return Status::Ok();  // none yet
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  const auto bad = [&](const std::string& why) { return DataLoss(path + ": " + why); };
  if (!j.is_object() || !j.contains("queues") || !j["queues"].is_array()) {
    return bad("not an allocation queue file");
  }
  try {
    next_id_ = j.value("next_id", uint64_t{1});
    for (const json& q : j["queues"]) {
      AllocQueue queue;
      queue.id = q.at("id").get<uint64_t>();
      json spec = {{"kind", q.at("kind")},
                   {"max_workers", q.at("max_workers")},
                   {"time_limit", q.at("time_limit")},
                   {"idle_timeout", q.at("idle_timeout")},
                   {"server_address", q.at("server_address")},
                   {"sbatch_args", q.at("sbatch_args")},
                   {"worker_args", q.at("worker_args")}};
      Result<proto::AllocQueueRequest> parsed = proto::ParseAllocQueueRequest(spec.dump());
      if (!parsed.ok())
        return bad("queue " + std::to_string(queue.id) + ": " + parsed.status().message());
      queue.spec = std::move(*parsed);
      queue.failures = q.at("failures").get<uint32_t>();
      queue.last_error = q.at("last_error").get<std::string>();
      if (q.contains("retry_at_us"))
        queue.retry_at = TimeFromMicros(q["retry_at_us"].get<int64_t>());
      for (const json& a : q.at("allocations")) {
        Allocation alloc;
        alloc.job = a.at("job").get<std::string>();
        alloc.slurm_state = a.at("slurm_state").get<std::string>();
        alloc.ended = a.at("ended").get<bool>();
        alloc.attached = a.value("attached", false);
        alloc.submitted_at = TimeFromMicros(a.at("submitted_at_us").get<int64_t>());
        if (a.contains("ended_at_us"))
          alloc.ended_at = TimeFromMicros(a["ended_at_us"].get<int64_t>());
        queue.allocations.push_back(std::move(alloc));
      }
      next_id_ = std::max(next_id_, queue.id + 1);
      queues_.push_back(std::move(queue));
    }
  } catch (const json::exception& e) {
    return bad(e.what());
  }
  return Status::Ok();
}

void AllocManager::Save() {
  json queues = json::array();
  for (const AllocQueue& q : queues_) queues.push_back(QueueJson(q, /*for_file=*/true));
  const std::string path = options_.state_dir + "/allocs.json";
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << json{{"next_id", next_id_}, {"queues", std::move(queues)}}.dump(2) << "\n";
    out.flush();
    if (!out) {
      spdlog::error("allocation queues not saved: cannot write {}", tmp);
      return;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    spdlog::error("allocation queues not saved: cannot rename {}", tmp);
  }
}

Result<uint64_t> AllocManager::Add(proto::AllocQueueRequest spec) {
  AllocQueue queue;
  queue.id = next_id_++;
  queue.spec = std::move(spec);
  queues_.push_back(std::move(queue));
  Save();
  spdlog::info("allocation queue {} added: slurm, at most {} workers, {} each", queues_.back().id,
               queues_.back().spec.max_workers, FormatDuration(queues_.back().spec.time_limit));
  return queues_.back().id;
}

Status AllocManager::Remove(uint64_t id) {
  auto it =
      std::find_if(queues_.begin(), queues_.end(), [&](const AllocQueue& q) { return q.id == id; });
  if (it == queues_.end()) return NotFound("no allocation queue " + std::to_string(id));
  for (const Allocation& a : it->allocations) {
    if (Active(a)) to_cancel_.push_back(a.job);
  }
  queues_.erase(it);
  Save();
  spdlog::info("allocation queue {} removed", id);
  return Status::Ok();
}

void AllocManager::Tick() {
  if (stopped_ || in_round_) return;
  // Which allocations still wait for their worker: those whose worker is
  // not attached (a worker that attached and left counts too, until Slurm
  // says the allocation ended).
  std::set<std::string> known;
  std::set<std::string> live;
  WorkerNames(&known, &live);
  auto round = std::make_shared<Round>();
  round->cancel = std::exchange(to_cancel_, {});
  const Time now = clock_.Now();
  WorkerLaunch launch = options_.launch ? options_.launch() : WorkerLaunch{};
  std::error_code ec;  // a failure shows as sbatch's: the script is missing
  std::filesystem::create_directories(options_.state_dir + "/alloc", ec);
  for (AllocQueue& q : queues_) {
    round->names.push_back(JobName(q.id));
    size_t waiting = 0;
    for (Allocation& a : q.allocations) {
      if (!Active(a)) continue;
      if (!a.attached && known.count(AllocWorkerName(q.id, a.job))) {
        a.attached = true;
        q.failures = 0;  // a worker came: whatever failed before works now
        q.retry_at.reset();
      }
      if (!live.count(AllocWorkerName(q.id, a.job))) ++waiting;
    }
    const size_t demand = scheduler_.QueuedWithin(AllocWorkerLifetime(q.spec), 1);
    if (!ShouldSubmit(q, demand, waiting, now)) continue;
    WorkerLaunch mine = launch;
    if (!q.spec.server_address.empty()) mine.server_address = q.spec.server_address;
    const std::string dir = options_.state_dir + "/alloc";
    const std::string script = dir + "/q" + std::to_string(q.id) + ".sh";
    {
      std::ofstream out(script, std::ios::trunc);
      out << AllocScript(q, mine);
    }
    ::chmod(script.c_str(), 0700);
    Round::Submission s;
    s.queue = q.id;
    const int64_t minutes = (q.spec.time_limit.count() + 59'999'999) / 60'000'000;
    s.args = {"--job-name=" + JobName(q.id), "--time=" + std::to_string(minutes),
              "--output=" + dir + "/slurm-%j.out"};
    s.args.insert(s.args.end(), q.spec.sbatch_args.begin(), q.spec.sbatch_args.end());
    s.script = script;
    round->submit.push_back(std::move(s));
  }
  if (round->names.empty() && round->cancel.empty()) {
    ++rounds_;
    timer_.ArmAfter(options_.interval, [this] { Tick(); });
    return;
  }
  in_round_ = true;
  if (round_thread_.joinable()) round_thread_.join();
  round_thread_ = std::thread([this, round, alive = alive_] {
    for (const std::string& job : round->cancel) {
      Status s = slurm_->Cancel(job);
      if (!s.ok()) round->cancel_errors.push_back("scancel " + job + ": " + s.message());
    }
    for (Round::Submission& s : round->submit) s.job = slurm_->Submit(s.args, s.script);
    if (!round->names.empty()) round->states = slurm_->States(round->names);
    loop_.Post([this, round, alive] {
      if (!*alive) return;
      Finish(*round);
    });
  });
}

void AllocManager::Finish(Round& round) {
  in_round_ = false;
  ++rounds_;
  const Time now = clock_.Now();
  for (const std::string& e : round.cancel_errors) spdlog::warn("allocation: {}", e);
  bool changed = false;
  for (Round::Submission& s : round.submit) {
    auto q = std::find_if(queues_.begin(), queues_.end(),
                          [&](const AllocQueue& x) { return x.id == s.queue; });
    if (q == queues_.end()) {
      if (s.job.ok()) to_cancel_.push_back(*s.job);  // removed meanwhile
      continue;
    }
    changed = true;
    if (!s.job.ok()) {
      Failed(*q, "sbatch failed: " + s.job.status().message(), now);
      continue;
    }
    q->allocations.push_back(Allocation{*s.job, "SUBMITTED", false, now, std::nullopt, false});
    spdlog::info("allocation queue {}: submitted Slurm job {} (worker {})", q->id, *s.job,
                 AllocWorkerName(q->id, *s.job));
  }
  std::set<std::string> known;
  std::set<std::string> live;
  WorkerNames(&known, &live);
  if (!round.states.ok()) {
    spdlog::warn("allocation: squeue failed: {}", round.states.status().message());
  } else {
    const std::set<std::string> submitted = [&] {
      std::set<std::string> ids;
      for (const Round::Submission& s : round.submit) {
        if (s.job.ok()) ids.insert(*s.job);
      }
      return ids;
    }();
    for (AllocQueue& q : queues_) {
      for (Allocation& a : q.allocations) {
        if (!Active(a)) continue;
        auto it = round.states->find(a.job);
        if (it != round.states->end()) {
          changed |= a.slurm_state != it->second;
          a.slurm_state = it->second;
        } else if (!submitted.count(a.job)) {
          // Slurm no longer lists it: it ended (the worker left, or its
          // time ran out).
          a.ended = true;
          a.ended_at = now;
          a.slurm_state = "ended";
          changed = true;
          a.attached = a.attached || known.count(AllocWorkerName(q.id, a.job)) > 0;
          if (!a.attached) {
            Failed(q,
                   "Slurm job " + a.job + " ended before its worker attached (its output: " +
                       options_.state_dir + "/alloc/slurm-" + a.job + ".out)",
                   now);
          } else {
            spdlog::info("allocation queue {}: Slurm job {} ended", q.id, a.job);
          }
        }
      }
      // Keep the active ones and the last ended ones.
      size_t ended = std::count_if(q.allocations.begin(), q.allocations.end(),
                                   [](const Allocation& a) { return a.ended; });
      for (auto it = q.allocations.begin(); ended > kEndedKept && it != q.allocations.end();) {
        if (it->ended) {
          it = q.allocations.erase(it);
          --ended;
        } else {
          ++it;
        }
      }
    }
  }
  if (changed) Save();
  if (!stopped_) timer_.ArmAfter(options_.interval, [this] { Tick(); });
}

void AllocManager::WorkerNames(std::set<std::string>* known, std::set<std::string>* live) const {
  for (WorkerId w : scheduler_.Workers()) {
    Result<core::WorkerInfo> info = scheduler_.GetWorker(w);
    if (!info.ok()) continue;
    known->insert(info->resources.name);
    if (!info->lost) live->insert(info->resources.name);
  }
}

void AllocManager::Failed(AllocQueue& q, std::string why, Time now) {
  ++q.failures;
  q.last_error = std::move(why);
  q.retry_at = now + AllocBackoff(q.failures);
  spdlog::warn("allocation queue {}: {} ({} in a row); next try in {}", q.id, q.last_error,
               q.failures, FormatDuration(AllocBackoff(q.failures)));
}

void AllocManager::AddRoutes(net::Server& server) {
  server.Route("POST", "/api/v1/allocs", [this](const net::Request& r, net::Responder done) {
    Result<proto::AllocQueueRequest> spec = proto::ParseAllocQueueRequest(r.body);
    if (!spec.ok()) return done(ApiError(spec.status()));
    Result<uint64_t> id = Add(std::move(*spec));
    if (!id.ok()) return done(ApiError(id.status()));
    done(net::JsonResponse(json{{"id", *id}}.dump(), 201));
  });
  server.Route("GET", "/api/v1/allocs", [this](const net::Request&, net::Responder done) {
    json list = json::array();
    for (const AllocQueue& q : queues_) list.push_back(QueueJson(q, /*for_file=*/false));
    done(net::JsonResponse(json{{"queues", std::move(list)}, {"rounds", rounds_}}.dump()));
  });
  server.Route(
      "POST", "/api/v1/allocs/{id}/remove", [this](const net::Request& r, net::Responder done) {
        const std::string& text = r.path_params.at("id");
        if (text.empty() || text.size() > 18 ||
            text.find_first_not_of("0123456789") != std::string::npos) {
          return done(ApiError(
              InvalidArgument("allocation queue id: expected a number, got \"" + text + "\"")));
        }
        const uint64_t id = std::stoull(text);
        if (Status s = Remove(id); !s.ok()) return done(ApiError(s));
        done(net::JsonResponse(json{{"id", id}, {"removed", true}}.dump()));
      });
}

}  // namespace drover::server
