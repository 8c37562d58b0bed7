#include "net/client_options.h"

namespace drover::net {

Result<ClientOptions> ClientOptionsFromAccess(const AccessInfo& access) {
  ASSIGN_OR_RETURN(HostPort hp, SplitHostPort(access.address));
  ClientOptions o;
  o.host = hp.host;
  o.port = hp.port;
  o.tls = access.tls;
  o.fingerprint = access.fingerprint;
  o.token = access.token;
  return o;
}

}  // namespace drover::net
