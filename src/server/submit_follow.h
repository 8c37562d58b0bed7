// The submit-and-follow route of `drover submit --wait`: WebSocket
// /api/v1/jobs/submit-and-follow with the job spec (JSON, as POST
// /api/v1/jobs takes it, in printable ASCII) in the `X-Drover-Job` header of
// the upgrade request. The server submits it and answers the upgrade once
// the job is durable, exactly when POST /api/v1/jobs would have answered:
// the 101 names the job (`X-Drover-Job-Id`) and the session then is that
// job's event stream (/api/v1/events?job=N: the snapshot, then the live
// events). It saves the client the round trip of a second request after
// the POST's answer, and a task that ended while the job was being made
// durable is in the snapshot. A bad spec is refused with 400 and the
// error's message, a durability failure with its error; nothing is
// acknowledged before the 101. Older servers answer 404 (no such
// endpoint): clients then POST.
//
// Thread safety: none; the handlers run on the server's event loop.
#ifndef DROVER_SERVER_SUBMIT_FOLLOW_H_
#define DROVER_SERVER_SUBMIT_FOLLOW_H_

#include "net/server.h"
#include "server/core_driver.h"
#include "server/event_stream.h"

namespace drover::server {

inline constexpr char kSubmitAndFollowPath[] = "/api/v1/jobs/submit-and-follow";

// Both must outlive the server's routes.
void AddSubmitAndFollowRoute(net::Server& server, CoreDriver& driver, EventStream& events);

}  // namespace drover::server

#endif  // DROVER_SERVER_SUBMIT_FOLLOW_H_
