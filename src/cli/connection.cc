#include "cli/connection.h"

#include "cli/cli11.h"

#include "net/access_file.h"
#include "net/local_socket.h"
#include "net/token.h"

namespace drover::cli {

namespace {

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.starts_with("127.");
}

// The access file the connection's address came from; empty with --server.
std::string& AccessOrigin() {
  static std::string path;
  return path;
}

}  // namespace

void AddConnectionFlags(CLI::App& app, ConnectionFlags& flags) {
  app.add_option("--access", flags.access,
                 "Access file to read (default: $DROVER_ACCESS, then "
                 "~/.local/state/drover/access.json)");
  app.add_option("--server", flags.server,
                 "Server address HOST:PORT, or several as A:PORT,B:PORT (a leader and its "
                 "standbys, tried in order), instead of an access file");
  app.add_option("--token", flags.token, "Cluster token");
  app.add_option("--token-file", flags.token_file, "File holding the cluster token");
  app.add_option("--fingerprint", flags.fingerprint, "Pinned SHA-256 of the server certificate");
  app.add_flag("--no-tls", flags.no_tls, "Plain TCP (the server runs with --no-tls)");
}

Result<std::string> TokenFromFlags(const std::string& token, const std::string& token_file) {
  if (!token.empty() && !token_file.empty()) {
    return InvalidArgument("give --token or --token-file, not both");
  }
  if (!token_file.empty()) {
    Result<std::string> t = net::LoadToken(token_file);
    if (!t.ok()) return t.status().WithContext("--token-file");
    return *t;
  }
  return token;
}

std::string WithServerOrigin(const std::string& message) {
  const std::string& path = AccessOrigin();
  if (path.empty() || message.find("cannot connect to") == std::string::npos ||
      message.find("Connection refused") == std::string::npos) {
    return message;
  }
  return message + " (the address is from " + path +
         ": is its server still running? Start one with `drover up`, or pass --access or "
         "--server for another)";
}

Result<net::ClientOptions> ResolveConnection(const ConnectionFlags& flags) {
  ASSIGN_OR_RETURN(std::string token, TokenFromFlags(flags.token, flags.token_file));
  net::ClientOptions options;
  if (!flags.server.empty()) {
    Result<std::vector<net::HostPort>> servers = net::SplitServerList(flags.server);
    if (!servers.ok()) return servers.status().WithContext("--server");
    if (token.empty()) return InvalidArgument("--server needs --token or --token-file");
    if (!flags.no_tls && flags.fingerprint.empty()) {
      return InvalidArgument("--server needs --fingerprint (or --no-tls for a plain-TCP server)");
    }
    options.host = servers->front().host;
    options.port = servers->front().port;
    options.alternates.assign(servers->begin() + 1, servers->end());
    options.tls = !flags.no_tls;
    options.fingerprint = flags.fingerprint;
    options.token = token;
    return options;
  }
  ASSIGN_OR_RETURN(std::string path, net::ResolveAccessFilePath(flags.access));
  Result<net::AccessInfo> access = net::ReadAccessFile(path);
  if (!access.ok()) {
    if (access.status().code() == StatusCode::kNotFound) {
      return NotFound("no access file at " + path +
                      ": start `drover up` or `drover server` on this machine, or pass "
                      "--server HOST:PORT --token T --fingerprint F");
    }
    return access.status();
  }
  ASSIGN_OR_RETURN(options, net::ClientOptionsFromAccess(*access));
  AccessOrigin() = path;
  if (!token.empty()) options.token = token;
  if (!flags.fingerprint.empty()) options.fingerprint = flags.fingerprint;
  // The server's local socket skips TCP and the TLS handshake (most of a
  // short command's time); the token is sent as always. Only for a file
  // naming one server on this machine (a copied file of another machine's
  // server may name a path that exists here too), without a --fingerprint
  // to pin (that asks for TLS), and only when the socket accepts now.
  if (!access->socket.empty() && flags.fingerprint.empty() && options.alternates.empty() &&
      IsLoopback(options.host) && net::LocalSocketAccepts(access->socket)) {
    options.local_socket = access->socket;
  }
  return options;
}

}  // namespace drover::cli
