// What messages_batch.cc needs of messages.cc: one message's decoding from
// a parsed JSON value (the elements of a batch frame). Internal.
#ifndef DROVER_PROTO_MESSAGES_INTERNAL_H_
#define DROVER_PROTO_MESSAGES_INTERNAL_H_

#include "common/status.h"
#include "proto/json_util.h"
#include "proto/messages.h"

namespace drover::proto::internal {

Result<WorkerMessage> DecodeWorkerMessageJson(const Json& j);
Result<ServerMessage> DecodeServerMessageJson(const Json& j);

}  // namespace drover::proto::internal

#endif  // DROVER_PROTO_MESSAGES_INTERNAL_H_
