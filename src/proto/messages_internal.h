// What messages_batch.cc needs of messages.cc: one message's decoding from
// a parsed JSON value (the elements of a batch frame); and what messages.cc
// needs of messages_isolation.cc: an assignment's network and I/O limits.
// Internal.
#ifndef DROVER_PROTO_MESSAGES_INTERNAL_H_
#define DROVER_PROTO_MESSAGES_INTERNAL_H_

#include "common/status.h"
#include "proto/json_util.h"
#include "proto/messages.h"

namespace drover::proto::internal {

Result<WorkerMessage> DecodeWorkerMessageJson(const Json& j);
Result<ServerMessage> DecodeServerMessageJson(const Json& j);

// Assignment::private_network, disk_bytes and io: written into `j` where
// not at their defaults ("network": "none", "disk", "io": {...}), read back
// (all optional on the wire).
void IsolationFieldsJson(const Assignment& a, Json& j);
bool ReadIsolationFields(ObjectReader& r, Assignment* a, DecodeContext& ctx);

}  // namespace drover::proto::internal

#endif  // DROVER_PROTO_MESSAGES_INTERNAL_H_
