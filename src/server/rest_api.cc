#include "server/rest_api.h"

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/quantity.h"
#include "net/json_text.h"
#include "proto/api_json.h"
#include "proto/function_task.h"
#include "proto/job_file.h"
#include "server/file_store.h"
#include "server/paging.h"
#include "server/sliced.h"

namespace drover::server {

namespace {

using nlohmann::json;

net::Response Json(const json& j, int status = 200) { return net::JsonResponse(net::JsonText(j), status); }

}  // namespace

net::Response ApiError(const Status& s, std::string_view field) {
  net::Response r = net::ErrorResponse(s);
  r.body = proto::EncodeErrorBody(s, field);
  return r;
}

net::Response JobNotFound(const Status& s, JobId job, const core::Scheduler& sched) {
  if (s.code() != StatusCode::kNotFound || !sched.Forgotten(job)) return ApiError(s);
  net::Response r = net::ErrorResponse(s);
  r.body = nlohmann::json{{"error",
                           {{"code", "not_found"},
                            {"expired", true},
                            {"message", ExpiredMessage(job)}}}}
               .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

std::string ExpiredMessage(JobId job) {
  return "job " + std::to_string(job) +
         " expired: it finished longer ago than the server keeps finished jobs "
         "(drover server --keep-finished) and was forgotten";
}

namespace {

// The field a job-spec error names: its message starts with the field's
// path ("task[1].resources.mem: ...") when the error is about one field.
std::string FieldOf(const Status& s) {
  const std::string& m = s.message();
  const size_t colon = m.find(": ");
  if (colon == std::string::npos || colon == 0) return "";
  for (size_t i = 0; i < colon; ++i) {
    const char c = m[i];
    const bool path_char = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                           (c >= '0' && c <= '9') || c == '_' || c == '[' || c == ']' || c == '.';
    if (!path_char) return "";
  }
  return m.substr(0, colon);
}

// ?state= for job lists: "active" (not done), "done", or a task state name
// (jobs with at least one task in that state).
Result<std::function<bool(const core::JobInfo&)>> JobFilter(const net::Request& r) {
  auto it = r.query.find("state");
  if (it == r.query.end() || it->second.empty()) {
    return std::function<bool(const core::JobInfo&)>([](const core::JobInfo&) { return true; });
  }
  const std::string want = it->second;
  if (want == "active") {
    return std::function<bool(const core::JobInfo&)>([](const core::JobInfo& j) { return !j.done; });
  }
  if (want == "done") {
    return std::function<bool(const core::JobInfo&)>([](const core::JobInfo& j) { return j.done; });
  }
  for (int s = 0; s < core::kTaskStateCount; ++s) {
    if (core::TaskStateName(static_cast<core::TaskState>(s)) == want) {
      return std::function<bool(const core::JobInfo&)>(
          [s](const core::JobInfo& j) { return j.counts[s] > 0; });
    }
  }
  return InvalidArgument("state: want active, done or a task state, got \"" + want + "\"");
}

// Every attempt of a task: the past ones the scheduler kept, then the
// latest, unless the task is queued (or waiting) again after it (then the
// past ones have it whole).
json AttemptsJson(const std::vector<core::PastAttempt>& past, const core::TaskInfo& info) {
  const bool requeued =
      (info.state == core::TaskState::kQueued || info.state == core::TaskState::kWaiting) &&
      info.attempt > 0;
  json attempts = json::array();
  for (const core::PastAttempt& p : past) {
    if (p.attempt > info.attempt || (p.attempt == info.attempt && !requeued)) continue;
    proto::AttemptView a;
    a.attempt = p.attempt;
    if (p.worker != 0) a.worker = p.worker;
    a.started_at = p.started_at;
    a.finished_at = p.ended_at;
    // Vacated (its workstation's owner came back, or a task of higher
    // priority took its room): not a failure, and said so.
    // A success whose outputs were lost with their worker ran again
    // (lineage): "rerun".
    a.state = p.kind == core::EndKind::kPreempted || p.kind == core::EndKind::kVacated ? "preempted"
              : p.kind == core::EndKind::kRerun                                        ? "rerun"
                                                                                       : "retried";
    a.reason = p.reason;
    a.outcome = p.outcome;
    attempts.push_back(proto::AttemptJson(a));
  }
  if (info.attempt > 0 && !requeued) {
    proto::AttemptView a;
    a.attempt = info.attempt;
    a.worker = info.worker;
    a.started_at = info.started_at;
    a.state = core::TaskStateName(info.state);
    a.reason = info.reason;
    if (info.state != core::TaskState::kAssigned && info.state != core::TaskState::kRunning) {
      a.finished_at = info.finished_at;
      a.outcome = info.outcome;
    }
    attempts.push_back(proto::AttemptJson(a));
  }
  return attempts;
}

// Cancels a job a slice of tasks per loop turn (sliced.h), then the job
// itself (CancelJob: its groups are doomed, and whatever was placed
// meanwhile is killed). One CancelJob of a 100,000-task job held the loop
// ~1.2 s: each task's cancel is a journal record and an event. `answer`
// runs once: with 0 when the first slice canceled everything (any job of a
// few thousand tasks), else with how many tasks were still to look at after
// it: a million-task job takes longer than a client waits for an answer.
void CancelJobSliced(CoreDriver& driver, const core::JobInfo& job,
                     std::function<void(uint64_t)> answer) {
  struct Run {
    JobId job;
    uint64_t count;
    uint64_t next = 0;
    bool answered = false;
  };
  auto run = std::make_shared<Run>(Run{job.id, job.task_count});
  RunSliced(driver.loop(), driver.alive(), [&driver, run, answer = std::move(answer)] {
    const core::Scheduler& sched = driver.scheduler();
    bool more = false;
    if (sched.GetJob(run->job).ok()) {  // else gone meanwhile (retention)
      SliceBudget budget;
      while (run->next < run->count && !more) {
        const TaskId t{run->job, static_cast<uint32_t>(run->next++)};
        Result<core::TaskInfo> info = sched.GetTask(t);
        if (info.ok() && !core::IsTerminal(info->state)) driver.Handle(core::CancelTask{t});
        more = budget.Spent() && run->next < run->count;
      }
      if (!more) driver.Handle(core::CancelJob{run->job});
    }
    if (!run->answered) {
      run->answered = true;
      answer(more ? run->count - run->next : 0);
    }
    return !more;
  });
}

// A job given to the core: its id and warnings, or why it was refused.
struct Submitted {
  Status status;
  std::string field;  // the part of the spec the error is about
  JobId id = 0;
  std::string user;  // the job's user, as bound (BindUser)
  std::vector<std::string> warnings;

  // {"id": N, "warnings": [...]}, or the error body.
  json Answer() const {
    if (!status.ok()) {
      json error = {{"code", StatusCodeName(status.code())}, {"message", status.message()}};
      if (!field.empty()) error["field"] = field;
      return {{"error", std::move(error)}};
    }
    json answer = {{"id", id}};
    if (!user.empty()) answer["user"] = user;
    if (!warnings.empty()) answer["warnings"] = warnings;
    return answer;
  }
};

// The first of the spec's input files (client uploads) the store lacks, as
// an error naming it and the field; OK when it holds them all. With
// `holder` (a user's: whose files they read) a file only others hold counts
// as lacking: they may not name another's file without uploading it.
Status CheckUploaded(const core::JobSpec& spec, const FileStore* files,
                     const FileStore::Readable& holder, std::string* field) {
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    // Code files are hashed by the client; the server never sees them.
    const std::vector<core::OutputFile>& code = spec.groups[g].code;
    for (size_t i = 0; i < code.size(); ++i) {
      if (!code[i].sha256.empty()) continue;
      *field = "task[" + std::to_string(g) + "].code[" + std::to_string(i) + "]";
      return InvalidArgument("code file \"" + code[i].name +
                             "\" is a pattern on the client, not a hashed file {path, sha256}: "
                             "hash it first (drover run and drover submit --code do)");
    }
    const std::vector<core::OutputFile>& inputs = spec.groups[g].input_files;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (files != nullptr && files->HasFor(inputs[i].sha256, holder)) continue;
      *field = "task[" + std::to_string(g) + "].input_files[" + std::to_string(i) + "]";
      if (inputs[i].sha256.empty()) {
        return InvalidArgument("input file \"" + inputs[i].name +
                               "\" is a path on the client, not an uploaded file {name, size, "
                               "sha256}: upload it first (PUT /api/v1/files/{sha256}; drover "
                               "submit --input does)");
      }
      return FailedPrecondition(
          "input file \"" + inputs[i].name + "\" (sha256 " + inputs[i].sha256.substr(0, 12) +
          "...) is not on the server: upload it first (PUT /api/v1/files/{sha256}; drover "
          "submit --input does)");
    }
  }
  return Status::Ok();
}

// A task named in `after` hands its result and outputs to the job's tasks
// ($DROVER_INPUTS): a user may name only tasks whose contents they read
// (access.h). A job named there is only waited for, anyone's.
Status CheckAfter(const core::JobSpec& spec, const core::Scheduler& sched, const Access* access,
                  const net::Identity* who, std::string* field) {
  if (access == nullptr || who == nullptr) return Status::Ok();
  for (const TaskId& t : spec.after_tasks) {
    Result<core::JobInfo> job = sched.GetJob(t.job);
    if (!job.ok() || access->MayReadContents(*who, job->user)) continue;
    *field = "after";
    return PermissionDenied("after " + t.ToString() + ": that task is " +
                            (job->user.empty() ? std::string("another user") : job->user) +
                            "'s, and its result and outputs would be handed to this job; a user "
                            "may name only tasks whose results they may read (name its job, " +
                            std::to_string(t.job) + ", to wait for it without them)");
  }
  return Status::Ok();
}

// The job's user is whoever sent it: a user's job is their own,
// and only an admin may name another user in it (a submission on that
// user's behalf, which the audit log records). The bare cluster token of a
// server without users (no name) leaves the job's user as written.
Status BindUser(core::JobSpec& spec, const net::Identity* who) {
  if (who == nullptr || who->name.empty()) return Status::Ok();
  if (spec.user.empty()) {
    spec.user = who->name;
    return Status::Ok();
  }
  if (spec.user == who->name || who->role == net::Role::kAdmin) return Status::Ok();
  return PermissionDenied("the job names user \"" + spec.user + "\" but the token is " + who->name +
                          "'s: a user submits only as themselves (an admin may submit on another "
                          "user's behalf)");
}

Submitted Submit(CoreDriver& driver, Result<core::JobSpec> spec, const FileStore* files,
                 const net::Identity* who, const Access* access) {
  Submitted out;
  if (!spec.ok()) {
    out.status = spec.status();
    out.field = FieldOf(spec.status());
    return out;
  }
  if (Status bound = BindUser(*spec, who); !bound.ok()) {
    out.status = bound;
    out.field = "user";
    return out;
  }
  out.user = spec->user;
  const FileStore::Readable holder =
      access != nullptr && who != nullptr ? access->ContentsReader(*who) : nullptr;
  if (Status uploaded = CheckUploaded(*spec, files, holder, &out.field); !uploaded.ok()) {
    out.status = uploaded;
    return out;
  }
  if (Status after = CheckAfter(*spec, driver.scheduler(), access, who, &out.field); !after.ok()) {
    out.status = after;
    return out;
  }
  Result<JobId> id = driver.Submit(std::make_shared<const core::JobSpec>(std::move(*spec)));
  if (!id.ok()) {
    out.status = id.status();
    return out;
  }
  out.id = *id;
  // What no attached worker could run: said in the answer, and queued all
  // the same (a worker that fits may join).
  Result<std::vector<std::string>> unrunnable = driver.scheduler().Unrunnable(*id);
  if (unrunnable.ok()) out.warnings = std::move(*unrunnable);
  return out;
}

}  // namespace

void AddStateReadRoutes(net::Server& server, std::function<const core::Scheduler&()> view,
                        std::function<net::Handler(net::Handler)> wrap, bool explain,
                        const Access* access) {
  if (!wrap) wrap = [](net::Handler h) { return h; };
  server.Route("GET", "/api/v1/jobs",
               wrap([view, access](const net::Request& r, net::Responder done) {
                 const core::Scheduler& sched = view();
                 auto filter = JobFilter(r);
                 if (!filter.ok()) return done(ApiError(filter.status()));
                 std::vector<core::JobInfo> jobs;
                 for (JobId id : sched.Jobs()) {
                   Result<core::JobInfo> info = sched.GetJob(id);
                   if (!info.ok() || !(*filter)(*info)) continue;
                   // --hide-others: a user lists only their own jobs.
                   if (access != nullptr && r.identity && !access->MaySee(*r.identity, info->user))
                     continue;
                   jobs.push_back(std::move(*info));
                 }
                 done(net::JsonResponse(proto::EncodeJobList(jobs)));
               }));

  // Whether the requester reads the contents of a job of `owner`
  // (access.h); the queue's view of it otherwise.
  auto reads = [access](const net::Request& r, const std::string& owner) {
    return access == nullptr || !r.identity || access->MayReadContents(*r.identity, owner);
  };
  server.Route("GET", "/api/v1/jobs/{id}",
               wrap([view, reads](const net::Request& r, net::Responder done) {
                 const core::Scheduler& sched = view();
                 Result<JobId> id = ParseJobId(r.path_params.at("id"));
                 if (!id.ok()) return done(ApiError(id.status()));
                 Result<core::JobInfo> job = sched.GetJob(*id);
                 if (!job.ok()) return done(JobNotFound(job.status(), *id, sched));
                 Result<Page> page = ParsePage(r);
                 if (!page.ok()) return done(ApiError(page.status()));
                 Result<std::vector<TaskId>> ids = sched.JobTasks(*id, page->offset, page->limit);
                 if (!ids.ok()) return done(ApiError(ids.status()));
                 json body = proto::JobInfoJson(*job);
                 const bool hide = !reads(r, job->user);
                 json tasks = json::array();
                 for (const TaskId& t : *ids) {
                   Result<core::TaskInfo> info = sched.GetTask(t);
                   if (!info.ok()) continue;
                   tasks.push_back(proto::TaskInfoJson(*info));
                   if (hide) proto::HideContents(tasks.back());
                 }
                 body["tasks"] = std::move(tasks);
                 PutPage(body, *page, job->task_count);
                 done(Json(body));
               }));

  server.Route("GET", "/api/v1/tasks/{id}",
               wrap([view, explain, reads](const net::Request& r, net::Responder done) {
                 const core::Scheduler& sched = view();
                 Result<TaskId> id = ParseTaskId(r.path_params.at("id"));
                 if (!id.ok()) return done(ApiError(id.status()));
                 Result<core::TaskInfo> info = sched.GetTask(*id);
                 if (!info.ok()) return done(JobNotFound(info.status(), id->job, sched));
                 json body = proto::TaskInfoJson(*info);
                 Result<std::string> why =
                     explain ? sched.Explain(*id) : Result<std::string>(std::string());
                 body["explain"] = why.ok() ? *why : std::string();
                 body["attempts"] = AttemptsJson(sched.PastAttempts(*id), *info);
                 // What the task runs (its group's command, resources, retries), for the
                 // dashboard's task page.
                 if (Result<const core::TaskGroupSpec*> spec = sched.GetSpec(*id); spec.ok()) {
                   body["spec"] = proto::TaskGroupSpecJson(**spec);
                 }
                 if (Result<core::JobInfo> job = sched.GetJob(id->job);
                     !job.ok() || !reads(r, job->user)) {
                   proto::HideContents(body);
                 }
                 done(Json(body));
               }));
}

void AddRestRoutes(net::Server& server, CoreDriver& driver, WorkerChannel& channel,
                   StatusSource status) {
  const core::Scheduler& sched = driver.scheduler();

  const FileStore* files = channel.files();
  server.Route("POST", "/api/v1/jobs",
               [&driver, files, access = status.access](const net::Request& r,
                                                        net::Responder done) {
                 Submitted job = Submit(driver, proto::JobSpecFromJson(r.body), files,
                                        r.identity.get(), access);
                 if (!job.status.ok()) return done(ApiError(job.status, job.field));
                 // Answer once the job is durable: an acknowledged job survives a crash.
                 driver.AfterDurable(
                     [done, job = std::move(job)](Status s) {
                       if (!s.ok())
                         return done(ApiError(s.WithContext("job " + std::to_string(job.id))));
                       done(Json(job.Answer()));
                     },
                     CoreDriver::Flush::kSoon);
               });

  // Many jobs in one request, submitted in order and made durable by one
  // flush: a client submitting one task at a time in a loop (the Python
  // client) sends what piled up while its previous batch was answered.
  // Each job is answered on its own: a refused one does not stop the rest.
  server.Route(
      "POST", "/api/v1/jobs/batch",
      [&driver, files, access = status.access](const net::Request& r, net::Responder done) {
        Result<std::vector<Result<core::JobSpec>>> specs = proto::JobSpecBatchFromJson(r.body);
        if (!specs.ok()) return done(ApiError(specs.status(), FieldOf(specs.status())));
        auto jobs = std::make_shared<std::vector<Submitted>>();
        jobs->reserve(specs->size());
        for (Result<core::JobSpec>& spec : *specs) {
          jobs->push_back(Submit(driver, std::move(spec), files, r.identity.get(), access));
        }
        driver.AfterDurable(
            [done, jobs](Status s) {
              if (!s.ok()) return done(ApiError(s.WithContext("batch of jobs")));
              json answers = json::array();
              for (const Submitted& job : *jobs) answers.push_back(job.Answer());
              // The runner a task given as `python_runner` runs, by its
              // SHA-256: a Python client whose runner is the same sends
              // its calls so from its next batch on, without the runner.
              done(Json({{"jobs", std::move(answers)},
                         {"python_runner", std::string(proto::FunctionRunnerSha256())}}));
            },
            CoreDriver::Flush::kSoon);
      });

  AddStateReadRoutes(
      server, [&sched]() -> const core::Scheduler& { return sched; }, nullptr, true, status.access);

  server.Route("POST", "/api/v1/jobs/{id}/cancel",
               [&driver, &sched](const net::Request& r, net::Responder done) {
                 Result<JobId> id = ParseJobId(r.path_params.at("id"));
                 if (!id.ok()) return done(ApiError(id.status()));
                 Result<core::JobInfo> j = sched.GetJob(*id);
                 if (!j.ok()) return done(JobNotFound(j.status(), *id, sched));
                 if (j->done) {
                   // Nothing left to cancel: say so, with how it ended.
                   json counts = json::object();
                   for (int s = 0; s < core::kTaskStateCount; ++s) {
                     const uint64_t n = j->counts[static_cast<size_t>(s)];
                     if (n != 0) counts[std::string(core::TaskStateName(core::TaskState(s)))] = n;
                   }
                   return done(Json({{"id", *id}, {"canceled", false}, {"ended", true},
                                     {"counts", counts}}));
                 }
                 CancelJobSliced(driver, *j, [done, job = *id](uint64_t remaining) {
                   json answer = {{"id", job}, {"canceled", true}};
                   if (remaining > 0) answer["remaining"] = remaining;
                   done(Json(answer));
                 });
               });

  // Runs a job's failed and canceled tasks again (core::RetryJob): answers
  // how many, or why not (412 naming what to do first, 429 past the user's
  // max_queued). Who asked goes into each task's reason.
  server.Route("POST", "/api/v1/jobs/{id}/retry",
               [&driver, &sched](const net::Request& r, net::Responder done) {
                 Result<JobId> id = ParseJobId(r.path_params.at("id"));
                 if (!id.ok()) return done(ApiError(id.status()));
                 Result<uint64_t> n = sched.CheckRetry(*id);
                 if (n.status().code() == StatusCode::kNotFound) {
                   return done(JobNotFound(n.status(), *id, sched));
                 }
                 if (!n.ok()) return done(ApiError(n.status()));
                 driver.Handle(core::RetryJob{*id, r.identity ? r.identity->name : std::string()});
                 done(Json({{"id", *id}, {"retried", *n}}));
               });

  server.Route("POST", "/api/v1/tasks/{id}/cancel",
               [&driver, &sched](const net::Request& r, net::Responder done) {
                 Result<TaskId> id = ParseTaskId(r.path_params.at("id"));
                 if (!id.ok()) return done(ApiError(id.status()));
                 Result<core::TaskInfo> t = sched.GetTask(*id);
                 if (!t.ok()) return done(JobNotFound(t.status(), id->job, sched));
                 if (core::IsTerminal(t->state)) {
                   return done(Json({{"id", id->ToString()}, {"canceled", false}, {"ended", true},
                                     {"state", std::string(core::TaskStateName(t->state))}}));
                 }
                 driver.Handle(core::CancelTask{*id});
                 done(Json({{"id", id->ToString()}, {"canceled", true}}));
               });

  // The result cache (core/result_cache.h): forget the entry of a task,
  // those of a job, or all of the caller's (an admin's: everyone's). The
  // answer says how many went.
  auto forget = [&driver, &sched](core::ForgetCacheEntries e, net::Responder done) {
    const size_t before = sched.ResultCacheSize();
    driver.Handle(std::move(e));  // handled at once: a REST handler is outside the pump's drain
    done(Json({{"forgotten", before - sched.ResultCacheSize()}}));
  };
  server.Route("POST", "/api/v1/tasks/{id}/uncache",
               [&sched, forget](const net::Request& r, net::Responder done) {
                 Result<TaskId> id = ParseTaskId(r.path_params.at("id"));
                 if (!id.ok()) return done(ApiError(id.status()));
                 Result<core::TaskInfo> t = sched.GetTask(*id);
                 if (!t.ok()) return done(JobNotFound(t.status(), id->job, sched));
                 forget(core::ForgetCacheEntries{*id, 0, false, ""}, std::move(done));
               });
  server.Route("POST", "/api/v1/jobs/{id}/uncache",
               [&sched, forget](const net::Request& r, net::Responder done) {
                 Result<JobId> id = ParseJobId(r.path_params.at("id"));
                 if (!id.ok()) return done(ApiError(id.status()));
                 Result<core::JobInfo> j = sched.GetJob(*id);
                 if (!j.ok()) return done(JobNotFound(j.status(), *id, sched));
                 forget(core::ForgetCacheEntries{TaskId(), *id, false, ""}, std::move(done));
               });
  server.Route(
      "POST", "/api/v1/cache/forget", [forget](const net::Request& r, net::Responder done) {
        // Without identities (the cluster token alone) the caller is
        // the admin.
        const bool admin = !r.identity || r.identity->role == net::Role::kAdmin;
        forget(
            core::ForgetCacheEntries{TaskId(), 0, true, admin ? std::string() : r.identity->name},
            std::move(done));
      });

  // A task's outputs with where to fetch each (the holder's file service)
  // and a grant for the client: `drover get` downloads from the worker, not
  // through the server.
  server.Route("GET", "/api/v1/tasks/{id}/outputs",
               [&sched, &channel, &driver, released = status.outputs_released](
                   const net::Request& r, net::Responder done) {
                 Result<TaskId> id = ParseTaskId(r.path_params.at("id"));
                 if (!id.ok()) return done(ApiError(id.status()));
                 Result<core::TaskInfo> info = sched.GetTask(*id);
                 if (!info.ok()) return done(JobNotFound(info.status(), id->job, sched));
                 // Past --keep-outputs the holder may have evicted them: said
                 // here rather than as a 404 from the worker.
                 if (info->outcome && !info->outcome->outputs.empty() && released) {
                   if (std::string note = released(*id, driver.Now()); !note.empty()) {
                     net::Response gone = net::ErrorResponse(NotFound(note));
                     gone.body = json{{"error",
                                       {{"code", "not_found"},
                                        {"released", true},
                                        {"message", std::move(note)}}}}
                                     .dump(-1, ' ', false, json::error_handler_t::replace);
                     return done(std::move(gone));
                   }
                 }
                 json files = json::array();
                 if (info->outcome) {
                   // Every holder serving files now: the original, then copies.
                   json holders = json::array();
                   std::vector<WorkerId> ids{info->outcome->outputs_on};
                   ids.insert(ids.end(), info->outcome->replicas.begin(),
                              info->outcome->replicas.end());
                   for (WorkerId w : ids) {
                     if (std::optional<proto::FileSource> s = channel.FileSourceOf(w)) {
                       holders.push_back(json{{"worker", s->worker},
                                              {"host", s->host},
                                              {"port", s->port},
                                              {"fingerprint", s->fingerprint}});
                     }
                   }
                   for (const core::OutputFile& f : info->outcome->outputs) {
                     json sources = holders;
                     files.push_back(json{{"name", f.name},
                                          {"size", f.size},
                                          {"sha256", f.sha256},
                                          {"sources", std::move(sources)},
                                          {"grant", channel.Grant(f.sha256, "client")}});
                   }
                 }
                 done(Json(json{{"task", id->ToString()},
                                {"state", core::TaskStateName(info->state)},
                                {"outputs", std::move(files)}}));
               });
  server.Route("GET", "/api/v1/workers", [&sched](const net::Request&, net::Responder done) {
    std::vector<core::WorkerInfo> workers;
    for (WorkerId w : sched.Workers()) {
      Result<core::WorkerInfo> info = sched.GetWorker(w);
      if (info.ok()) workers.push_back(std::move(*info));
    }
    done(net::JsonResponse(proto::EncodeWorkerList(workers)));
  });

  for (bool drain : {true, false}) {
    server.Route("POST", drain ? "/api/v1/workers/{id}/drain" : "/api/v1/workers/{id}/undrain",
                 [&driver, &sched, &channel, drain](const net::Request& r, net::Responder done) {
                   unsigned long raw = 0;
                   const std::string& text = r.path_params.at("id");
                   if (text.empty() || text.size() > 9 ||
                       !std::all_of(text.begin(), text.end(), ::isdigit)) {
                     return done(ApiError(InvalidArgument("worker id: expected a number, got \"" +
                                                       text + "\"")));
                   }
                   raw = std::stoul(text);
                   const WorkerId w = static_cast<WorkerId>(raw);
                   if (Result<core::WorkerInfo> info = sched.GetWorker(w); !info.ok()) {
                     return done(ApiError(info.status()));
                   }
                   driver.Handle(core::WorkerDrained{w, drain});
                   // Tell the agent too; it may be offline (drained anyway).
                   (void)channel.Send(w, proto::Drain{drain, "requested through the API"});
                   done(Json({{"id", w}, {"drained", drain}}));
                 });
  }

  server.Route("GET", "/api/v1/status",
               [&driver, &sched, &channel, status](const net::Request&, net::Responder done) {
                 const DriverStats& st = driver.stats();
                 json counts = json::object();
                 std::array<uint64_t, core::kTaskStateCount> totals{};
                 const std::vector<JobId> jobs = sched.Jobs();
                 for (JobId id : jobs) {
                   Result<core::JobInfo> info = sched.GetJob(id);
                   if (!info.ok()) continue;
                   for (int s = 0; s < core::kTaskStateCount; ++s) totals[s] += info->counts[s];
                 }
                 for (int s = 0; s < core::kTaskStateCount; ++s) {
                   counts[std::string(core::TaskStateName(static_cast<core::TaskState>(s)))] =
                       totals[s];
                 }
                 size_t connected = 0;
                 const std::vector<WorkerId> workers = sched.Workers();
                 for (WorkerId w : workers) connected += channel.connected(w) ? 1 : 0;
                 const Time now = driver.Now();
                 const HandoffSummary handoff = channel.handoffs().Summary();
                 const HandoffSummary sync = driver.sync_summary();
                 json body{
                     {"version", status.version},
                     {"started_at", proto::FormatRfc3339(status.started_at)},
                     {"uptime_s", std::chrono::duration_cast<std::chrono::seconds>(
                                      now - status.started_at)
                                      .count()},
                     {"jobs", jobs.size()},
                     {"tasks", counts},
                     {"workers", workers.size()},
                     {"workers_connected", connected},
                     {"connections", status.connections ? status.connections() : 0},
                     {"journal_bytes", status.journal_bytes ? status.journal_bytes() : 0},
                     {"journal_discarded_bytes", st.discarded_bytes},
                     {"restored_records", st.restored_records},
                     {"records", st.records},
                     {"events", st.events},
                     {"ignored_events", st.ignored_events},
                     {"flushes", st.flushes},
                     {"compactions", st.compactions},
                     {"append_errors", st.append_errors},
                     {"scheduler_bytes", sched.ApproxBytes()},
                     {"keep_finished_s", std::chrono::duration_cast<std::chrono::seconds>(
                                             status.keep_finished)
                                             .count()},
                     {"handoff_us",
                      {{"count", handoff.count},
                       {"p50", handoff.p50_us},
                       {"p99", handoff.p99_us},
                       {"max", handoff.max_us}}},
                     {"journal_sync_us",
                      {{"count", sync.count},
                       {"p50", sync.p50_us},
                       {"p99", sync.p99_us},
                       {"max", sync.max_us}}},
                 };
                 // Per-user limits (--quota), in the job file's units.
                 auto quota_json = [](const core::UserQuota& q) {
                   json j = json::object();
                   if (q.max_cpus_milli != 0) j["cpus"] = FormatCpus(q.max_cpus_milli);
                   if (q.max_gpus != 0) j["gpus"] = FormatGpus(q.max_gpus);
                   if (q.max_tasks != 0) j["tasks"] = q.max_tasks;
                   if (q.max_mem_bytes != 0) j["mem_bytes"] = q.max_mem_bytes;
                   if (q.max_queued != 0) j["queued"] = q.max_queued;
                   return j;
                 };
                 json quotas = json::object();
                 for (const auto& [user, q] : sched.config().users.quotas)
                   quotas[user] = quota_json(q);
                 const json everyone = quota_json(sched.config().users.default_quota);
                 if (!everyone.empty()) quotas["*"] = everyone;
                 body["quotas"] = quotas;
                 done(Json(body));
               });

  server.Route("GET", "/healthz", [](const net::Request&, net::Responder done) {
    done(net::TextResponse("ok\n"));
  });
  server.AllowPublic("/healthz");
}

}  // namespace drover::server
