// FilePlane::Impl: the state behind file_plane.h's FilePlane (the cache, the
// file service, the threads of transfers and hashing, fetches in flight,
// pinned inputs, checkpoint saves, the counters), and the helpers its parts
// share. Private to the file plane: only its .cc files include it
// (file_plane.cc: Start, the destructor, shared helpers;
// file_plane_serve.cc: the service; file_plane_fetch.cc: inputs and
// uploads; file_plane_outputs.cc: outputs kept and replicas;
// file_plane_checkpoints.cc: checkpoints).
//
// Threading: file_plane.h's. Members belong to the loop thread, except
// `stopping` (atomic) and `stats` (under stats_mu), which OnThread's work
// reads or updates on its threads.
#ifndef DROVER_WORKER_AGENT_FILE_PLANE_IMPL_H_
#define DROVER_WORKER_AGENT_FILE_PLANE_IMPL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "core/model.h"
#include "net/client_options.h"
#include "net/event_loop.h"
#include "net/http_types.h"
#include "net/server.h"
#include "proto/messages.h"
#include "worker/agent/file_plane.h"
#include "worker/files/fetch.h"
#include "worker/files/file_cache.h"

namespace drover::worker {

// Blob `sha256` of the server's file store (GET /api/v1/files/{sha256}):
// uploaded client files and checkpoints.
Source ServerFileSource(const net::ClientOptions& server, const std::string& sha256);

struct FilePlane::Impl : std::enable_shared_from_this<FilePlane::Impl> {
  Impl(net::EventLoop& l, FilePlaneOptions o) : loop(l), options(std::move(o)) {}

  net::EventLoop& loop;
  FilePlaneOptions options;
  std::unique_ptr<FileCache> cache;
  std::unique_ptr<net::Server> server;
  std::string grant_key;
  std::string requester;  // "w<id>"
  int corrupt_serves = 0;

  // Transfers and hashing: one thread each, joined when its result is
  // handled on the loop (or at the end).
  std::atomic<bool> stopping{false};
  uint64_t next_thread = 0;
  std::map<uint64_t, std::thread> threads;
  // Files being fetched, and who waits for each.
  std::map<std::string, std::vector<std::function<void(Status)>>> inflight;
  // Per file, the holders whose bytes failed its SHA-256 at its last failed
  // fetch (FilePlane::CorruptInputs); at most kMaxCorruptFiles.
  static constexpr size_t kMaxCorruptFiles = 1024;
  std::map<std::string, std::vector<WorkerId>> corrupt_holders;
  // Pinned input files per attempt.
  std::map<std::pair<TaskId, uint32_t>, std::vector<std::string>> pins;
  // Checkpoints: the server, and per task the save running (and a final
  // one waiting behind it) and the manifest last reported.
  std::optional<net::ClientOptions> store_server;  // SetServer
  struct Saving {
    bool running = false;
    std::function<void()> final_next;  // a final save waiting for the running one
    uint32_t reported_attempt = 0;
    std::vector<core::OutputFile> reported;
  };
  std::map<TaskId, Saving> saving;
  // One save round of `task`'s checkpoint (file_plane_checkpoints.cc).
  void RunSave(TaskId task, uint32_t attempt, const std::string& dir, SaveDone done);

  mutable std::mutex stats_mu;
  FilePlaneStats stats;
  FilePlaneStats stats_copy() const {
    std::lock_guard lock(stats_mu);
    return stats;
  }

  // Runs `work` on a thread of its own, then `then` with its result on the
  // loop (not when the plane is gone).
  template <class T>
  void OnThread(std::function<T()> work, std::function<void(T)> then) {
    const uint64_t id = next_thread++;
    std::weak_ptr<Impl> weak = weak_from_this();
    threads[id] = std::thread([this, id, weak, work = std::move(work), then = std::move(then)] {
      auto result = std::make_shared<T>(work());
      loop.Post([weak, id, result, then] {
        std::shared_ptr<Impl> self = weak.lock();
        if (!self) return;
        if (auto it = self->threads.find(id); it != self->threads.end()) {
          it->second.join();
          self->threads.erase(it);
        }
        if (!self->stopping) then(std::move(*result));
      });
    });
  }

  // The service: answers GET /v1/files/<sha256> (file_plane_serve.cc).
  void Serve(const net::Request& request, net::Responder done);

  // How a peer source failed, as the source saw it (filled on the fetching
  // thread): `unreachable` when no answer came from the holder (connect,
  // TLS, a timeout, a connection dropped), as opposed to a refusal (an HTTP
  // error), bytes that did not match, or this side stopping or failing.
  struct PeerTry {
    bool unreachable = false;
    std::string why;
  };

  // One source: the holder's file service, pinned by its fingerprint.
  Source SourceFor(const proto::FileSource& from, const proto::InputFile& file,
                   std::shared_ptr<PeerTry> outcome);

  // How one input's fetch ended (on its thread).
  struct Fetched {
    Status status;
    bool through_server = false;
    std::vector<WorkerId> corrupt;  // holders that sent other bytes
  };

  // Fetches one input into the cache and calls its waiters in `inflight`
  // (file_plane_fetch.cc).
  void StartFetch(const proto::InputFile& file);
};

}  // namespace drover::worker

#endif  // DROVER_WORKER_AGENT_FILE_PLANE_IMPL_H_
