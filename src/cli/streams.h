// Streams: the two WebSocket reads of the CLI, each on a private EventLoop
// run on the calling thread until it is over.
//
//   FollowJob  /api/v1/events?job=N   until every task of the job is
//              terminal (JobWatch). If the connection drops (say the server
//              restarts) it reconnects with backoff for up to
//              `reconnect_for`; the server's snapshot on reconnect fills in
//              whatever happened meanwhile, so nothing is missed.
//   FollowLog  /api/v1/tasks/{id}/logs/follow?stream=S  until the server's
//              final {"type":"eof"} (the task ended) or an error.
//
// Thread safety: blocking calls; one per thread, never from a loop thread.
#ifndef DROVER_CLI_STREAMS_H_
#define DROVER_CLI_STREAMS_H_

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "cli/job_watch.h"
#include "common/ids.h"
#include "common/status.h"
#include "common/time.h"
#include "net/client_options.h"

namespace drover::cli {

// Called for each event that changed the watch, after applying it.
using JobChangeFn = std::function<void(const TaskEventView&, const JobWatch&)>;

// Returns OK once `watch` is done (whatever the tasks' outcome). Errors:
// kUnauthenticated / kFailedPrecondition (wrong token, fingerprint) at
// once; kUnavailable when the server stayed unreachable for
// `reconnect_for`.
Status FollowJob(const net::ClientOptions& options, JobId job, JobWatch& watch,
                 const JobChangeFn& on_change, Duration reconnect_for = Seconds(60));

// What SubmitAndFollowJob did.
struct SubmitFollowResult {
  // OK once the watch is done; otherwise the submission's error (as
  // ApiClient::Post: the server's error, kUnavailable, ...) or, once the job
  // exists, FollowJob's.
  Status status;
  std::optional<JobId> job;  // set as soon as the server accepted the job
  // The server is a standby and named its leader (HTTP 307): nothing was
  // submitted; send the job through ApiClient, which follows the redirect.
  bool redirected = false;
};

// `submit --wait` on one connection: POSTs `spec_json` to /api/v1/jobs and
// upgrades the same connection (keep-alive) to the job's event stream,
// which then goes on as FollowJob (reconnects included). `on_submitted`
// gets the job's id when the server answers. A submission that fails is
// never sent again (the job may exist), and only `options`' own server is
// tried: callers with standbys to fail over to use ApiClient.
SubmitFollowResult SubmitAndFollowJob(const net::ClientOptions& options, std::string spec_json,
                                      JobWatch& watch,
                                      const std::function<void(JobId)>& on_submitted,
                                      const JobChangeFn& on_change,
                                      Duration reconnect_for = Seconds(60));

// Calls `on_bytes` with the log's bytes as they come. OK at the end of the
// log; the server's error message otherwise (kNotFound for an unknown task).
Status FollowLog(const net::ClientOptions& options, const std::string& task,
                 const std::string& stream, const std::function<void(std::string_view)>& on_bytes);

}  // namespace drover::cli

#endif  // DROVER_CLI_STREAMS_H_
