// Access: what each role may do (roles in net/identity.h), asked
// by net::Server for every authenticated request before its body is read
// (ServerOptions::authorize), and by the handlers that list jobs.
//
// Each route has one rule: which roles may use it, and, for a route about
// one job or task ("/api/v1/jobs/{id}", "/api/v1/tasks/{id}/cancel"),
// whether a `user` must own that job:
//
//   any      every role (the dashboard's files, /healthz, whoami)
//   read     admin, viewer, user: the queue (who runs what, states,
//            resources, times, reasons); with hide_others (drover server
//            --hide-others) a user reads only their own jobs
//   contents admin, viewer, and a user who may read the job's contents:
//            its logs, result, outputs and their grants (MayReadContents)
//   submit   admin, user (a user's job is their own: rest_api.cc)
//   change   admin, user on their own jobs only (cancel)
//   files    admin, user, worker (the file store: inputs, checkpoints)
//   worker   admin, worker (the worker channel, pulls through the server)
//   admin    admin only (drain, allocations, users, audit)
//
// Contents. What a job's tasks leave (logs, $DROVER_RESULT, outputs,
// checkpoints, the files uploaded for it, the environment it was given) is
// its user's: only they, the members of a group of theirs whose config says
// share_outputs = true, admins and viewers read it, as the operating system
// lets only the task's account read its files on the worker. Routes that
// show a task to everyone (the queue) leave these out for anyone else
// (proto::HideContents); routes that are only contents refuse them.
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
#include "core/scheduler.h"
#include "net/http_types.h"
#include "net/identity.h"
#include "net/router.h"

namespace drover::server {

enum class Need : uint8_t { kAny, kRead, kContents, kSubmit, kChange, kFiles, kWorker, kAdmin };
// Which id a route's {id} is, for the rules that look at a job's owner.
enum class Scope : uint8_t { kNone, kJob, kTask };

struct AccessOptions {
  bool hide_others = false;  // users read only their own jobs
  // The user a job belongs to; nullopt for a job the server does not know
  // (the handler answers 404 then).
  std::function<std::optional<std::string>(JobId)> owner_of;
  // Whether user `reader` may read the contents of `owner`'s jobs although
  // they are not theirs (a group that shares outputs); null: never.
  std::function<bool(const std::string& reader, const std::string& owner)> shares_contents;
};

class Access {
 public:
  explicit Access(AccessOptions options);

  // ServerOptions::authorize: nullopt, or the 403 that refuses `r`.
  std::optional<net::Response> Authorize(const net::Request& r) const;

  // Whether `who` may see a job of `owner` (lists, the event stream): with
  // hide_others a user sees their own and those their group shares.
  bool MaySee(const net::Identity& who, const std::string& owner) const;
  // Whether what `who` sees must be filtered job by job (a user, with
  // hide_others), and whether they may see job `job` (unknown: no).
  bool Filters(const net::Identity& who) const;
  bool MaySeeJob(const net::Identity& who, JobId job) const;
  // Whether `who` may read the contents of a job of `owner` (see above):
  // every role but a user may; a user, their own jobs and those their
  // group shares. Of job `job` (unknown: only the roles that read all).
  bool MayReadContents(const net::Identity& who, const std::string& owner) const;
  bool MayReadContentsOfJob(const net::Identity& who, JobId job) const;
  // MayReadContents of `who` as a function of the owner, for the file
  // store's holders; null for the roles that read everything.
  std::function<bool(const std::string& owner)> ContentsReader(const net::Identity& who) const;

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

// Whether `reader` and `owner` are members of one group of `policy` whose
// members share their contents (UserPolicy::sharing_groups).
bool SharesContents(const core::UserPolicy& policy, const std::string& reader,
                    const std::string& owner);

// "403" with `message`, code permission_denied.
net::Response Forbidden(const std::string& message);

}  // namespace drover::server

#endif  // DROVER_SERVER_ACCESS_H_
