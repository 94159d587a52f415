// ConnectionServer's drain (BeginDrain, then Stop) over real sockets: a keep-alive connection
// whose answer was written before the drain began, and that goes idle after it began, stays open
// until Stop, so the client's next request on it is answered (with Connection: close).
#include <gtest/gtest.h>
#include <poll.h>
#include <prometheus/registry.h>

#include <boost/asio.hpp>
#include <chrono>
#include <string>

#include "server/connection_server.h"

namespace aw::server {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

// A free loopback port (ConnectionServer cannot report the one it picked for port 0).
int FreePort() {
  net::io_context probe;
  tcp::acceptor a(probe, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  return a.local_endpoint().port();
}

ConnectionOptions PlainOptions() {
  ConnectionOptions opts;
  opts.name = "drain-test";
  opts.bind_address = "127.0.0.1";
  opts.port = FreePort();
  opts.io_threads = 1;
  return opts;
}

// Whether the socket becomes readable (data or EOF) within `ms`.
bool Readable(tcp::socket& s, int ms) {
  pollfd p{s.native_handle(), POLLIN, 0};
  return ::poll(&p, 1, ms) == 1;
}

// Reads one HTTP/1.1 response with a Content-Length body, after the `got` bytes of it already read
// (when `head_only`, returns once its head is in); "" when the connection ended first.
std::string ReadResponse(tcp::socket& s, std::string got = "", bool head_only = false) {
  char buf[65536];
  size_t need = std::string::npos;
  for (;;) {
    if (need == std::string::npos) {
      const size_t end = got.find("\r\n\r\n");
      if (end != std::string::npos) {
        if (head_only) return got;
        const size_t at = got.find("Content-Length: ");
        if (at == std::string::npos || at > end) return got;
        need = end + 4 + std::stoul(got.substr(at + 16));
      }
    }
    if (need != std::string::npos && got.size() >= need) return got;
    if (!Readable(s, 5000)) return "";
    boost::system::error_code ec;
    // Small reads while the head is awaited: the rest stays unread in the socket buffers.
    const size_t n =
        s.read_some(net::buffer(buf, need == std::string::npos ? 1024 : sizeof buf), ec);
    if (ec) return "";
    got.append(buf, n);
  }
}

HttpResponse Answer(const HttpRequest& req) {
  HttpResponse out;
  // /big: an answer larger than the loopback socket buffers, so that its write is still going on
  // when the test begins the drain.
  out.body = req.path == "/big" ? std::string(32 << 20, 'b') : std::string("ok");
  return out;
}

// A started plain listener answering with Answer, and the client side's io_context.
struct Served {
  prometheus::Registry registry;
  const ConnectionOptions opts = PlainOptions();
  ConnectionServer server{opts, Answer, nullptr, registry};
  net::io_context ioc;

  tcp::socket Connect() {
    tcp::socket sock(ioc);
    sock.connect(
        tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<uint16_t>(opts.port)));
    return sock;
  }
};

TEST(ConnectionServerDrain, AnAnswerWrittenBeforeTheDrainKeepsItsConnectionUntilStop) {
  Served s;
  ConnectionServer& server = s.server;
  ASSERT_TRUE(server.Start().ok());
  tcp::socket sock = s.Connect();
  net::write(sock, net::buffer(std::string("GET /big HTTP/1.1\r\nHost: t\r\n\r\n")));
  // Its head is on the wire (keep-alive decided) and most of its 32 MiB body is not: the server
  // is still writing it when the drain begins, and goes idle only after.
  const std::string head = ReadResponse(sock, "", true);
  ASSERT_FALSE(head.empty());
  server.BeginDrain();
  const std::string big = ReadResponse(sock, head);
  ASSERT_EQ(big.rfind("HTTP/1.1 200", 0), 0u) << big.substr(0, 200);
  EXPECT_EQ(big.find("Connection: close"), std::string::npos);  // decided before the drain
  // The connection is idle now, after the drain began: it must stay open.
  EXPECT_FALSE(Readable(sock, 300)) << "the server closed an idle connection before Stop";
  net::write(sock, net::buffer(std::string("GET /small HTTP/1.1\r\nHost: t\r\n\r\n")));
  const std::string small = ReadResponse(sock);
  ASSERT_EQ(small.rfind("HTTP/1.1 200", 0), 0u) << small;
  EXPECT_NE(small.find("Connection: close"), std::string::npos) << small;
  EXPECT_EQ(small.substr(small.size() - 2), "ok");
  sock.close();
  server.Stop();
  EXPECT_TRUE(server.WaitStopped(std::chrono::seconds(5)));
}

TEST(ConnectionServerDrain, IdleConnectionsStayThroughTheDrainAndCloseAtStop) {
  Served s;
  ConnectionServer& server = s.server;
  ASSERT_TRUE(server.Start().ok());
  tcp::socket sock = s.Connect();
  net::write(sock, net::buffer(std::string("GET /small HTTP/1.1\r\nHost: t\r\n\r\n")));
  const std::string first = ReadResponse(sock);
  ASSERT_EQ(first.rfind("HTTP/1.1 200", 0), 0u) << first;
  server.BeginDrain();
  EXPECT_FALSE(server.Serving());
  EXPECT_FALSE(Readable(sock, 300)) << "closed during the drain";
  // New connections are still accepted and answered, with Connection: close.
  tcp::socket fresh = s.Connect();
  net::write(fresh, net::buffer(std::string("GET /small HTTP/1.1\r\nHost: t\r\n\r\n")));
  const std::string answer = ReadResponse(fresh);
  ASSERT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
  EXPECT_NE(answer.find("Connection: close"), std::string::npos) << answer;
  fresh.close();
  server.Stop();
  ASSERT_TRUE(Readable(sock, 5000)) << "Stop left an idle connection open";
  char c;
  boost::system::error_code ec;
  sock.read_some(net::buffer(&c, 1), ec);
  EXPECT_EQ(ec, net::error::eof);
  EXPECT_TRUE(server.WaitStopped(std::chrono::seconds(5)));
}

}  // namespace
}  // namespace aw::server
