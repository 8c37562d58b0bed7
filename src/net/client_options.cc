#include "net/client_options.h"

namespace drover::net {

Result<ClientOptions> ClientOptionsFromAccess(const AccessInfo& access) {
  ASSIGN_OR_RETURN(std::vector<HostPort> servers, SplitServerList(access.address));
  ClientOptions o;
  o.host = servers.front().host;
  o.port = servers.front().port;
  o.alternates.assign(servers.begin() + 1, servers.end());
  o.tls = access.tls;
  o.fingerprint = access.fingerprint;
  o.token = access.token;
  return o;
}

}  // namespace drover::net
