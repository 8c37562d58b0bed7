// The routes about users and the audit log (shapes in
// src/server/README.md), all but whoami the admin's (access.h):
//
//   GET  /api/v1/whoami               {"name","role"} of the token
//   GET  /api/v1/users                {"users":[{"name","role","created","changed","revoked"}]}
//   POST /api/v1/users                {"name","role"} -> {"name","role","token"}
//   POST /api/v1/users/{name}/rotate  -> {"name","role","token"}
//   POST /api/v1/users/{name}/revoke  -> {"name","revoked":true,"closed":N}
//   GET  /api/v1/audit?user=&after=&since=&limit=   {"entries":[...]}
//
// A token is in an answer once, when it is made. Revoking closes that
// user's open connections at once (net::Server::CloseConnectionsOf): an
// event stream or a worker session of theirs ends with "access revoked".
//
// Thread safety: none; the handlers run on the server's event loop.
#ifndef DROVER_SERVER_USER_API_H_
#define DROVER_SERVER_USER_API_H_

#include "common/time.h"
#include "net/server.h"
#include "server/audit_log.h"
#include "server/user_book.h"

namespace drover::server {

void AddUserRoutes(net::Server& server, UserBook& users, AuditLog& audit, Clock& clock);

// The audit entry for one write (ServerOptions::on_write), and what it
// made: "job 12" from a submission's answer.
AuditEntry AuditEntryFor(const net::Request& r, const net::Response& answer, Time now);

}  // namespace drover::server

#endif  // DROVER_SERVER_USER_API_H_
