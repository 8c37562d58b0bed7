// GET /api/v1/quotas and /api/v1/quotas/{user}: each user's and group's
// quota limits beside what they hold and queue now (core::QuotaReport), for
// `drover quota`. The JSON is documented in src/server/README.md.
//
// Thread safety: none; the handlers run on the server's event loop.
#ifndef DROVER_SERVER_QUOTA_API_H_
#define DROVER_SERVER_QUOTA_API_H_

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "core/quota_report.h"
#include "net/server.h"
#include "server/core_driver.h"

namespace drover::server {

// One line of the report as JSON: {"name", "limits": {...}, "use": {...},
// "default" (users), "groups" or "members"}; quantities in the job file's
// units ("8", "0.5"; "64 GiB" as bytes: numbers).
nlohmann::json QuotaLineJson(const core::QuotaLine& line, bool group);

// The whole report: {"users": [...], "groups": [...]}. With `user`, only
// that user (who may hold nothing and have no line: the default's limits)
// and the groups it belongs to.
nlohmann::json QuotaReportJson(const core::QuotaReport& report, const core::UserQuota& everyone,
                               const std::string& user = "");

void AddQuotaRoutes(net::Server& server, CoreDriver& driver);

}  // namespace drover::server

#endif  // DROVER_SERVER_QUOTA_API_H_
