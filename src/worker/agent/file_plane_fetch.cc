// FilePlane's fetches: a task's inputs from their holders (through the
// server only when no holder can be reached) and its uploads from the
// server, into the cache; linked and pinned for the attempt (file_plane.h).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/quantity.h"
#include "net/http_client.h"
#include "net/http_types.h"
#include "worker/agent/file_plane_impl.h"
#include "worker/files/fetch.h"
#include "worker/files/file_cache.h"

namespace drover::worker {
namespace {

// Asks the server to fetch file `sha256`, output of task `from_task`, from
// its holder `holder` into the server's file store (POST /api/v1/files/
// {sha256}/pull, server/file_relay.h), and waits until it is there: the
// server holds each request up to `wait` and answers 202 with the bytes it
// has received while the transfer runs. Gives up when those stop growing
// for four rounds in a row.
Status PullThroughServer(const net::ClientOptions& server, const std::string& sha256,
                         TaskId from_task, WorkerId holder, Duration wait,
                         const std::atomic<bool>& stopping) {
  net::ClientOptions o = server;
  o.timeout = wait + std::max<Duration>(server.timeout, Seconds(10));
  net::ClientRequest request;
  request.method = "POST";
  request.target = "/api/v1/files/" + sha256 + "/pull";
  request.body =
      nlohmann::json{
          {"task", from_task.ToString()}, {"from", holder}, {"wait_ms", wait.count() / 1000}}
          .dump();
  uint64_t received = 0;
  int stalled = 0;
  for (;;) {
    if (stopping) return Unavailable("the worker is stopping");
    Result<net::Response> got = net::HttpClient(o).Send(request);
    if (!got.ok()) return got.status().WithContext("the server");
    if (got->status == 200) return Status::Ok();
    if (got->status != 202) return net::StatusFromResponse(*got).WithContext("the server");
    const nlohmann::json progress = nlohmann::json::parse(got->body, nullptr, false);
    const uint64_t now = progress.is_object() && progress.contains("received") &&
                                 progress["received"].is_number_unsigned()
                             ? progress["received"].get<uint64_t>()
                             : 0;
    stalled = now > received ? 0 : stalled + 1;
    received = std::max(received, now);
    if (stalled >= 4) {
      return Status(StatusCode::kDeadlineExceeded, "the server's transfer made no progress for " +
                                                       FormatDuration(4 * wait) + " (" +
                                                       FormatBytes(received) + " received)");
    }
  }
}

}  // namespace

// One source: the holder's file service, pinned by its fingerprint.
Source FilePlane::Impl::SourceFor(const proto::FileSource& from, const proto::InputFile& file,
                                  std::shared_ptr<PeerTry> outcome) {
  net::ClientOptions client;
  client.host = from.host;
  client.port = from.port;
  client.tls = true;
  client.fingerprint = from.fingerprint;
  client.token = options.token;
  client.timeout = options.fetch_timeout;
  net::ClientRequest request;
  request.target = "/v1/files/" + file.file.sha256;
  request.headers["X-Drover-Grant"] = file.grant;
  request.headers["X-Drover-Requester"] = requester;
  const std::string where = "worker " + std::to_string(from.worker) + " (" + from.host + ":" +
                            std::to_string(from.port) + ")";
  return [client, request, where, outcome, this](const ChunkSink& sink) -> Status {
    net::HttpClient http(client);
    bool sink_failed = false;
    ChunkSink guarded = [&](std::string_view chunk) -> Status {
      Status s = stopping ? Unavailable("the worker is stopping") : sink(chunk);
      if (!s.ok()) sink_failed = true;
      return s;
    };
    *outcome = PeerTry{};
    Result<net::Response> got = http.Download(request, guarded);
    if (!got.ok()) {
      if (!sink_failed) *outcome = PeerTry{true, got.status().message()};
      return got.status().WithContext(where);
    }
    Status answer = net::StatusFromResponse(*got);
    if (!answer.ok()) return answer.WithContext(where);
    return Status::Ok();
  };
}

void FilePlane::Impl::StartFetch(const proto::InputFile& file) {
  std::vector<Source> sources;
  std::vector<std::shared_ptr<PeerTry>> tries;
  for (const proto::FileSource& from : file.sources) {
    tries.push_back(std::make_shared<PeerTry>());
    sources.push_back(SourceFor(from, file, tries.back()));
  }
  const std::string sha = file.file.sha256;
  const uint64_t size = file.file.size;
  const std::string label = file.from.ToString() + "/" + file.file.name;
  const TaskId producer = file.from;
  FileCache* c = cache.get();
  std::vector<WorkerId> holders;
  std::vector<std::string> names;
  for (const proto::FileSource& from : file.sources) {
    holders.push_back(from.worker);
    names.push_back("worker " + std::to_string(from.worker));
  }
  // The fallback through the server needs one to ask.
  const std::optional<net::ClientOptions> server = store_server;
  const Duration wait = std::max<Duration>(options.fetch_timeout / 2, Seconds(1));
  std::atomic<bool>* stop = &stopping;
  OnThread<Fetched>(
      [c, sha, size, sources, tries, label, producer, holders, names, server, wait,
       stop]() -> Fetched {
        if (sources.empty()) {
          return {Unavailable("input " + label +
                              ": no worker holds it (its holder serves no "
                              "files or is unknown to the server)")};
        }
        const Stopwatch start;
        std::vector<size_t> mismatched;
        Result<FetchReport> report = FetchIntoCache(*c, sha, size, sources, &mismatched);
        if (report.ok()) {
          const double secs =
              start.ElapsedSeconds();
          // bench/data.py reads this line.
          spdlog::info("file service: fetched {} ({}) from {} in {:.3f} s ({:.0f} MiB/s)", label,
                       FormatBytes(size), names[report->source_used], secs,
                       secs > 0 ? static_cast<double>(size) / secs / (1 << 20) : 0.0);
          return {Status::Ok()};
        }
        const Status peers = report.status().WithContext("input " + label);
        std::vector<WorkerId> corrupt;
        for (size_t i : mismatched) corrupt.push_back(holders[i]);
        // The fallback: only when no holder could be reached at all (a
        // holder that refused or sent other bytes is not bypassed), and
        // not for a full disk.
        bool all_unreachable = report.status().code() == StatusCode::kUnavailable;
        for (const auto& t : tries) all_unreachable = all_unreachable && t->unreachable;
        if (!all_unreachable || !server) return {peers, false, corrupt};
        std::string via_server;
        for (size_t i = 0; i < holders.size(); ++i) {
          if (*stop) return {Unavailable("the worker is stopping")};
          spdlog::warn("input {}: holder worker {} unreachable ({}); fetching through the server",
                       label, holders[i], tries[i]->why);
          const Stopwatch relay_start;
          Status pulled = PullThroughServer(*server, sha, producer, holders[i], wait, *stop);
          if (pulled.ok()) {
            Result<FetchReport> got =
                FetchIntoCache(*c, sha, size, {ServerFileSource(*server, sha)});
            if (got.ok()) {
              const double secs =
                  relay_start.ElapsedSeconds();
              spdlog::info(
                  "file service: fetched {} ({}) through the server (from {}) in "
                  "{:.3f} s",
                  label, FormatBytes(size), names[i], secs);
              return {Status::Ok(), true};
            }
            if (got.status().code() == StatusCode::kResourceExhausted) {
              return {got.status().WithContext("input " + label)};
            }
            pulled = got.status();
          }
          spdlog::warn("input {}: fetching through the server failed: {}", label,
                       pulled.ToString());
          via_server += "; through the server: " + pulled.ToString();
        }
        return {Status(peers.code(), peers.message() + via_server)};
      },
      [this, sha, size, label](Fetched fetched) {
        const Status& status = fetched.status;
        if (status.ok() || fetched.corrupt.empty()) {
          corrupt_holders.erase(sha);
        } else if (corrupt_holders.size() < kMaxCorruptFiles || corrupt_holders.count(sha)) {
          corrupt_holders[sha] = fetched.corrupt;
        }
        if (status.ok()) {
          std::lock_guard lock(stats_mu);
          ++stats.fetched_files;
          stats.fetched_bytes += size;
          if (fetched.through_server) {
            ++stats.relayed_files;
            stats.relayed_bytes += size;
          }
        } else {
          spdlog::warn("file service: fetching {} failed: {}", label, status.ToString());
        }
        auto waiters = std::move(inflight[sha]);
        inflight.erase(sha);
        for (auto& waiter : waiters) waiter(status);
      });
}

bool FilePlane::HasInputs(const proto::Assignment& a) {
  for (const proto::InputFile& f : a.files) {
    if (!impl_->cache->Has(f.file.sha256)) return false;
  }
  return true;
}

bool FilePlane::HasUploads(const proto::Assignment& a) {
  for (const core::OutputFile& f : a.uploads) {
    if (!impl_->cache->Has(f.sha256)) return false;
  }
  return true;
}

void FilePlane::FetchUploads(const proto::Assignment& a, std::function<void(Status)> done) {
  if (HasUploads(a)) return done(Status::Ok());
  if (!impl_->store_server) return done(Unavailable("not attached to a server"));
  const net::ClientOptions server = *impl_->store_server;
  FileCache* cache = impl_->cache.get();
  Impl* self = impl_.get();
  const std::vector<core::OutputFile> files = a.uploads;
  impl_->OnThread<Status>(
      [server, files, cache, self]() -> Status {
        for (const core::OutputFile& f : files) {
          if (self->stopping) return Unavailable("the worker is stopping");
          if (cache->Has(f.sha256)) continue;
          const Source from_server = ServerFileSource(server, f.sha256);
          const Stopwatch start;
          Result<FetchReport> fetched = FetchIntoCache(*cache, f.sha256, f.size, {from_server});
          if (!fetched.ok()) return fetched.status().WithContext("uploaded file " + f.name);
          const double secs =
              start.ElapsedSeconds();
          spdlog::info("file service: fetched uploaded file {} ({}) from the server in {:.3f} s",
                       f.name, FormatBytes(f.size), secs);
        }
        return Status::Ok();
      },
      std::move(done));
}

Status FilePlane::LinkUploads(const proto::Assignment& a, const std::string& task_dir) {
  std::vector<std::string>& pinned = impl_->pins[{a.task, a.attempt}];
  for (const core::OutputFile& f : a.uploads) {
    RETURN_IF_ERROR(impl_->cache->LinkInto(f.sha256, task_dir + "/" + f.name)
                        .WithContext("uploaded file " + f.name));
    impl_->cache->Pin(f.sha256);
    pinned.push_back(f.sha256);
  }
  return Status::Ok();
}

void FilePlane::Fetch(const proto::Assignment& a, std::function<void(Status)> done) {
  struct Gather {
    size_t left = 0;
    Status first = Status::Ok();
    std::function<void(Status)> done;
  };
  auto gather = std::make_shared<Gather>();
  gather->done = std::move(done);
  std::set<std::string> asked;
  std::vector<const proto::InputFile*> missing;
  for (const proto::InputFile& f : a.files) {
    if (asked.insert(f.file.sha256).second && !impl_->cache->Has(f.file.sha256)) {
      missing.push_back(&f);
    }
  }
  gather->left = missing.size();
  if (missing.empty()) return gather->done(Status::Ok());
  for (const proto::InputFile* f : missing) {
    auto& waiters = impl_->inflight[f->file.sha256];
    const bool first = waiters.empty();
    waiters.push_back([gather](Status status) {
      if (!status.ok() && gather->first.ok()) gather->first = status;
      if (--gather->left == 0) gather->done(gather->first);
    });
    if (first) impl_->StartFetch(*f);
  }
}

std::vector<proto::CorruptInput> FilePlane::CorruptInputs(const proto::Assignment& a) const {
  std::vector<proto::CorruptInput> out;
  for (const proto::InputFile& f : a.files) {
    auto it = impl_->corrupt_holders.find(f.file.sha256);
    if (it == impl_->corrupt_holders.end()) continue;
    for (WorkerId holder : it->second) {
      const proto::CorruptInput c{f.from, holder};
      if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
    }
  }
  return out;
}

Status FilePlane::LinkInputs(const proto::Assignment& a, const std::string& inputs_dir) {
  std::vector<std::string>& pinned = impl_->pins[{a.task, a.attempt}];
  for (const proto::InputFile& f : a.files) {
    const std::string dest = inputs_dir + "/" + f.from.ToString() + "/" + f.file.name;
    RETURN_IF_ERROR(impl_->cache->LinkInto(f.file.sha256, dest)
                        .WithContext("input " + f.from.ToString() + "/" + f.file.name));
    impl_->cache->Pin(f.file.sha256);
    pinned.push_back(f.file.sha256);
  }
  return Status::Ok();
}

void FilePlane::Release(TaskId task, uint32_t attempt) {
  auto it = impl_->pins.find({task, attempt});
  if (it == impl_->pins.end()) return;
  for (const std::string& sha : it->second) impl_->cache->Unpin(sha);
  impl_->pins.erase(it);
}

}  // namespace drover::worker
