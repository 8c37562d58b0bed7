// The client side's TLS context, one per process.
//
// OpenSSL 3 spends about 4 million instructions building a context (it
// fetches every cipher, group and signature algorithm), more than a whole
// handshake; a `drover submit --wait` that built one per connection spent
// a third of its instructions there. Every HTTPS request and WebSocket a
// client makes shares this one. Trust comes from the pinned certificate
// fingerprint, checked after each handshake (tls_identity.h), so the
// context itself verifies nothing. It offers TLS 1.3 only, with X25519 and
// TLS_AES_128_GCM_SHA256 (Drover's servers speak TLS 1.3), and is made
// without reading openssl.cnf or registering OpenSSL's exit-time cleanup
// when it is the first use of OpenSSL in the process (a CLI command).
//
// Thread safety: created once, thread-safely; OpenSSL allows any thread to
// make connections from a shared context.
#ifndef DROVER_NET_CLIENT_TLS_H_
#define DROVER_NET_CLIENT_TLS_H_

#include <memory>

#include <string>

namespace boost::asio::ssl {
class context;
}
struct ssl_st;

namespace drover::net {

std::shared_ptr<boost::asio::ssl::context> SharedClientTlsContext();

// TLS session resumption between a process's connections to one server
// (`server`: host:port and the pinned fingerprint): a `submit --wait`
// resumes for its event stream the session its POST made, which skips the
// certificate's parsing and signature check on both sides (about 2.5
// million instructions of the client's). A resumed session still carries
// the certificate that was pinned, and only the server that issued the
// ticket can resume it; the pin is checked after every handshake anyway.
// Offer before the handshake; Keep once a response has been read (a TLS
// 1.3 ticket arrives after the handshake). Both do nothing when there is
// nothing to offer or keep.
void OfferClientSession(ssl_st* ssl, const std::string& server);
void KeepClientSession(ssl_st* ssl, const std::string& server);
// How many handshakes of this process resumed a session.
long ClientSessionsResumed();

}  // namespace drover::net

#endif  // DROVER_NET_CLIENT_TLS_H_
