// RestApi: the client REST routes under /api/v1 (documented with their
// shapes in src/server/README.md). Handlers run on the loop thread, read the
// scheduler directly and change it only through CoreDriver events. A
// submission is answered once its job record is durable.
//
// Thread safety: none; everything runs on the server's event loop.
#ifndef DROVER_SERVER_REST_API_H_
#define DROVER_SERVER_REST_API_H_

#include <functional>
#include <string>
#include <string_view>

#include "net/server.h"
#include "server/access.h"
#include "server/core_driver.h"
#include "server/worker_channel.h"

namespace drover::server {

// What GET /api/v1/status reports beyond the scheduler's own numbers.
struct StatusSource {
  std::string version;
  Duration keep_finished = Duration::zero();  // --keep-finished, for status
  Time started_at;
  std::function<uint64_t()> journal_bytes;
  std::function<size_t()> connections;
  // Why a task's outputs are no longer kept on their holder
  // (OutputRetention::ReleasedNote), empty while they are; GET
  // /api/v1/tasks/{id}/outputs answers 404 with it ("released": true).
  // Null: never released.
  std::function<std::string(TaskId, Time)> outputs_released;
  // Who may see which job (--hide-others filters the job list); null: all.
  const Access* access = nullptr;
};

// Registers the routes that only read the jobs and tasks of `view()`:
// GET /api/v1/jobs, /api/v1/jobs/{id} and /api/v1/tasks/{id} (the leader's
// scheduler, or a standby's copy rebuilt from the journal). `wrap`, when
// set, wraps each handler (a standby adds its staleness check). Without
// `explain`, a task's "explain" is empty (a standby's copy knows no
// workers, so it cannot say why a task waits). A task's "attempts" list
// the past attempts the scheduler kept, then the latest.
void AddStateReadRoutes(net::Server& server, std::function<const core::Scheduler&()> view,
                        std::function<net::Handler(net::Handler)> wrap = nullptr,
                        bool explain = true, const Access* access = nullptr);

// The API's error answer for `s`: its HTTP status and the JSON error body
// (proto::EncodeErrorBody), naming `field` when the error is about one.
net::Response ApiError(const Status& s, std::string_view field = {});

// The answer for a job (or a task of a job) that `s` (kNotFound) says is
// not there: a 404 as ApiError gives, unless the id was used and its job was
// forgotten by retention (retention.h): then the message says it expired
// and the error object has "expired": true.
net::Response JobNotFound(const Status& s, JobId job, const core::Scheduler& sched);
std::string ExpiredMessage(JobId job);

// Registers every REST route on `server` (AddStateReadRoutes among them).
void AddRestRoutes(net::Server& server, CoreDriver& driver, WorkerChannel& channel,
                   StatusSource status);

}  // namespace drover::server

#endif  // DROVER_SERVER_REST_API_H_
