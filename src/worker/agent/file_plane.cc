// FilePlane's making: the cache opened and the file service started (its
// routes), the destructor, and what its parts share. The parts, each its
// own file on FilePlane::Impl (file_plane_impl.h): the service
// (file_plane_serve.cc), inputs and uploads (file_plane_fetch.cc), outputs
// kept (file_plane_outputs.cc), checkpoints (file_plane_checkpoints.cc).
#include "worker/agent/file_plane.h"

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "net/http_client.h"
#include "net/server.h"
#include "net/sha256.h"
#include "net/token.h"
#include "worker/agent/file_plane_impl.h"
#include "worker/files/file_cache.h"
#include "worker/files/file_util.h"

namespace drover::worker {
namespace {

constexpr char kFilesRoute[] = "/v1/files/{sha256}";

}  // namespace

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

FilePlaneStats FilePlane::stats() const { return impl_->stats_copy(); }

}  // namespace drover::worker
