// Observability: what the server shell measures about itself and the
// cluster, and the routes that show it (docs/metrics.md):
//
//   GET /metrics                    Prometheus text format 0.0.4
//   GET /api/v1/utilization?since_ms=N   the utilization ring (metrics/utilization.h)
//   GET /api/v1/jobs/{id}/report    a job's report (metrics/job_report.h),
//                                   one page of task rows (server/paging.h)
//
// All three need the cluster token like every other route (a Prometheus
// scrape config sets `authorization: {credentials_file: ...}`).
//
// It samples the cluster into the ring on its own timer (`interval`), keeps
// the scheduling-latency histogram (a task becoming runnable -> its
// assignment, from the core's TaskStateChanged commands) and the journal
// durability histogram (CoreDriver's durable observer). The pure pieces
// (sampling, the ring, the report, the text format) live in src/metrics.
//
// Thread safety: none; everything runs on the server's event loop.
#ifndef DROVER_SERVER_OBSERVABILITY_H_
#define DROVER_SERVER_OBSERVABILITY_H_

#include <functional>
#include <memory>

#include "common/time.h"
#include "core/commands.h"
#include "metrics/prom_text.h"
#include "metrics/ready_tracker.h"
#include "metrics/utilization.h"
#include "net/event_loop.h"
#include "net/server.h"
#include "server/core_driver.h"
#include "server/worker_channel.h"

namespace drover::server {

struct ObservabilityOptions {
  Duration interval = Seconds(1);  // utilization sampling period
  size_t capacity = 3600;          // samples kept (an hour at 1 s)
  Time started_at;                 // the server's start (restored tasks are not timed)
  std::function<uint64_t()> journal_bytes;
  // HTTP body bytes the server sent and received (net::Server's counters):
  // files move between workers, and these show they did not come here.
  std::function<uint64_t()> body_bytes_sent;
  std::function<uint64_t()> body_bytes_received;
  // Files fetched from a holder into the server's store for a worker that
  // could not reach it (file_relay.h): bytes received from holders, and
  // files relayed.
  std::function<uint64_t()> relayed_bytes;
  std::function<uint64_t()> relayed_files;
};

class Observability {
 public:
  // References must outlive this object. Starts sampling at once.
  Observability(net::EventLoop& loop, CoreDriver& driver, WorkerChannel& channel,
                ObservabilityOptions options);
  ~Observability();
  Observability(const Observability&) = delete;
  Observability& operator=(const Observability&) = delete;

  // Registers the three routes (before the server starts).
  void AddRoutes(net::Server& server);

  // Feed of the core's state changes (CommandSink::StateChanged).
  void OnStateChanged(const core::TaskStateChanged& change, Time at);

  // Stops sampling.
  void Stop();

  // The /metrics body as of now.
  std::string MetricsText();

 private:
  void Sample();

  net::EventLoop& loop_;
  CoreDriver& driver_;
  WorkerChannel& channel_;
  ObservabilityOptions options_;
  metrics::UtilizationRing ring_;
  metrics::PromHistogram scheduling_latency_;
  metrics::PromHistogram journal_sync_;
  metrics::ReadyTracker ready_;
  std::unique_ptr<net::Timer> timer_;
  // Expires with this object: a report built over several loop turns stops.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace drover::server

#endif  // DROVER_SERVER_OBSERVABILITY_H_
