// TlsStream (server/tls_stream.h): the listener's TLS stream against Asio's own TLS client over
// real sockets on 127.0.0.1, certificates made in memory.
#include "server/tls_stream.h"

#include <gtest/gtest.h>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>

#include "server/tls_context.h"
#include "test_certs.h"

namespace aw::server {
namespace {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = net::ip::tcp;
using boost::system::error_code;
using net::awaitable;
using net::use_awaitable;

struct FixedKeyPair final : KeyPairSource {
  std::shared_ptr<const KeyPair> pair;
  std::shared_ptr<const KeyPair> Current() const override { return pair; }
};

class TlsStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ca_ = testing::MakeCert("ca", nullptr, true);
    testing::Cert leaf = testing::MakeCert("server", &ca_, false);
    auto kp = ParseKeyPair(leaf.cert_pem(), leaf.key_pem());
    ASSERT_TRUE(kp.ok()) << kp.status().message();
    keys_.pair = *kp;
    ASSERT_TRUE(ConfigureServerContext(server_ctx_.native_handle(), &keys_));
    client_ctx_.set_verify_mode(ssl::verify_none);
    acceptor_.open(tcp::v4());
    acceptor_.bind(tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
    acceptor_.listen();
  }

  // Runs `body` on the io_context until it returns (at most 20 s); rethrows what it threw.
  void Run(awaitable<void> body) {
    bool done = false;
    std::exception_ptr failure;
    net::co_spawn(ioc_, std::move(body), [&](std::exception_ptr e) {
      failure = e;
      done = true;
    });
    ioc_.run_for(std::chrono::seconds(20));
    ASSERT_TRUE(done) << "the test's coroutine did not finish";
    if (failure) std::rethrow_exception(failure);
  }

  // A connected client socket and the server's TlsStream over the accepted socket.
  awaitable<void> Connect(tcp::socket& client) {
    co_await client.async_connect(acceptor_.local_endpoint(), use_awaitable);
    tcp::socket accepted = co_await acceptor_.async_accept(use_awaitable);
    server_.emplace(std::move(accepted), server_ctx_);
  }

  // Both handshakes, concurrently; returns the server's result.
  awaitable<error_code> Handshake(ssl::stream<tcp::socket>& client) {
    error_code server_ec, client_ec;
    int left = 2;
    net::steady_timer both(ioc_, std::chrono::steady_clock::time_point::max());
    server_->async_handshake([&](error_code ec) {
      server_ec = ec;
      if (--left == 0) both.cancel();
    });
    client.async_handshake(ssl::stream_base::client, [&](error_code ec) {
      client_ec = ec;
      if (--left == 0) both.cancel();
    });
    error_code ignored;
    co_await both.async_wait(net::redirect_error(use_awaitable, ignored));
    EXPECT_FALSE(client_ec) << client_ec.message();
    co_return server_ec;
  }

  // Polls `done` every 10 ms for up to 2 s (the caller checks the outcome).
  template <class Pred>
  awaitable<void> WaitUntil(Pred done) {
    for (int i = 0; i < 200 && !done(); ++i) {
      net::steady_timer t(ioc_, std::chrono::milliseconds(10));
      co_await t.async_wait(use_awaitable);
    }
  }

  net::io_context ioc_;
  testing::Cert ca_;
  FixedKeyPair keys_;
  ssl::context server_ctx_{ssl::context::tls_server};
  ssl::context client_ctx_{ssl::context::tls_client};
  tcp::acceptor acceptor_{ioc_};
  std::optional<TlsStream> server_;
};

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 251) % 26);
  return s;
}

TEST_F(TlsStreamTest, MovesBytesBothWaysAndHoldsNoBufferBetweenOperations) {
  Run([&]() -> awaitable<void> {
    ssl::stream<tcp::socket> client(ioc_, client_ctx_);
    co_await Connect(client.next_layer());
    error_code hs = co_await Handshake(client);
    EXPECT_FALSE(hs) << hs.message();
    EXPECT_EQ(server_->BufferCapacity(), 0u);

    // A request of several records, read through small plaintext buffers.
    const std::string request = Pattern(40'000);
    co_await net::async_write(client, net::buffer(request), use_awaitable);
    std::string got(request.size(), '\0');
    size_t n = co_await net::async_read(*server_, net::buffer(got), use_awaitable);
    EXPECT_EQ(n, request.size());
    EXPECT_EQ(got, request);
    EXPECT_EQ(server_->BufferCapacity(), 0u);

    // A response larger than one async_write_some takes.
    const std::string response = Pattern(3 * TlsStream::kMaxWriteBytes + 123);
    std::string back(response.size(), '\0');
    error_code read_ec, write_ec;
    size_t read_n = 0, written = 0;
    int left = 2;
    net::steady_timer both(ioc_, std::chrono::steady_clock::time_point::max());
    net::async_write(*server_, net::buffer(response), [&](error_code ec, size_t k) {
      write_ec = ec;
      written = k;
      if (--left == 0) both.cancel();
    });
    net::async_read(client, net::buffer(back), [&](error_code ec, size_t k) {
      read_ec = ec;
      read_n = k;
      if (--left == 0) both.cancel();
    });
    error_code ignored;
    co_await both.async_wait(net::redirect_error(use_awaitable, ignored));
    EXPECT_FALSE(write_ec) << write_ec.message();
    EXPECT_FALSE(read_ec) << read_ec.message();
    EXPECT_EQ(written, response.size());
    EXPECT_EQ(read_n, response.size());
    EXPECT_EQ(back, response);
    EXPECT_EQ(server_->BufferCapacity(), 0u);
  }());
}

TEST_F(TlsStreamTest, ASecondOperationWhileOneRunsIsRefusedAndChangesNothing) {
  Run([&]() -> awaitable<void> {
    ssl::stream<tcp::socket> client(ioc_, client_ctx_);
    co_await Connect(client.next_layer());
    EXPECT_FALSE(co_await Handshake(client));
    char first[16];
    std::optional<error_code> first_ec;
    size_t first_n = 0;
    server_->async_read_some(net::buffer(first), [&](error_code ec, size_t n) {
      first_ec = ec;
      first_n = n;
    });
    char second[16];
    error_code second_ec;
    co_await server_->async_read_some(net::buffer(second),
                                      net::redirect_error(use_awaitable, second_ec));
    EXPECT_EQ(second_ec, net::error::in_progress);
    EXPECT_FALSE(first_ec.has_value()) << "the first read completed before any data was sent";
    co_await net::async_write(client, net::buffer(std::string("hello")), use_awaitable);
    co_await WaitUntil([&] { return first_ec.has_value(); });
    EXPECT_TRUE(first_ec.has_value());
    if (!first_ec) co_return;
    EXPECT_FALSE(*first_ec) << first_ec->message();
    EXPECT_EQ(std::string(first, first_n), "hello");
  }());
}

TEST_F(TlsStreamTest, ThePeersCloseNotifyAndATcpEndAreEof) {
  Run([&]() -> awaitable<void> {
    {
      ssl::stream<tcp::socket> client(ioc_, client_ctx_);
      co_await Connect(client.next_layer());
      EXPECT_FALSE(co_await Handshake(client));
      // Sends close_notify, then waits for the server's, which ends when the server closes.
      bool shut = false;
      client.async_shutdown([&](error_code) { shut = true; });
      char buf[16];
      error_code ec;
      co_await server_->async_read_some(net::buffer(buf), net::redirect_error(use_awaitable, ec));
      EXPECT_EQ(ec, net::error::eof) << ec.message();
      server_->next_layer().close();
      co_await WaitUntil([&] { return shut; });
      EXPECT_TRUE(shut);
      if (!shut) client.next_layer().close();
    }
    {
      ssl::stream<tcp::socket> client(ioc_, client_ctx_);
      co_await Connect(client.next_layer());
      EXPECT_FALSE(co_await Handshake(client));
      // No close_notify: only a FIN (a close() would be a reset, as the server's session
      // tickets are still unread).
      client.next_layer().shutdown(tcp::socket::shutdown_send);
      char buf[16];
      error_code ec;
      co_await server_->async_read_some(net::buffer(buf), net::redirect_error(use_awaitable, ec));
      EXPECT_EQ(ec, net::error::eof) << ec.message();
    }
  }());
}

TEST_F(TlsStreamTest, PlainHttpInsteadOfAClientHelloIsATlsError) {
  Run([&]() -> awaitable<void> {
    tcp::socket client(ioc_);
    co_await Connect(client);
    co_await net::async_write(client, net::buffer(std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n")),
                              use_awaitable);
    error_code ec;
    co_await server_->async_handshake(net::redirect_error(use_awaitable, ec));
    EXPECT_EQ(ec.category(), net::error::get_ssl_category()) << ec.message();
    EXPECT_EQ(server_->BufferCapacity(), 0u);
  }());
}

TEST_F(TlsStreamTest, ASilentClientOverrunsTheNextLayersExpiryAsTimeout) {
  Run([&]() -> awaitable<void> {
    tcp::socket client(ioc_);
    co_await Connect(client);
    server_->next_layer().expires_after(std::chrono::milliseconds(100));
    const auto start = std::chrono::steady_clock::now();
    error_code ec;
    co_await server_->async_handshake(net::redirect_error(use_awaitable, ec));
    EXPECT_EQ(ec, boost::beast::error::timeout) << ec.message();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  }());
}

TEST_F(TlsStreamTest, CancelAbortsAReadAndTheStreamStaysUsable) {
  Run([&]() -> awaitable<void> {
    ssl::stream<tcp::socket> client(ioc_, client_ctx_);
    co_await Connect(client.next_layer());
    EXPECT_FALSE(co_await Handshake(client));
    char buf[16];
    std::optional<error_code> aborted;
    server_->async_read_some(net::buffer(buf), [&](error_code ec, size_t) { aborted = ec; });
    net::steady_timer t(ioc_, std::chrono::milliseconds(20));
    co_await t.async_wait(use_awaitable);
    server_->next_layer().cancel();
    co_await WaitUntil([&] { return aborted.has_value(); });
    EXPECT_TRUE(aborted.has_value());
    if (!aborted) co_return;
    EXPECT_EQ(*aborted, net::error::operation_aborted);
    co_await net::async_write(client, net::buffer(std::string("again")), use_awaitable);
    size_t n = co_await server_->async_read_some(net::buffer(buf), use_awaitable);
    EXPECT_EQ(std::string(buf, n), "again");
  }());
}

}  // namespace
}  // namespace aw::server
