#include "server/dashboard.h"

#include <string>

namespace drover::server {

namespace {

constexpr char kNotBuilt[] =
    "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Drover</title></head>"
    "<body><h1>Drover</h1><p>This drover binary was built without the web dashboard "
    "(configured with -DDROVER_WEB=OFF). Rebuild with Node.js and npm installed "
    "(scripts/install-deps.sh) to get it. The API under /api/v1 works as usual.</p>"
    "</body></html>\n";

const EmbeddedFile* Find(std::span<const EmbeddedFile> files, std::string_view path) {
  for (const EmbeddedFile& f : files) {
    if (f.path == path) return &f;
  }
  return nullptr;
}

net::Response NotFound(std::string_view path) {
  return net::ErrorResponse(404, StatusCode::kNotFound,
                            "no dashboard file at " + std::string(path));
}

}  // namespace

std::optional<net::Response> DashboardResponse(std::span<const EmbeddedFile> files,
                                               std::string_view path) {
  const bool index = path == "/" || path == "/index.html";
  const bool asset = path.starts_with("/assets/");
  if (!index && !asset) return std::nullopt;
  net::Response r;
  if (index) {
    const EmbeddedFile* f = Find(files, "index.html");
    r.content_type = "text/html; charset=utf-8";
    r.body = f != nullptr ? std::string(f->body) : std::string(kNotBuilt);
    // The page names the current assets' hashes: always revalidate it.
    r.headers["Cache-Control"] = "no-cache";
    r.headers["X-Content-Type-Options"] = "nosniff";
    return r;
  }
  const EmbeddedFile* f = Find(files, path.substr(1));
  if (f == nullptr) return NotFound(path);
  r.content_type = std::string(f->content_type);
  r.body = std::string(f->body);
  r.headers["Cache-Control"] = "public, max-age=31536000, immutable";
  r.headers["X-Content-Type-Options"] = "nosniff";
  return r;
}

void AddDashboardRoutes(net::Server& server) {
  for (const char* pattern : {"/", "/index.html", "/assets/*"}) {
    server.Route("GET", pattern, [](const net::Request& r, net::Responder done) {
      std::optional<net::Response> response = DashboardResponse(DashboardFiles(), r.path);
      done(response ? std::move(*response) : NotFound(r.path));
    });
  }
  server.AllowPublic("/");
  server.AllowPublic("/index.html");
  server.AllowPublic("/assets/*");
}

}  // namespace drover::server
