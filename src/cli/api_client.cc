#include "cli/api_client.h"

#include <chrono>
#include <random>
#include <thread>
#include <nlohmann/json.hpp>

#include "net/backoff.h"
#include "net/http_types.h"

namespace drover::cli {

namespace {

constexpr int kMaxRedirects = 3;

std::string Address(const net::HostPort& hp) {
  const bool v6 = hp.host.find(':') != std::string::npos;
  return (v6 ? "[" + hp.host + "]" : hp.host) + ":" + std::to_string(hp.port);
}

// "https://host:port/path" -> host:port.
Result<net::HostPort> LocationAddress(const std::string& location) {
  const size_t scheme = location.find("://");
  const size_t start = scheme == std::string::npos ? 0 : scheme + 3;
  const size_t end = location.find('/', start);
  return net::SplitHostPort(location.substr(start, end == std::string::npos ? end : end - start));
}

// A request that failed this way never reached the server: safe to send
// elsewhere even when it is a write.
bool NeverSent(const Status& s) {
  return s.code() == StatusCode::kUnavailable &&
         (s.message().starts_with("cannot connect to") ||
          s.message().starts_with("TLS handshake failed"));
}

std::string Header(const net::Response& r, const std::string& lower_name) {
  auto it = r.headers.find(lower_name);
  return it == r.headers.end() ? std::string() : it->second;
}

}  // namespace

std::string AddressOf(const net::ClientOptions& options) {
  return Address(net::HostPort{options.host, options.port});
}

ApiClient::ApiClient(net::ClientOptions options) : options_(std::move(options)) {}

net::ClientOptions ApiClient::StreamOptions() const {
  net::ClientOptions o = options_;
  if (!leader_.empty()) {
    if (Result<net::HostPort> hp = net::SplitHostPort(leader_); hp.ok()) {
      o.host = hp->host;
      o.port = hp->port;
      o.local_socket.clear();  // another server: over the network
    }
  }
  return o;
}

Result<net::Response> ApiClient::SendTo(const net::HostPort& server,
                                        const net::ClientRequest& request) {
  net::HostPort at = server;
  for (int hop = 0;; ++hop) {
    net::ClientOptions o = options_;
    o.host = at.host;
    o.port = at.port;
    // The local socket is the first server's; a redirect or another server
    // is reached over the network.
    if (hop > 0 || at.host != options_.host || at.port != options_.port) o.local_socket.clear();
    Result<net::Response> r = net::HttpClient(o).Send(request);
    if (!r.ok()) return r;
    const bool standby = Header(*r, "x-drover-role") == "standby";
    if (r->status == 307 && hop < kMaxRedirects) {
      // A standby names the leader: send the request there (307 keeps the
      // method and the body).
      Result<net::HostPort> leader = LocationAddress(Header(*r, "location"));
      if (!leader.ok()) return leader.status().WithContext("redirect from " + Address(at));
      at = *leader;
      continue;
    }
    if (standby && r->status == 503) {
      // A standby that knows no leader (a takeover under way), or whose
      // copy is too old: try the other servers.
      return Unavailable("server " + Address(at) + " is a standby: " +
                         net::StatusFromResponse(*r).message());
    }
    leader_ = standby ? Header(*r, "x-drover-leader") : std::string();
    options_.host = at.host;
    options_.port = at.port;
    return r;
  }
}

Result<std::string> ApiClient::Send(const std::string& method, const std::string& target,
                                    std::string body) {
  net::ClientRequest request;
  request.method = method;
  request.target = target;
  request.body = std::move(body);
  // The server that answered last first, then the others in order.
  std::vector<net::HostPort> order = {net::HostPort{options_.host, options_.port}};
  for (const net::HostPort& hp : options_.alternates) {
    if (hp.host != options_.host || hp.port != options_.port) order.push_back(hp);
  }
  // With several servers a client rides out a leader change: it cycles
  // through them with backoff for up to the request timeout.
  const Deadline deadline(options_.timeout);
  std::mt19937 rng(std::random_device{}());
  net::Backoff backoff({Millis(100), Seconds(2), 2.0, 0.5},
                       [&rng] { return std::uniform_real_distribution<double>(0, 1)(rng); });
  Status last;
  while (true) {
    for (const net::HostPort& server : order) {
      Result<net::Response> response = SendTo(server, request);
      if (response.ok()) {
        RETURN_IF_ERROR(net::StatusFromResponse(*response));
        return std::move(response->body);
      }
      last = response.status().WithContext("server " + Address(server));
      const bool retry = method == "GET" ? response.status().code() == StatusCode::kUnavailable
                                         : NeverSent(response.status()) ||
                                               response.status().message().find(
                                                   "is a standby") != std::string::npos;
      if (!retry) return last;
    }
    if (order.size() < 2 || deadline.Passed()) return last;
    std::this_thread::sleep_for(backoff.Next());
  }
}

Result<nlohmann::json> ApiClient::Get(const std::string& target) {
  ASSIGN_OR_RETURN(std::string body, Send("GET", target, {}));
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Internal("the server's answer to " + target + " is not JSON");
  return j;
}

Result<nlohmann::json> ApiClient::Post(const std::string& target, std::string body) {
  ASSIGN_OR_RETURN(std::string answer, Send("POST", target, std::move(body)));
  nlohmann::json j = nlohmann::json::parse(answer, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Internal("the server's answer to " + target + " is not JSON");
  return j;
}

Result<std::string> ApiClient::GetText(const std::string& target) {
  return Send("GET", target, {});
}

}  // namespace drover::cli
