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

// Calls `on_bytes` with the log's bytes as they come. OK at the end of the
// log; the server's error message otherwise (kNotFound for an unknown task).
Status FollowLog(const net::ClientOptions& options, const std::string& task,
                 const std::string& stream, const std::function<void(std::string_view)>& on_bytes);

}  // namespace drover::cli

#endif  // DROVER_CLI_STREAMS_H_
