// ConnectionServer on an external executor (ConnectionOptions::executor: the health port on the
// process's runtime::Dispatcher): no io thread of its own, and on stop every connection is closed
// and destroyed before the server goes, while the io_context lives on (run under ASan and TSan).
#include <gtest/gtest.h>
#include <poll.h>
#include <prometheus/registry.h>

#include <boost/asio.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runtime/dispatcher.h"
#include "server/connection_server.h"
#include "server/health_server.h"

namespace aw::server {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

int FreePort() {
  net::io_context probe;
  tcp::acceptor a(probe, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  return a.local_endpoint().port();
}

// Whether the peer closed the socket (EOF or reset) within `ms`.
bool ClosedWithin(tcp::socket& s, int ms) {
  const auto until = Clock::now() + std::chrono::milliseconds(ms);
  char buf[4096];
  while (Clock::now() < until) {
    pollfd p{s.native_handle(), POLLIN, 0};
    if (::poll(&p, 1, 50) != 1) continue;
    boost::system::error_code ec;
    s.read_some(net::buffer(buf), ec);
    if (ec) return true;
  }
  return false;
}

// Whether `got` holds a whole response (its head and its Content-Length body).
bool Complete(const std::string& got) {
  const size_t end = got.find("\r\n\r\n");
  if (end == std::string::npos) return false;
  const size_t at = got.find("Content-Length: ");
  if (at == std::string::npos || at > end) return true;
  return got.size() >= end + 4 + std::stoul(got.substr(at + 16));
}

std::string Exchange(tcp::socket& s, const std::string& request) {
  net::write(s, net::buffer(request));
  std::string got;
  char buf[4096];
  while (!Complete(got)) {
    pollfd p{s.native_handle(), POLLIN, 0};
    if (::poll(&p, 1, 5000) != 1) break;
    boost::system::error_code ec;
    const size_t n = s.read_some(net::buffer(buf), ec);
    if (ec) break;
    got.append(buf, n);
  }
  return got;
}

struct Fixture {
  prometheus::Registry registry;  // outlives the dispatcher (and anything left on it)
  std::unique_ptr<runtime::Dispatcher> dispatcher =
      std::move(runtime::Dispatcher::Start("test")).value();
  net::io_context client_ioc;

  ConnectionOptions Options() {
    ConnectionOptions o;
    o.name = "external-test";
    o.bind_address = "127.0.0.1";
    o.port = FreePort();
    o.io_threads = 3;  // ignored: the external executor serves
    o.executor = dispatcher->executor();
    return o;
  }
  tcp::socket Connect(int port) {
    tcp::socket s(client_ioc);
    s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)));
    return s;
  }
  // The three kinds of open connection a stop meets: idle keep-alive (served once), new (nothing
  // sent yet), and in the middle of a request's head.
  std::vector<tcp::socket> OpenThree(int port) {
    std::vector<tcp::socket> v;
    v.push_back(Connect(port));
    EXPECT_NE(Exchange(v.back(), "GET /a HTTP/1.1\r\nHost: t\r\n\r\n").find("200 OK"),
              std::string::npos);
    v.push_back(Connect(port));
    v.push_back(Connect(port));
    net::write(v.back(), net::buffer(std::string("GET /half HTTP/1.1\r\nHo")));
    return v;
  }
};

HttpResponse Ok(const HttpRequest&) {
  HttpResponse r;
  r.body = "ok";
  return r;
}

TEST(ConnectionServerExternal, ServesOnTheGivenExecutorWithNoThreadOfItsOwn) {
  Fixture f;
  const ConnectionOptions opts = f.Options();
  ConnectionServer server(opts, Ok, nullptr, f.registry);
  EXPECT_EQ(server.executor(), f.dispatcher->executor());
  ASSERT_TRUE(server.Start().ok());
  tcp::socket s = f.Connect(opts.port);
  EXPECT_NE(Exchange(s, "GET / HTTP/1.1\r\nHost: t\r\n\r\n").find("200 OK"), std::string::npos);
  s.close();
  server.Stop();
  EXPECT_TRUE(server.WaitStopped(5s));
  EXPECT_EQ(server.LiveConnections(), 0u);
}

TEST(ConnectionServerExternal, StopClosesAndFreesEveryConnectionWhileTheExecutorRunsOn) {
  Fixture f;
  const ConnectionOptions opts = f.Options();
  auto server = std::make_unique<ConnectionServer>(opts, Ok, nullptr, f.registry);
  ASSERT_TRUE(server->Start().ok());
  std::vector<tcp::socket> clients = f.OpenThree(opts.port);
  std::this_thread::sleep_for(50ms);  // all three accepted
  EXPECT_EQ(server->LiveConnections(), 3u);
  server->Stop();
  // The half-sent request would take its read_timeout (10 s): not drained within 300 ms, so the
  // connection is closed.
  const auto start = Clock::now();
  EXPECT_FALSE(server->WaitStopped(300ms));
  EXPECT_LT(Clock::now() - start, 3s);
  EXPECT_EQ(server->LiveConnections(), 0u);
  EXPECT_EQ(server->OpenConnections(), 0u);
  for (auto& c : clients) EXPECT_TRUE(ClosedWithin(c, 2000));
  server.reset();
  // Nothing of the server is left on the dispatcher: it runs out of work at once.
  EXPECT_TRUE(f.dispatcher->Stop(Clock::now() + 5s).ok());
}

TEST(ConnectionServerExternal, DestroyedWithOpenConnectionsFreesThemAll) {
  Fixture f;
  const ConnectionOptions opts = f.Options();
  std::vector<tcp::socket> clients;
  {
    ConnectionServer server(opts, Ok, nullptr, f.registry);
    ASSERT_TRUE(server.Start().ok());
    clients = f.OpenThree(opts.port);
    std::this_thread::sleep_for(50ms);
  }  // no Stop: the destructor closes them and waits for them
  for (auto& c : clients) EXPECT_TRUE(ClosedWithin(c, 2000));
  EXPECT_TRUE(f.dispatcher->Stop(Clock::now() + 5s).ok());
}

TEST(ConnectionServerExternal, AConnectionArrivingAtTheStopIsClosedToo) {
  Fixture f;
  const ConnectionOptions opts = f.Options();
  ConnectionServer server(opts, Ok, nullptr, f.registry);
  ASSERT_TRUE(server.Start().ok());
  std::vector<tcp::socket> clients;
  std::thread opener([&] {
    for (int i = 0; i < 20; ++i) {
      boost::system::error_code ec;
      tcp::socket s(f.client_ioc);
      s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<uint16_t>(opts.port)),
                ec);
      if (ec) break;
      clients.push_back(std::move(s));
    }
  });
  std::this_thread::sleep_for(2ms);
  server.Stop();
  opener.join();
  server.WaitStopped(2s);
  EXPECT_EQ(server.LiveConnections(), 0u);
}

TEST(HealthServerOnDispatcher, AnswersAndStopsWithoutAThreadOfItsOwn) {
  Fixture f;
  const int port = FreePort();
  auto health = std::make_unique<HealthServer>("127.0.0.1", port, f.registry, HealthOptions{},
                                               f.dispatcher->executor());
  EXPECT_EQ(health->executor(), f.dispatcher->executor());
  ASSERT_TRUE(health->Start().ok());
  tcp::socket idle = f.Connect(port);
  EXPECT_NE(Exchange(idle, "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n").find("200 OK"),
            std::string::npos);
  tcp::socket silent = f.Connect(port);
  std::this_thread::sleep_for(50ms);
  const auto start = Clock::now();
  health->Stop();
  EXPECT_LT(Clock::now() - start, 3s);
  EXPECT_TRUE(ClosedWithin(idle, 2000));
  EXPECT_TRUE(ClosedWithin(silent, 2000));
  health.reset();
  EXPECT_TRUE(f.dispatcher->Stop(Clock::now() + 5s).ok());
}

TEST(ConnectionServerExternalDeathTest, WaitStoppedOnTheExecutorsThreadFailsLoudly) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Fixture f;
        ConnectionServer server(f.Options(), Ok, nullptr, f.registry);
        net::post(f.dispatcher->executor(), [&server] { server.WaitStopped(1s); });
        std::this_thread::sleep_for(5s);
      },
      "ConnectionServer::WaitStopped called on its own I/O thread");
}

}  // namespace
}  // namespace aw::server
