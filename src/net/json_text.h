// JsonText: the one way a JSON value becomes text in an answer or a
// message. Request bytes (paths, queries, bodies, names a peer chose) end up
// in JSON strings, mostly inside error messages that echo what was wrong,
// and nlohmann::json::dump() throws type_error.316 on invalid UTF-8: one
// byte 0xFF in a URL was enough to abort the server. JsonText never throws;
// invalid UTF-8 sequences become U+FFFD.
//
// Thread safety: a pure function.
#ifndef DROVER_NET_JSON_TEXT_H_
#define DROVER_NET_JSON_TEXT_H_

#include <nlohmann/json_fwd.hpp>
#include <string>

namespace drover::net {

// Compact text (indent < 0) or text indented by `indent` spaces.
std::string JsonText(const nlohmann::json& value, int indent = -1);

}  // namespace drover::net

#endif  // DROVER_NET_JSON_TEXT_H_
