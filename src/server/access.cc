#include "server/access.h"

#include <algorithm>

#include "common/status.h"
#include "net/http_types.h"

namespace drover::server {

using net::Role;

net::Response Forbidden(const std::string& message) {
  return net::ErrorResponse(403, StatusCode::kPermissionDenied, message);
}

bool SharesContents(const core::UserPolicy& policy, const std::string& reader,
                    const std::string& owner) {
  for (const std::string& group : policy.sharing_groups) {
    auto members = policy.groups.find(group);
    if (members == policy.groups.end()) continue;
    const std::vector<std::string>& m = members->second;
    if (std::find(m.begin(), m.end(), reader) != m.end() &&
        std::find(m.begin(), m.end(), owner) != m.end()) {
      return true;
    }
  }
  return false;
}

Access::Access(AccessOptions options) : options_(std::move(options)) {
  // The dashboard's files and health are public (net::Server::AllowPublic);
  // with a token they are anyone's too.
  for (const char* p : {"/", "/index.html", "/assets/*", "/healthz", "/api/v1/whoami"}) {
    Add("GET", p, Need::kAny);
  }
  Add("GET", "/api/v1/jobs", Need::kRead);
  Add("POST", "/api/v1/jobs", Need::kSubmit);
  Add("POST", "/api/v1/jobs/batch", Need::kSubmit);
  Add("GET", "/api/v1/jobs/{id}", Need::kRead, Scope::kJob, "read");
  Add("GET", "/api/v1/jobs/{id}/report", Need::kRead, Scope::kJob, "read the report of");
  Add("POST", "/api/v1/jobs/{id}/cancel", Need::kChange, Scope::kJob, "cancel");
  Add("POST", "/api/v1/jobs/{id}/retry", Need::kChange, Scope::kJob, "retry");
  Add("GET", "/api/v1/tasks/{id}", Need::kRead, Scope::kTask, "read");
  Add("POST", "/api/v1/tasks/{id}/cancel", Need::kChange, Scope::kTask, "cancel");
  Add("POST", "/api/v1/tasks/{id}/uncache", Need::kChange, Scope::kTask,
      "forget the cached result of");
  Add("POST", "/api/v1/jobs/{id}/uncache", Need::kChange, Scope::kJob,
      "forget the cached results of");
  Add("POST", "/api/v1/cache/forget", Need::kSubmit);
  Add("GET", "/api/v1/tasks/{id}/logs", Need::kContents, Scope::kTask, "read the logs of");
  Add("GET", "/api/v1/tasks/{id}/logs/follow", Need::kContents, Scope::kTask, "follow the logs of");
  Add("GET", "/api/v1/tasks/{id}/outputs", Need::kContents, Scope::kTask, "read the outputs of");
  Add("GET", "/api/v1/events", Need::kRead);
  Add("GET", "/api/v1/status", Need::kRead);
  Add("GET", "/api/v1/workers", Need::kRead);
  Add("GET", "/api/v1/utilization", Need::kRead);
  Add("GET", "/metrics", Need::kRead);
  Add("GET", "/api/v1/quotas", Need::kRead);
  Add("GET", "/api/v1/quotas/{user}", Need::kRead);
  Add("GET", "/api/v1/allocs", Need::kRead);
  Add("POST", "/api/v1/allocs", Need::kAdmin);
  Add("POST", "/api/v1/allocs/{id}/remove", Need::kAdmin);
  Add("POST", "/api/v1/workers/{id}/drain", Need::kAdmin);
  Add("POST", "/api/v1/workers/{id}/undrain", Need::kAdmin);
  Add("GET", "/api/v1/users", Need::kAdmin);
  Add("POST", "/api/v1/users", Need::kAdmin);
  Add("POST", "/api/v1/users/{name}/revoke", Need::kAdmin);
  Add("POST", "/api/v1/users/{name}/rotate", Need::kAdmin);
  Add("GET", "/api/v1/audit", Need::kAdmin);
  Add("GET", "/api/v1/worker", Need::kWorker);
  Add("POST", "/api/v1/files/{sha256}/pull", Need::kWorker);
  for (const char* m : {"GET", "HEAD", "PUT"}) Add(m, "/api/v1/files/{sha256}", Need::kFiles);
}

void Access::Add(const char* method, const char* pattern, Need need, Scope scope,
                 const char* what) {
  rules_.Add(method, pattern, Rule{need, scope, what});
}

bool Access::HasRule(const std::string& method, const std::string& path) const {
  return rules_.Find(method, path).ok();
}

bool Access::MaySee(const net::Identity& who, const std::string& owner) const {
  // A group that shares its contents sees its members' jobs too.
  return !Filters(who) || MayReadContents(who, owner);
}

bool Access::Filters(const net::Identity& who) const {
  return who.role == Role::kUser && options_.hide_others;
}

bool Access::MaySeeJob(const net::Identity& who, JobId job) const {
  if (!Filters(who)) return true;
  if (!options_.owner_of) return false;
  std::optional<std::string> owner = options_.owner_of(job);
  return owner && MaySee(who, *owner);
}

bool Access::MayReadContents(const net::Identity& who, const std::string& owner) const {
  if (who.role != Role::kUser) return true;
  if (who.name == owner) return true;
  return options_.shares_contents && !owner.empty() && options_.shares_contents(who.name, owner);
}

std::function<bool(const std::string&)> Access::ContentsReader(const net::Identity& who) const {
  if (who.role != Role::kUser) return nullptr;
  return [this, who](const std::string& owner) { return MayReadContents(who, owner); };
}

bool Access::MayReadContentsOfJob(const net::Identity& who, JobId job) const {
  if (who.role != Role::kUser) return true;
  if (!options_.owner_of) return false;
  std::optional<std::string> owner = options_.owner_of(job);
  return owner && MayReadContents(who, *owner);
}

namespace {

std::string_view NeedText(Need need) {
  switch (need) {
    case Need::kAny:
      return "everyone";
    case Need::kRead:
    case Need::kContents:
      return "admins, users and viewers";
    case Need::kSubmit:
    case Need::kChange:
      return "admins and users";
    case Need::kFiles:
      return "admins, users and workers";
    case Need::kWorker:
      return "admins and workers";
    case Need::kAdmin:
      return "admins";
  }
  return "admins";
}

bool RoleMeets(Role role, Need need) {
  if (role == Role::kAdmin) return true;
  switch (need) {
    case Need::kAny:
      return true;
    case Need::kRead:
    case Need::kContents:
      return role == Role::kUser || role == Role::kViewer;
    case Need::kSubmit:
    case Need::kChange:
      return role == Role::kUser;
    case Need::kFiles:
      return role == Role::kUser || role == Role::kWorker;
    case Need::kWorker:
      return role == Role::kWorker;
    case Need::kAdmin:
      return false;
  }
  return false;
}

}  // namespace

std::optional<net::Response> Access::Authorize(const net::Request& r) const {
  if (!r.identity) return std::nullopt;  // a public path without a token
  const net::Identity& who = *r.identity;
  const std::string name = who.name.empty() ? std::string("the cluster token") : who.name;
  auto match = rules_.Find(r.method, r.path);
  if (!match.ok()) {
    // No rule: the admin's alone (an unknown path gets its 404 or 405).
    if (who.role == Role::kAdmin) return std::nullopt;
    return Forbidden(name + " (" + std::string(net::RoleName(who.role)) + ") may not " + r.method +
                     " " + net::Printable(r.path) + ": only admins may");
  }
  const Rule& rule = *match->target;
  if (!RoleMeets(who.role, rule.need)) {
    return Forbidden(name + " (" + std::string(net::RoleName(who.role)) + ") may not " + r.method +
                     " " + net::Printable(r.path) + ": only " + std::string(NeedText(rule.need)) +
                     " may");
  }
  if (rule.scope == Scope::kNone || who.role != Role::kUser) return std::nullopt;
  if (rule.need == Need::kRead && !options_.hide_others) return std::nullopt;
  // A user and one job: theirs (or, to read it, their sharing group's)?
  auto id = match->params.find("id");
  if (id == match->params.end() || !options_.owner_of) return std::nullopt;
  JobId job = 0;
  std::string shown = id->second;
  if (rule.scope == Scope::kJob) {
    Result<JobId> j = ParseJobId(id->second);
    if (!j.ok()) return std::nullopt;  // the handler names the bad id
    job = *j;
    shown = "job " + shown;
  } else {
    Result<TaskId> t = ParseTaskId(id->second);
    if (!t.ok()) return std::nullopt;
    job = t->job;
    shown = "task " + shown;
  }
  std::optional<std::string> owner = options_.owner_of(job);
  if (!owner || *owner == who.name) return std::nullopt;
  if (rule.need != Need::kChange && MayReadContents(who, *owner)) return std::nullopt;
  const std::string why =
      options_.hide_others && rule.need != Need::kChange
          ? "the server hides other users' jobs (--hide-others)"
      : rule.need == Need::kContents
          ? "a job's logs, results and files are for its user, admins and viewers"
          : "a user may cancel, retry and change only their own jobs";
  return Forbidden(name + " may not " + rule.what + " " + shown + " of " +
                   (owner->empty() ? std::string("another user") : *owner) + ": " + why);
}

}  // namespace drover::server
