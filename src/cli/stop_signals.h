// StopSignals: SIGINT and SIGTERM (and SIGHUP, for a server's config
// reload) as events on an EventLoop (signalfd), so
// `drover server`, `worker` and `up` stop cleanly on the loop thread: the
// journal is flushed and connections closed before exit.
//
// Usage: BlockStopSignals() first thing in the role's command (before any
// thread starts, so no thread takes them asynchronously), then a StopSignals
// on the loop. Client commands (submit --wait, wait, logs -f) leave the
// signals alone: Ctrl-C ends them at once, and the job goes on.
//
// Thread safety: BlockStopSignals from the role's command before threads; StopSignals
// belongs to its loop's thread.
#ifndef DROVER_CLI_STOP_SIGNALS_H_
#define DROVER_CLI_STOP_SIGNALS_H_

#include <functional>
#include <memory>

#include "common/status.h"
#include "net/event_loop.h"

namespace drover::cli {

// Blocks SIGINT and SIGTERM in the calling thread (and threads it starts
// later). Children started by the worker get a clean mask from the
// executor. With `reload`, SIGHUP too (`drover server` re-reads its config
// file on it; without, SIGHUP keeps its default action).
void BlockStopSignals(bool reload = false);

class StopSignals {
 public:
  // Calls `on_signal` on the loop for SIGINT and SIGTERM, and SIGHUP with
  // `reload` (block them first: BlockStopSignals(reload)).
  // Errors: the signalfd cannot be made or watched (kInternal).
  static Result<std::unique_ptr<StopSignals>> Watch(net::EventLoop& loop,
                                                    std::function<void(int signo)> on_signal,
                                                    bool reload = false);
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  StopSignals(int fd, std::function<void(int)> on_signal);
  int fd_;
  std::function<void(int)> on_signal_;
  std::unique_ptr<net::FdWatch> watch_;
};

}  // namespace drover::cli

#endif  // DROVER_CLI_STOP_SIGNALS_H_
