// The web dashboard's files (web/, built by Vite at build time), embedded
// into the binary as byte arrays by cmake/embed_files.cmake. A build
// configured with -DDROVER_WEB=OFF links an empty table instead
// (dashboard_assets_off.cc).
//
// Thread safety: immutable data.
#ifndef DROVER_SERVER_DASHBOARD_ASSETS_H_
#define DROVER_SERVER_DASHBOARD_ASSETS_H_

#include <span>
#include <string_view>

namespace drover::server {

struct EmbeddedFile {
  std::string_view path;          // relative to the build's root: "index.html", "assets/x.js"
  std::string_view content_type;  // "text/html; charset=utf-8", ...
  std::string_view body;
};

// Every embedded file; empty when the dashboard was not built.
std::span<const EmbeddedFile> DashboardFiles();

}  // namespace drover::server

#endif  // DROVER_SERVER_DASHBOARD_ASSETS_H_
