// Dashboard: serves the embedded web dashboard (dashboard_assets.h).
//
//   GET /                -> index.html, Cache-Control: no-cache
//   GET /index.html      -> the same
//   GET /assets/{file}   -> a built asset; its name carries a content hash,
//                           so it is cached for a year (immutable)
//
// These are the only routes served without the cluster token: they are
// static files with no cluster data in them. The page itself asks for the
// token (from the URL fragment "#token=...", which browsers never send to
// the server, or a form) and sends it with every API call.
//
// A binary built with -DDROVER_WEB=OFF answers / with a short page saying
// the dashboard was not built, and /assets/... with 404.
//
// Thread safety: routes are added before the server starts; the handlers
// only read immutable data.
#ifndef DROVER_SERVER_DASHBOARD_H_
#define DROVER_SERVER_DASHBOARD_H_

#include <optional>
#include <span>
#include <string_view>

#include "net/http_types.h"
#include "net/server.h"
#include "server/dashboard_assets.h"

namespace drover::server {

// The response for a GET of `path` ("/", "/assets/index-abc.js") from
// `files`; nullopt when `path` is not a dashboard path at all.
std::optional<net::Response> DashboardResponse(std::span<const EmbeddedFile> files,
                                               std::string_view path);

// Adds the routes above, serving DashboardFiles(), and makes them public.
void AddDashboardRoutes(net::Server& server);

}  // namespace drover::server

#endif  // DROVER_SERVER_DASHBOARD_H_
