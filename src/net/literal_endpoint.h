// Internal to src/net: the endpoint of a host that is a literal IP address
// ("127.0.0.1", "::1"), for the clients that would otherwise resolve it.
// Asio's async_resolve runs getaddrinfo on a thread it starts for the
// purpose; a fresh CLI process paid a thread start per connection for an
// address that needs no lookup. Only the .cc files of src/net that already
// compile Asio include this.
//
// Thread safety: a plain function.
#ifndef DROVER_NET_LITERAL_ENDPOINT_H_
#define DROVER_NET_LITERAL_ENDPOINT_H_

#include <cstdint>
#include <optional>
#include <string>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace drover::net::internal {

// The one endpoint `host`:`port` when `host` is an IPv4 or IPv6 literal;
// nullopt for a name, which the caller resolves as before.
inline std::optional<boost::asio::ip::tcp::resolver::results_type> LiteralEndpoint(
    const std::string& host, uint16_t port) {
  boost::system::error_code ec;
  const boost::asio::ip::address address = boost::asio::ip::make_address(host, ec);
  if (ec) return std::nullopt;
  return boost::asio::ip::tcp::resolver::results_type::create(
      boost::asio::ip::tcp::endpoint(address, port), host, std::to_string(port));
}

}  // namespace drover::net::internal

#endif  // DROVER_NET_LITERAL_ENDPOINT_H_
