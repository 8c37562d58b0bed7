// Internal to src/net: EagerStream, a Beast stream (TCP or the local socket)
// whose asynchronous writes complete at once when the socket takes the
// bytes at once.
//
// Why: a completion handler waits for its turn of the loop, behind every
// other ready handler. Under TLS a message goes out one record (16 KiB) per
// write of the next layer, so a 256 KiB batch of events needed sixteen turns,
// and on a loop busy with a thousand workers a turn takes milliseconds: the
// event stream carried 4 MB/s while the cluster made 20 MB/s of events
// (bench/README.md, B6 scenario c). Here a write first tries the socket
// without waiting (the socket is in non-blocking mode); when it took bytes,
// the handler runs right away and the next record follows in the same
// turn. Only when the socket would block (its buffer is full: the peer reads
// slowly) does the write wait for the loop, as before.
//
// Running a handler inside the call that started the write is what Asio's
// composed writes (asio::async_write, the TLS stream's, Beast's WebSocket
// and HTTP writes) are written to survive: each returns right after handing
// itself on. Handlers that start another write from inside nest; so that
// one connection does not keep the loop to itself (a large download), at
// most kMaxNested completions and kMaxBytes run nested on one thread, and
// past either the write waits for the loop, which unwinds the stack.
#ifndef DROVER_NET_EAGER_STREAM_H_
#define DROVER_NET_EAGER_STREAM_H_

#include <boost/asio/error.hpp>
#include <boost/beast/core/basic_stream.hpp>
#include <boost/beast/websocket/teardown.hpp>
#include <type_traits>
#include <utility>

namespace drover::net::internal {

// Writes completed at once and nested on this thread (EagerStream): how
// many, and their bytes.
struct EagerNest {
  int depth = 0;
  size_t bytes = 0;
};
inline EagerNest& EagerNesting() {
  thread_local EagerNest nest;
  return nest;
}

template <class Protocol>
class EagerStream : public boost::beast::basic_stream<Protocol> {
 public:
  using Base = boost::beast::basic_stream<Protocol>;
  using Base::Base;

  static constexpr int kMaxNested = 64;
  static constexpr size_t kMaxBytes = 1u << 20;

  // Other bounds than kMaxNested and kMaxBytes, for tests.
  void LimitNesting(int depth, size_t bytes) {
    max_nested_ = depth;
    max_bytes_ = bytes;
  }

  template <class ConstBuffers, class WriteHandler>
  void async_write_some(const ConstBuffers& buffers, WriteHandler&& handler) {
    EagerNest& nest = EagerNesting();
    auto& socket = this->socket();
    if (nest.depth < max_nested_ && nest.bytes < max_bytes_ && socket.is_open()) {
      boost::system::error_code ec;
      if (!socket.non_blocking()) socket.non_blocking(true, ec);
      size_t n = ec ? 0 : socket.write_some(buffers, ec);
      if (!ec && n > 0) {
        // Moved out first, as the asynchronous write would: the caller
        // handed itself over and only returns.
        std::decay_t<WriteHandler> done(std::forward<WriteHandler>(handler));
        ++nest.depth;
        nest.bytes += n;
        std::move(done)(ec, n);
        if (--nest.depth == 0) nest.bytes = 0;
        return;
      }
      // Would block, wrote nothing, or failed: the asynchronous write
      // waits for the socket or reports the error.
    }
    Base::async_write_some(buffers, std::forward<WriteHandler>(handler));
  }

 private:
  int max_nested_ = kMaxNested;
  size_t max_bytes_ = kMaxBytes;
};

// A WebSocket's closing handshake ends with the socket's teardown, as for
// Beast's own streams (found by argument-dependent lookup).
template <class Protocol>
void teardown(boost::beast::role_type role, EagerStream<Protocol>& stream,
              boost::system::error_code& ec) {
  using boost::beast::websocket::teardown;
  teardown(role, stream.socket(), ec);
}

template <class Protocol, class TeardownHandler>
void async_teardown(boost::beast::role_type role, EagerStream<Protocol>& stream,
                    TeardownHandler&& handler) {
  using boost::beast::websocket::async_teardown;
  async_teardown(role, stream.socket(), std::forward<TeardownHandler>(handler));
}

}  // namespace drover::net::internal

#endif  // DROVER_NET_EAGER_STREAM_H_
