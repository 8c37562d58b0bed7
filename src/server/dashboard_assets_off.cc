// Linked instead of the generated table when configured with -DDROVER_WEB=OFF.
#include "server/dashboard_assets.h"

namespace drover::server {

std::span<const EmbeddedFile> DashboardFiles() { return {}; }

}  // namespace drover::server
