// Internal to src/net: the Beast messages of a client request and its
// response, shared by HttpClient (http_client.cc) and the WebSocket client
// that sends a request before its upgrade (ws_client.cc), so both send the
// same headers (token, host, user agent) and read answers the same way.
// Only the .cc files of src/net that already compile Beast include this.
//
// Thread safety: plain functions.
#ifndef DROVER_NET_HTTP_CLIENT_BEAST_H_
#define DROVER_NET_HTTP_CLIENT_BEAST_H_

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "net/client_options.h"
#include "net/http_client.h"
#include "net/http_types.h"

namespace drover::net::internal {

using BeastRequest = boost::beast::http::request<boost::beast::http::string_body>;
using BeastResponse = boost::beast::http::response<boost::beast::http::string_body>;

// `request` as sent to options.host with the cluster token; `keep_alive`
// asks the server to leave the connection open after its answer.
BeastRequest MakeBeastRequest(const ClientRequest& request, const ClientOptions& options,
                              bool keep_alive);

// The answer with its header names in lower case.
Response FromBeastResponse(BeastResponse&& response);

}  // namespace drover::net::internal

#endif  // DROVER_NET_HTTP_CLIENT_BEAST_H_
