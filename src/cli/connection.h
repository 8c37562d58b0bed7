// How a client command finds and authenticates to a server.
//
// Lookup order (first hit wins):
//   --server HOST:PORT (or a comma-separated list: the first is tried
//   first, the others are ClientOptions::alternates) with --token/--token-file and --fingerprint
//   (or
//   --no-tls); otherwise the access file: --access FILE, then
//   $DROVER_ACCESS, then the default path (net/access_file.h). --token and
//   --fingerprint given with an access file override its values.
//
// The local socket: when the access file names one (the server's
// <state dir>/api.sock), its address is a loopback one, it names a single
// server, no --fingerprint was given, and the socket accepts a connection
// now, the options get local_socket and the client talks plain HTTP there
// (with the token). Otherwise, and always with --server, TCP (+ TLS).
//
// A server that refuses the connection when its address came from an
// access file is usually a server that stopped and left its file behind:
// ResolveConnection remembers the file (for this process: a CLI command
// makes one connection), and WithServerOrigin adds it and what to do to a
// "Connection refused" message.
//
// Thread safety: plain functions and values, but for the remembered file
// (set and read on the command's thread).
#ifndef DROVER_CLI_CONNECTION_H_
#define DROVER_CLI_CONNECTION_H_

#include <string>

#include "common/status.h"
#include "net/client_options.h"

namespace CLI {
class App;
}

namespace drover::cli {

struct ConnectionFlags {
  std::string access;
  std::string server;
  std::string token;
  std::string token_file;
  std::string fingerprint;
  bool no_tls = false;
};

// Adds --access, --server, --token, --token-file, --fingerprint and
// --no-tls to `app`, writing into `flags` (which must outlive parsing).
void AddConnectionFlags(CLI::App& app, ConnectionFlags& flags);

// Resolves the flags into client options. Errors (kInvalidArgument or
// kNotFound) say which flag or file is wrong, and for a missing access file
// how to get one ("start `drover up` or `drover server`, or pass
// --server").
Result<net::ClientOptions> ResolveConnection(const ConnectionFlags& flags);

// `message` with, when it says a connection was refused and the address
// came from an access file, the file named and what to do ("is its server
// still running? ..."); else `message`.
std::string WithServerOrigin(const std::string& message);

// The token given by --token or read from --token-file; empty when neither.
Result<std::string> TokenFromFlags(const std::string& token, const std::string& token_file);

}  // namespace drover::cli

#endif  // DROVER_CLI_CONNECTION_H_
