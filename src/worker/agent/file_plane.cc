#include "worker/agent/file_plane.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <utility>

#include "common/quantity.h"
#include "net/grant.h"
#include "net/http_client.h"
#include "net/server.h"
#include "net/sha256.h"
#include "net/token.h"
#include "worker/files/fetch.h"
#include "worker/files/file_cache.h"
#include "worker/files/file_util.h"
#include "worker/files/output_scan.h"

namespace drover::worker {
namespace {

// Blob `sha256` of the server's file store (GET /api/v1/files/{sha256}):
// uploaded client files and checkpoints.
Source ServerFileSource(const net::ClientOptions& server, const std::string& sha256) {
  return [server, sha256](const ChunkSink& sink) -> Status {
    net::HttpClient http(server);
    net::ClientRequest request;
    request.target = "/api/v1/files/" + sha256;
    Result<net::Response> got = http.Download(request, sink);
    if (!got.ok()) return got.status().WithContext("the server");
    return net::StatusFromResponse(*got).WithContext("the server");
  };
}

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

constexpr char kFilesRoute[] = "/v1/files/{sha256}";

// A copy of `path` with its middle byte flipped (the corrupting test hook).
Result<std::string> CorruptCopy(const std::string& path, const std::string& dir) {
  RETURN_IF_ERROR(MakeDirs(dir, 0700));
  const std::string copy = dir + "/corrupt";
  int in = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return Unavailable("cannot open " + path + ": " + std::strerror(errno));
  int out = ::open(copy.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (out < 0) {
    ::close(in);
    return Unavailable("cannot create " + copy + ": " + std::strerror(errno));
  }
  struct stat st {};
  ::fstat(in, &st);
  const off_t middle = st.st_size / 2;
  std::string buffer(1 << 20, '\0');
  off_t at = 0;
  Status status = Status::Ok();
  for (;;) {
    ssize_t n = ::read(in, buffer.data(), buffer.size());
    if (n <= 0) break;
    if (middle >= at && middle < at + n) buffer[static_cast<size_t>(middle - at)] ^= 0x01;
    if (::write(out, buffer.data(), static_cast<size_t>(n)) != n) {
      status = Unavailable("cannot write " + copy);
      break;
    }
    at += n;
  }
  ::close(in);
  ::close(out);
  RETURN_IF_ERROR(status);
  return copy;
}

}  // namespace

bool HasEntries(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return false;
  bool found = false;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") {
      found = true;
      break;
    }
  }
  ::closedir(d);
  return found;
}

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

  void Serve(const net::Request& request, net::Responder done) {
    auto refuse = [&](int http, StatusCode code, const std::string& why) {
      {
        std::lock_guard lock(stats_mu);
        ++stats.refused;
      }
      spdlog::warn("file service: refused {} {} from {}: {}", request.method,
                   net::Printable(request.path, 120), request.remote, why);
      done(net::ErrorResponse(http, code, why));
    };
    const auto sha_it = request.path_params.find("sha256");
    const std::string sha = sha_it == request.path_params.end() ? "" : sha_it->second;
    if (!core::IsSha256Hex(sha)) {
      return refuse(400, StatusCode::kInvalidArgument,
                    "not a file name: expected 64 lower-case hex digits");
    }
    auto header = [&](const char* name) {
      auto it = request.headers.find(name);
      return it == request.headers.end() ? std::string() : it->second;
    };
    const std::string grant = header("x-drover-grant");
    const std::string who = header("x-drover-requester");
    if (grant.empty()) return refuse(403, StatusCode::kPermissionDenied, "no grant");
    if (grant_key.empty()) {
      return refuse(503, StatusCode::kUnavailable, "no grant key yet (not attached to a server)");
    }
    Result<net::Grant> checked = net::VerifyGrant(grant_key, grant, sha, who, RealClock().Now());
    if (!checked.ok()) {
      return refuse(403, StatusCode::kPermissionDenied, checked.status().message());
    }
    if (!cache->Has(sha)) {
      return refuse(404, StatusCode::kNotFound, "file " + sha.substr(0, 12) + "... is not here");
    }
    std::string path = cache->PathOf(sha);
    struct stat st {};
    const uint64_t size = ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
    if (corrupt_serves > 0) {
      --corrupt_serves;
      Result<std::string> copy = CorruptCopy(path, options.tls_dir + "/test-corrupt");
      if (copy.ok()) {
        spdlog::warn("file service: test hook: serving {} with one byte flipped", sha);
        path = *copy;
      }
    }
    {
      std::lock_guard lock(stats_mu);
      ++stats.served_files;
      stats.served_bytes += size;
    }
    spdlog::info("file service: serving {}... ({}) to {} at {}", sha.substr(0, 12),
                 FormatBytes(size), net::Printable(who, 64), request.remote);
    net::Response response;
    response.content_type = "application/octet-stream";
    response.file_path = path;
    done(std::move(response));
  }

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

  // How one input's fetch ended (on its thread).
  struct Fetched {
    Status status;
    bool through_server = false;
  };

  void StartFetch(const proto::InputFile& file) {
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
          const auto start = std::chrono::steady_clock::now();
          Result<FetchReport> report = FetchIntoCache(*c, sha, size, sources);
          if (report.ok()) {
            const double secs =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            // bench/data.py reads this line.
            spdlog::info("file service: fetched {} ({}) from {} in {:.3f} s ({:.0f} MiB/s)", label,
                         FormatBytes(size), names[report->source_used], secs,
                         secs > 0 ? static_cast<double>(size) / secs / (1 << 20) : 0.0);
            return {Status::Ok()};
          }
          const Status peers = report.status().WithContext("input " + label);
          // The fallback: only when no holder could be reached at all (a
          // holder that refused or sent other bytes is not bypassed), and
          // not for a full disk.
          bool all_unreachable = report.status().code() == StatusCode::kUnavailable;
          for (const auto& t : tries) all_unreachable = all_unreachable && t->unreachable;
          if (!all_unreachable || !server) return {peers};
          std::string via_server;
          for (size_t i = 0; i < holders.size(); ++i) {
            if (*stop) return {Unavailable("the worker is stopping")};
            spdlog::warn("input {}: holder worker {} unreachable ({}); fetching through the server",
                         label, holders[i], tries[i]->why);
            const auto relay_start = std::chrono::steady_clock::now();
            Status pulled = PullThroughServer(*server, sha, producer, holders[i], wait, *stop);
            if (pulled.ok()) {
              Result<FetchReport> got =
                  FetchIntoCache(*c, sha, size, {ServerFileSource(*server, sha)});
              if (got.ok()) {
                const double secs =
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - relay_start)
                        .count();
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
};

Result<std::unique_ptr<FilePlane>> FilePlane::Start(net::EventLoop& loop,
                                                    FilePlaneOptions options) {
  auto impl = std::make_shared<Impl>(loop, std::move(options));
  RETURN_IF_ERROR(MakeDirs(impl->options.tls_dir, 0700));
  const uint64_t capacity = impl->options.cache_bytes != 0
                                ? impl->options.cache_bytes
                                : DefaultCacheCapacity(impl->options.cache_dir);
  Result<std::unique_ptr<FileCache>> cache = FileCache::Open(impl->options.cache_dir, capacity);
  if (!cache.ok()) return cache.status().WithContext("file cache " + impl->options.cache_dir);
  impl->cache = std::move(cache).value();
  if (const char* corrupt = std::getenv("DROVER_TEST_CORRUPT_SERVES")) {
    impl->corrupt_serves = std::atoi(corrupt);
  }
  net::ServerOptions server;
  server.bind_address = impl->options.bind_address;
  server.port = impl->options.port;
  server.tls = true;
  server.cert_dir = impl->options.tls_dir;
  server.token = impl->options.token;
  // Who fetches here holds a token of the cluster's users (a peer worker
  // with its own worker token, `drover get` with a user's), which this
  // worker cannot check: the grant, signed by the server for this file and
  // this requester, is what lets a fetch through. So this worker's own
  // token may use every route, any other well-formed token only the files.
  server.authenticate =
      [own = impl->options.token](std::string_view token) -> std::optional<net::Identity> {
    if (net::TokenEquals(token, own)) return net::Identity{"", net::Role::kAdmin};
    if (net::IsSha256Hex(token)) {  // a token's shape: 64 lower-case hex digits
      return net::Identity{"peer", net::Role::kViewer};
    }
    return std::nullopt;
  };
  server.authorize = [](const net::Request& r) -> std::optional<net::Response> {
    if (!r.identity || r.identity->role == net::Role::kAdmin) return std::nullopt;
    if (r.method == "GET" && r.path.starts_with("/v1/files/")) return std::nullopt;
    return net::ErrorResponse(403, StatusCode::kPermissionDenied,
                              "only the worker's own token may use " + net::Printable(r.path));
  };
  impl->server = std::make_unique<net::Server>(loop, server);
  Impl* raw = impl.get();
  impl->server->Route("GET", kFilesRoute, [raw](const net::Request& request, net::Responder done) {
    raw->Serve(request, std::move(done));
  });
  impl->server->Route("GET", "/v1/files-stats", [raw](const net::Request&, net::Responder done) {
    const FilePlaneStats s = raw->stats_copy();
    done(net::JsonResponse("{\"served_files\":" + std::to_string(s.served_files) +
                           ",\"served_bytes\":" + std::to_string(s.served_bytes) +
                           ",\"refused\":" + std::to_string(s.refused) +
                           ",\"fetched_files\":" + std::to_string(s.fetched_files) +
                           ",\"fetched_bytes\":" + std::to_string(s.fetched_bytes) +
                           ",\"relayed_files\":" + std::to_string(s.relayed_files) +
                           ",\"relayed_bytes\":" + std::to_string(s.relayed_bytes) + "}"));
  });
  if (Status started = impl->server->Start(); !started.ok()) {
    return started.WithContext("file service");
  }
  return std::unique_ptr<FilePlane>(new FilePlane(std::move(impl)));
}

FilePlane::FilePlane(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

FilePlane::~FilePlane() {
  impl_->stopping = true;
  impl_->server->Stop();
  for (auto& [id, thread] : impl_->threads) thread.join();
  impl_->threads.clear();
}

uint16_t FilePlane::port() const { return impl_->server->port(); }
const std::string& FilePlane::fingerprint() const { return impl_->server->fingerprint(); }

void FilePlane::Attached(std::string grant_key, WorkerId self) {
  impl_->grant_key = std::move(grant_key);
  impl_->requester = "w" + std::to_string(self);
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
          const auto start = std::chrono::steady_clock::now();
          Result<FetchReport> fetched = FetchIntoCache(*cache, f.sha256, f.size, {from_server});
          if (!fetched.ok()) return fetched.status().WithContext("uploaded file " + f.name);
          const double secs =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
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

OutputCap OutputCapOf(const proto::Assignment& a) {
  if (a.max_output_bytes == 0) return {};
  return OutputCap{a.max_output_bytes,
                   a.max_output_by_task ? "the task's" : "the server's --max-output"};
}

std::vector<JobId> FilePlane::KeptJobs() const { return impl_->cache->KeptJobs(); }

void FilePlane::FetchCopy(JobId job, const std::vector<proto::InputFile>& files,
                          std::function<void(Status)> done) {
  std::vector<std::string> shas;
  for (const proto::InputFile& f : files) shas.push_back(f.file.sha256);
  // Kept first, as a task's own outputs are: nothing evicts what arrives.
  if (Status kept = impl_->cache->Keep(job, shas); !kept.ok()) return done(kept);
  proto::Assignment a;
  a.files = files;
  Fetch(a, std::move(done));
}

void FilePlane::ReleaseOutputs(const std::vector<JobId>& jobs) {
  for (JobId job : jobs) impl_->cache->Unkeep(job);
}

void FilePlane::CollectOutputs(const std::string& dir, JobId job, const OutputCap& assigned,
                               std::function<void(Result<std::vector<core::OutputFile>>)> done) {
  FileCache* c = impl_->cache.get();
  OutputLimits limits;
  limits.max_bytes = assigned.bytes;
  limits.whose = assigned.whose;
  if (const uint64_t own = impl_->options.max_output_bytes;
      own != 0 && (limits.max_bytes == 0 || own < limits.max_bytes)) {
    limits.max_bytes = own;
    limits.whose = "worker --max-output";
  }
  limits.max_files = core::kMaxOutputFiles;
  impl_->OnThread<Result<std::vector<core::OutputFile>>>(
      [c, dir, job, limits]() -> Result<std::vector<core::OutputFile>> {
        ASSIGN_OR_RETURN(std::vector<OutputEntry> entries, ScanOutputs(dir, limits));
        // Kept for the job's dependents before they enter the cache: no
        // fetch can evict them in between (docs/design.md, retention).
        std::vector<std::string> shas;
        for (const OutputEntry& e : entries) shas.push_back(e.sha256);
        if (Status kept = c->Keep(job, shas); !kept.ok()) {
          spdlog::warn("file service: outputs of job {} are kept until the worker stops only: {}",
                       job, kept.ToString());
        }
        std::vector<core::OutputFile> outputs;
        for (OutputEntry& e : entries) {
          if (std::string problem = core::OutputNameProblem(e.name); !problem.empty()) {
            return InvalidArgument("output " + e.name + ": its name " + problem);
          }
          if (Status kept = c->Adopt(dir + "/" + e.name, e.sha256, e.size); !kept.ok()) {
            // Still an output (listed, and in the task's directory), but
            // peers cannot fetch it from here.
            if (kept.code() != StatusCode::kResourceExhausted) {
              return kept.WithContext("keeping output " + e.name);
            }
            spdlog::warn("file service: output {} is not served: {}", e.name, kept.message());
          }
          outputs.push_back(core::OutputFile{std::move(e.name), e.size, std::move(e.sha256)});
        }
        return outputs;
      },
      std::move(done));
}

// ---- checkpoints ----------------------------------------------------------

namespace {

// What one save round found (on its thread).
struct SaveRound {
  std::vector<core::OutputFile> files;
  bool uploaded = false;  // a file had to be sent
  std::string skipped;    // non-empty: this round counts for nothing (why)
};

Result<SaveRound> SaveOnThread(const net::ClientOptions& server, const std::string& dir,
                               const std::atomic<bool>& stopping) {
  SaveRound round;
  timespec began{};
  ::clock_gettime(CLOCK_REALTIME, &began);
  OutputLimits limits;
  limits.max_files = core::kMaxOutputFiles;
  ASSIGN_OR_RETURN(std::vector<OutputEntry> entries, ScanOutputs(dir, limits));
  if (entries.empty()) {
    round.skipped = "empty";
    return round;
  }
  for (OutputEntry& e : entries) {
    if (stopping) return Unavailable("the worker is stopping");
    if (std::string problem = core::OutputNameProblem(e.name); !problem.empty()) {
      return InvalidArgument("checkpoint file " + e.name + ": its name " + problem);
    }
    const std::string target = "/api/v1/files/" + e.sha256;
    net::HttpClient http(server);
    net::ClientRequest head;
    head.method = "HEAD";
    head.target = target;
    ASSIGN_OR_RETURN(net::Response known, http.Send(head));
    if (known.status == 404) {
      net::ClientRequest put;
      put.method = "PUT";
      put.target = target;
      put.content_type = "application/octet-stream";
      ASSIGN_OR_RETURN(net::Response stored, http.Upload(put, dir + "/" + e.name));
      if (stored.status == 400) {
        // The server hashed other bytes than the listing did.
        round.skipped = e.name + " changed while it was saved";
        return round;
      }
      RETURN_IF_ERROR(net::StatusFromResponse(stored).WithContext("uploading " + e.name));
      round.uploaded = true;
    } else if (known.status != 200) {
      return Unavailable("the server answered HEAD " + target + " with " +
                         std::to_string(known.status));
    }
    round.files.push_back(core::OutputFile{std::move(e.name), e.size, std::move(e.sha256)});
  }
  // A file written since the listing began (a new inode renamed into
  // place, or bytes changed in place) makes the set inconsistent: skipped.
  for (const core::OutputFile& f : round.files) {
    struct stat st {};
    const std::string path = dir + "/" + f.name;
    if (::stat(path.c_str(), &st) != 0 || static_cast<uint64_t>(st.st_size) != f.size ||
        st.st_mtim.tv_sec > began.tv_sec ||
        (st.st_mtim.tv_sec == began.tv_sec && st.st_mtim.tv_nsec >= began.tv_nsec)) {
      round.skipped = f.name + " changed while it was saved";
      return round;
    }
  }
  return round;
}

}  // namespace

void FilePlane::SetServer(net::ClientOptions server) { impl_->store_server = std::move(server); }

void FilePlane::SaveCheckpoint(TaskId task, uint32_t attempt, const std::string& dir, bool final,
                               SaveDone done) {
  Impl::Saving& s = impl_->saving[task];
  if (s.running) {
    if (!final) return done(std::optional<std::vector<core::OutputFile>>());
    // After the running round (which may have read the directory before the
    // task's last write).
    std::weak_ptr<Impl> weak = impl_;
    s.final_next = [weak, task, attempt, dir, done = std::move(done)]() mutable {
      if (auto self = weak.lock()) self->RunSave(task, attempt, dir, std::move(done));
    };
    return;
  }
  impl_->RunSave(task, attempt, dir, std::move(done));
}

void FilePlane::Impl::RunSave(TaskId task, uint32_t attempt, const std::string& dir,
                              SaveDone done) {
  if (!store_server) return done(Unavailable("not attached to a server"));
  saving[task].running = true;
  const net::ClientOptions to = *store_server;
  std::atomic<bool>* stop = &stopping;
  OnThread<Result<SaveRound>>(
      [to, dir, stop]() { return SaveOnThread(to, dir, *stop); },
      [this, task, attempt, done = std::move(done)](Result<SaveRound> round) {
        Saving& s = saving[task];
        s.running = false;
        Result<std::optional<std::vector<core::OutputFile>>> answer =
            std::optional<std::vector<core::OutputFile>>();
        if (!round.ok()) {
          answer = round.status();
        } else if (!round->skipped.empty()) {
          if (round->skipped != "empty") {
            spdlog::info("checkpoint of {}#{}: round skipped: {}", task.ToString(), attempt,
                         round->skipped);
          }
        } else if (round->uploaded || s.reported_attempt != attempt || s.reported != round->files) {
          s.reported_attempt = attempt;
          s.reported = round->files;
          answer = std::optional(std::move(round->files));
        }
        std::function<void()> next = std::move(s.final_next);
        s.final_next = nullptr;
        done(std::move(answer));
        if (next) next();
      });
}

void FilePlane::ForgetCheckpoint(TaskId task) {
  auto it = impl_->saving.find(task);
  if (it != impl_->saving.end() && !it->second.running && !it->second.final_next) {
    impl_->saving.erase(it);
  }
}

void FilePlane::RestoreCheckpoint(const std::vector<core::OutputFile>& files,
                                  const std::string& dir,
                                  std::optional<std::pair<uid_t, gid_t>> owner,
                                  std::function<void(Status)> done) {
  if (!impl_->store_server) return done(Unavailable("not attached to a server"));
  const net::ClientOptions server = *impl_->store_server;
  FileCache* cache = impl_->cache.get();
  Impl* self = impl_.get();
  impl_->OnThread<Status>(
      [server, files, dir, owner, cache, self]() -> Status {
        // The task's directories as the executor makes them: the job's
        // passable (0711), the checkpoint directory private.
        RETURN_IF_ERROR(MakeDirs(ParentDir(dir), 0711));
        RETURN_IF_ERROR(MakeDirs(dir, 0700));
        // What an older attempt left here is not the latest state: replaced
        // (the agent keeps it only when this worker saved the latest).
        std::error_code ec;
        for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
          std::filesystem::remove_all(entry.path(), ec);
          if (ec) return Internal("cannot empty " + dir + ": " + ec.message());
        }
        if (ec) return Internal("cannot list " + dir + ": " + ec.message());
        auto chown_to_owner = [&](const std::string& path) {
          if (owner && ::lchown(path.c_str(), owner->first, owner->second) != 0) {
            spdlog::warn("checkpoint: cannot hand {} to the task's user: {}", path,
                         std::strerror(errno));
          }
        };
        chown_to_owner(dir);
        for (const core::OutputFile& f : files) {
          if (self->stopping) return Unavailable("the worker is stopping");
          if (!cache->Has(f.sha256)) {
            // A file the server no longer holds (its job forgotten, a lost
            // disk) cannot come back: say so apart from a failed transfer.
            net::HttpClient http(server);
            net::ClientRequest head;
            head.method = "HEAD";
            head.target = "/api/v1/files/" + f.sha256;
            ASSIGN_OR_RETURN(net::Response known, http.Send(head));
            if (known.status == 404) {
              return NotFound("checkpoint file " + f.name + ": the server no longer has it");
            }
          }
          cache->Pin(f.sha256);
          const Source from_server = ServerFileSource(server, f.sha256);
          Result<FetchReport> fetched = FetchIntoCache(*cache, f.sha256, f.size, {from_server});
          Status copied = fetched.status();
          if (copied.ok()) {
            const std::string dest = dir + "/" + f.name;
            // Subdirectories as the task made them (names are checked:
            // relative, no "..").
            std::string sub = ParentDir(dest);
            copied = MakeDirs(sub, 0700);
            for (; copied.ok() && sub.size() > dir.size(); sub = ParentDir(sub))
              chown_to_owner(sub);
            if (copied.ok()) copied = CopyFile(cache->PathOf(f.sha256), dest, 0600);
            if (copied.ok()) chown_to_owner(dest);
          }
          cache->Unpin(f.sha256);
          if (!copied.ok()) return copied.WithContext("checkpoint file " + f.name);
        }
        return Status::Ok();
      },
      std::move(done));
}

FilePlaneStats FilePlane::stats() const { return impl_->stats_copy(); }

}  // namespace drover::worker
