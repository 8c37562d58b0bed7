// Access: what each role may do (issue 22; roles in net/identity.h), asked
// by net::Server for every authenticated request before its body is read
// (ServerOptions::authorize), and by the handlers that list jobs.
//
// Each route has one rule: which roles may use it, and, for a route about
// one job or task ("/api/v1/jobs/{id}", "/api/v1/tasks/{id}/cancel"),
// whether a `user` must own that job:
//
//   any      every role (the dashboard's files, /healthz, whoami)
//   read     admin, viewer, user; with hide_others (drover server
//            --hide-others) a user reads only their own jobs
//   submit   admin, user (a user's job is their own: rest_api.cc)
//   change   admin, user on their own jobs only (cancel)
//   files    admin, user, worker (the file store: inputs, checkpoints)
//   worker   admin, worker (the worker channel, pulls through the server)
//   admin    admin only (drain, allocations, users, audit)
//
// A route with no rule is the admin's alone, so a route added without one
// is closed rather than open. A refusal is a 403 whose message names the user, what was asked
// and the rule: "ana may not cancel job 12 of bob: a user may change only
// their own jobs".
//
// Thread safety: none; used on the server's event loop.
#ifndef DROVER_SERVER_ACCESS_H_
#define DROVER_SERVER_ACCESS_H_

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/ids.h"
#include "net/http_types.h"
#include "net/identity.h"
#include "net/router.h"

namespace drover::server {

enum class Need : uint8_t { kAny, kRead, kSubmit, kChange, kFiles, kWorker, kAdmin };
// Which id a route's {id} is, for the rules that look at a job's owner.
enum class Scope : uint8_t { kNone, kJob, kTask };

struct AccessOptions {
  bool hide_others = false;  // users read only their own jobs
  // The user a job belongs to; nullopt for a job the server does not know
  // (the handler answers 404 then).
  std::function<std::optional<std::string>(JobId)> owner_of;
};

class Access {
 public:
  explicit Access(AccessOptions options);

  // ServerOptions::authorize: nullopt, or the 403 that refuses `r`.
  std::optional<net::Response> Authorize(const net::Request& r) const;

  // Whether `who` may see a job of `owner` (lists, the event stream).
  bool MaySee(const net::Identity& who, const std::string& owner) const;
  // Whether what `who` sees must be filtered job by job (a user, with
  // hide_others), and whether they may see job `job` (unknown: no).
  bool Filters(const net::Identity& who) const;
  bool MaySeeJob(const net::Identity& who, JobId job) const;

  // The rule of a route, as registered (tests: every route has one).
  bool HasRule(const std::string& method, const std::string& path) const;

  bool hide_others() const { return options_.hide_others; }

 private:
  struct Rule {
    Need need = Need::kAdmin;
    Scope scope = Scope::kNone;
    const char* what = "";  // "cancel", "read"
  };
  void Add(const char* method, const char* pattern, Need need, Scope scope = Scope::kNone,
           const char* what = "");

  AccessOptions options_;
  net::Router<Rule> rules_;
};

// "403" with `message`, code permission_denied.
net::Response Forbidden(const std::string& message);

}  // namespace drover::server

#endif  // DROVER_SERVER_ACCESS_H_
