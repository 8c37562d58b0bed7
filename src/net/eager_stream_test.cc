// EagerStream: a write the socket takes at once completes inside the call,
// so a TLS message of many records goes out in one turn of the loop; a full
// socket waits for the loop; nesting is bounded by count and by bytes.
#include "net/eager_stream.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <functional>
#include <string>
#include <thread>

#include "net/net_test_util.h"
#include "net/tls_identity.h"

namespace drover::net::internal {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Eager = EagerStream<tcp>;
using boost::system::error_code;

// A connected pair on loopback: `writer` is the EagerStream, `reader` a
// plain socket read synchronously by the test.
struct Pair {
  asio::io_context io;
  Eager writer{io};
  tcp::socket reader{io};

  explicit Pair(int send_buffer = 0) {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    if (send_buffer > 0) {
      writer.socket().open(tcp::v4());
      writer.socket().set_option(asio::socket_base::send_buffer_size(send_buffer));
    }
    writer.socket().connect(acceptor.local_endpoint());
    acceptor.accept(reader);
  }

  std::string ReadExactly(size_t n) {
    std::string got(n, '\0');
    asio::read(reader, asio::buffer(got));
    return got;
  }
};

TEST(EagerStreamTest, AWriteTheSocketTakesCompletesInsideTheCall) {
  Pair p;
  bool done = false;
  size_t written = 0;
  p.writer.async_write_some(asio::buffer(std::string_view("hello")), [&](error_code ec, size_t n) {
    EXPECT_FALSE(ec);
    done = true;
    written = n;
  });
  EXPECT_TRUE(done) << "the handler waited for the loop";
  EXPECT_EQ(written, 5u);
  EXPECT_EQ(p.ReadExactly(5), "hello");
}

TEST(EagerStreamTest, AFullSocketWaitsForTheLoopAndKeepsTheOrder) {
  Pair p(4096);
  // Fill the socket: the peer does not read yet.
  const std::string piece(64 * 1024, 'x');
  bool in_call = false;
  int inline_writes = 0;
  size_t inline_bytes = 0;
  size_t deferred_bytes = 0;
  bool waiting = false;
  for (int i = 0; i < 10000 && !waiting; ++i) {
    const int before = inline_writes;
    in_call = true;
    p.writer.async_write_some(asio::buffer(piece), [&](error_code ec, size_t n) {
      ASSERT_FALSE(ec);
      if (in_call) {
        ++inline_writes;
        inline_bytes += n;
      } else {
        deferred_bytes += n;
      }
    });
    in_call = false;
    waiting = inline_writes == before;
  }
  ASSERT_TRUE(waiting) << "a socket that nobody reads never filled";
  EXPECT_GT(inline_bytes, 0u);
  EXPECT_EQ(deferred_bytes, 0u);
  // The waiting write completes once the peer reads, after what went first.
  std::thread drain(
      [&] { EXPECT_EQ(p.ReadExactly(inline_bytes), std::string(inline_bytes, 'x')); });
  while (deferred_bytes == 0 && p.io.run_one() > 0) {
  }
  drain.join();
  EXPECT_GT(deferred_bytes, 0u);
  EXPECT_EQ(p.ReadExactly(deferred_bytes), std::string(deferred_bytes, 'x'));
}

TEST(EagerStreamTest, NestedCompletionsAreBoundedInNumber) {
  Pair p;
  int completed_inline = 0;
  int completed = 0;
  bool in_call = false;
  // Each completion starts the next one-byte write from inside, as a
  // composed write does.
  std::function<void()> next = [&] {
    in_call = true;
    p.writer.async_write_some(asio::buffer(std::string_view("y")), [&](error_code ec, size_t) {
      ASSERT_FALSE(ec);
      if (in_call) ++completed_inline;
      ++completed;
      if (completed < 200) next();
    });
    in_call = false;
  };
  next();
  // From the first call, kMaxNested ran nested; the next one waited.
  EXPECT_EQ(completed_inline, Eager::kMaxNested);
  EXPECT_EQ(completed, Eager::kMaxNested);
  while (completed < 200 && p.io.run_one() > 0) {
  }
  EXPECT_EQ(completed, 200);
  EXPECT_EQ(p.ReadExactly(200), std::string(200, 'y'));
}

TEST(EagerStreamTest, NestedCompletionsAreBoundedInBytes) {
  Pair p;
  p.writer.LimitNesting(Eager::kMaxNested, 10'000);
  const std::string piece(4'000, 'z');
  int completed = 0;
  int completed_inline = 0;
  bool in_call = false;
  std::function<void()> next = [&] {
    in_call = true;
    p.writer.async_write_some(asio::buffer(piece), [&](error_code ec, size_t n) {
      ASSERT_FALSE(ec);
      ASSERT_EQ(n, piece.size());
      if (in_call) ++completed_inline;
      ++completed;
      if (completed < 10) next();
    });
    in_call = false;
  };
  next();
  // 4,000 + 4,000 + 4,000 bytes reach the bound: the fourth write waits.
  EXPECT_EQ(completed_inline, 3);
  while (completed < 10 && p.io.run_one() > 0) {
  }
  EXPECT_EQ(completed, 10);
  EXPECT_EQ(p.ReadExactly(piece.size() * 10), std::string(piece.size() * 10, 'z'));
}

// The point of it: under TLS a large message is many records, each a write
// of the next layer; with a socket that takes them, the whole message goes
// out inside the call instead of one record per turn of the loop.
TEST(EagerStreamTest, ATlsMessageOfManyRecordsGoesOutInOneCall) {
  testing::TempDir dir;
  Result<TlsIdentity> id = LoadOrCreateTlsIdentity(dir.path());
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  asio::ssl::context server_ctx(asio::ssl::context::tls_server);
  server_ctx.use_certificate_chain(asio::buffer(id->cert_pem));
  server_ctx.use_private_key(asio::buffer(id->key_pem), asio::ssl::context::pem);
  asio::ssl::context client_ctx(asio::ssl::context::tls_client);

  Pair p(4 << 20);
  boost::beast::ssl_stream<Eager> server(std::move(p.writer), server_ctx);
  asio::ssl::stream<tcp::socket> client(std::move(p.reader), client_ctx);

  // Handshake: the client on a thread of its own (blocking), the server on
  // the test's io_context.
  std::thread client_side([&] { client.handshake(asio::ssl::stream_base::client); });
  bool shaken = false;
  server.async_handshake(asio::ssl::stream_base::server, [&](error_code ec) {
    ASSERT_FALSE(ec) << ec.message();
    shaken = true;
  });
  while (!shaken && p.io.run_one() > 0) {
  }
  client_side.join();
  ASSERT_TRUE(shaken);
  p.io.restart();

  // 256 KiB: sixteen records, each a write of the TCP layer below.
  std::string message(256 * 1024, '\0');
  for (size_t i = 0; i < message.size(); ++i) message[i] = static_cast<char>('a' + i % 26);
  std::string got(message.size(), '\0');
  std::thread reader([&] { asio::read(client, asio::buffer(got)); });
  bool done = false;
  asio::async_write(server, asio::buffer(message), [&](error_code ec, size_t n) {
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_EQ(n, message.size());
    done = true;
  });
  // Each time the peer's window is full the write waits for a turn; one
  // turn per record (sixteen) is what it took before.
  int turns = 0;
  while (!done && p.io.run_one() > 0) ++turns;
  EXPECT_TRUE(done);
  EXPECT_LE(turns, 6);
  reader.join();
  EXPECT_EQ(got, message);
}

}  // namespace
}  // namespace drover::net::internal
