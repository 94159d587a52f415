// AllocatorClient against real sockets: a plain-HTTP allocator (--disable-tls), the allocating
// POST never re-sent on a reused connection that turns out closed, the per-attempt timeout and
// the deadline counted from the queue, and --allocator-server-name over real TLS.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <prometheus/registry.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "gateway/io/allocator_client.h"
#include "loopback_http_test_util.h"
#include "runtime/io_thread.h"
#include "server/connection_server.h"
#include "server/tls_keypair.h"
#include "test_certs.h"

namespace aw::gateway {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

using test_util::Listener;
using test_util::ReadRequest;

AllocatorAnswer Call(AllocatorClient& c, Clock::time_point deadline) {
  std::promise<AllocatorAnswer> p;
  auto f = p.get_future();
  c.Allocate("{}", deadline, [&p](AllocatorAnswer a) { p.set_value(std::move(a)); });
  return f.get();
}

constexpr std::string_view kOk =
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 23\r\n\r\n"
    "{\"gameServerName\":\"gs\"}";

TEST(AllocatorClient, PlainHttpAllocator) {
  Listener l;
  std::thread server([&] {
    int c = ::accept(l.fd, nullptr, nullptr);
    std::string carry;
    while (ReadRequest(c, &carry)) ::send(c, kOk.data(), kOk.size(), MSG_NOSIGNAL);
    ::close(c);
  });
  AllocatorOptions o;
  o.address = "http://127.0.0.1:" + std::to_string(l.port);
  o.workers = 1;
  AllocatorClient client(o);
  ASSERT_TRUE(client.Init().ok());
  EXPECT_TRUE(client.plain());
  client.Start();
  for (int i = 0; i < 3; ++i) {  // one kept-alive connection
    AllocatorAnswer a = Call(client, Clock::now() + 5s);
    ASSERT_TRUE(a.status.ok()) << a.status.ToString();
    EXPECT_EQ(a.http_status, 200);
    EXPECT_EQ(a.body, R"({"gameServerName":"gs"})");
  }
  client.Stop();
  server.join();
}

TEST(AllocatorClient, TlsOptionsRefusedForPlainHttp) {
  AllocatorOptions o;
  o.address = "http://allocator:8080";
  o.server_name = "x";
  EXPECT_FALSE(AllocatorClient(o).Init().ok());
  o.server_name.clear();
  o.ca_file = "/nonexistent";
  EXPECT_FALSE(AllocatorClient(o).Init().ok());
  o.ca_file.clear();
  o.address = "ftp://allocator";
  EXPECT_NE(AllocatorClient(o).Init().message().find("http://"), std::string::npos);
}

// Issue 23: the transport used to send a request again when a reused keep-alive connection was
// found closed; for the allocating POST that can allocate two servers. The allocator here reads
// the second request and closes without answering: the client must not send it a third time.
TEST(AllocatorClient, PostNeverResentOnAClosedReusedConnection) {
  Listener l;
  std::atomic<int> requests{0};
  std::atomic<bool> done{false};
  std::thread server([&] {
    int c = ::accept(l.fd, nullptr, nullptr);
    std::string carry;
    if (ReadRequest(c, &carry)) {
      requests.fetch_add(1);
      ::send(c, kOk.data(), kOk.size(), MSG_NOSIGNAL);
    }
    if (ReadRequest(c, &carry)) requests.fetch_add(1);
    ::close(c);  // as an allocator that restarted after reading it
    // Count any further request (a resend) for a while.
    timeval tv{1, 0};
    ::setsockopt(l.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    while (!done.load()) {
      int again = ::accept(l.fd, nullptr, nullptr);
      if (again < 0) continue;
      std::string c2;
      if (ReadRequest(again, &c2)) requests.fetch_add(1);
      ::send(again, kOk.data(), kOk.size(), MSG_NOSIGNAL);
      ::close(again);
    }
  });
  AllocatorOptions o;
  o.address = "http://127.0.0.1:" + std::to_string(l.port);
  o.workers = 1;
  AllocatorClient client(o);
  ASSERT_TRUE(client.Init().ok());
  client.Start();
  AllocatorAnswer first = Call(client, Clock::now() + 5s);
  ASSERT_TRUE(first.status.ok()) << first.status.ToString();
  AllocatorAnswer second = Call(client, Clock::now() + 5s);
  EXPECT_FALSE(second.status.ok());
  EXPECT_EQ(second.status.code(), Status::Code::kUnavailable);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(requests.load(), 2);
  done = true;
  client.Stop();
  server.join();
}

TEST(AllocatorClient, AttemptTimeoutIsTheSmallerOfFlagAndTimeLeft) {
  const auto now = Clock::now();
  EXPECT_EQ(AllocatorClient::AttemptTimeout(10s, now + 30s, now), 10000ms);
  EXPECT_EQ(AllocatorClient::AttemptTimeout(10s, now + 2s, now), 2000ms);
  EXPECT_LE(AllocatorClient::AttemptTimeout(10s, now - 1ms, now).count(), 0);
}

// An allocator that never answers: the attempt ends at --allocator-timeout, not the deadline;
// a call whose deadline passed while it was queued behind it is never made.
TEST(AllocatorClient, PerAttemptTimeoutAndQueueTimeCounted) {
  Listener l;
  std::atomic<int> accepted{0};
  std::atomic<bool> done{false};
  std::thread server([&] {
    timeval tv{0, 200000};
    ::setsockopt(l.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    std::vector<int> held;
    while (!done.load()) {
      int c = ::accept(l.fd, nullptr, nullptr);
      if (c >= 0) {
        accepted.fetch_add(1);
        held.push_back(c);  // reads nothing, answers nothing
      }
    }
    for (int c : held) ::close(c);
  });
  AllocatorOptions o;
  o.address = "http://127.0.0.1:" + std::to_string(l.port);
  o.workers = 1;
  o.timeout = 300ms;
  AllocatorClient client(o);
  ASSERT_TRUE(client.Init().ok());
  client.Start();
  std::promise<std::pair<AllocatorAnswer, Clock::duration>> p1, p2;
  const auto start = Clock::now();
  client.Allocate("{}", start + 10s, [&](AllocatorAnswer a) {
    p1.set_value({std::move(a), Clock::now() - start});
  });
  client.Allocate("{}", start + 100ms, [&](AllocatorAnswer a) {
    p2.set_value({std::move(a), Clock::now() - start});
  });
  auto [a1, t1] = p1.get_future().get();
  auto [a2, t2] = p2.get_future().get();
  EXPECT_EQ(a1.status.code(), Status::Code::kUnavailable) << a1.status.ToString();
  EXPECT_GE(t1, 250ms);
  EXPECT_LT(t1, 5s);  // the attempt's timeout, not the request's 10 s deadline
  EXPECT_EQ(a2.status.code(), Status::Code::kDeadlineExceeded) << a2.status.ToString();
  EXPECT_EQ(accepted.load(), 1);  // the queued call was never made
  done = true;
  client.Stop();
  server.join();
}

// Issue 25: the calls are asynchronous, on an executor the caller gives (the gateway's Kubernetes
// I/O thread): at most --allocator-workers of them reach the allocator at once, the others wait
// in the queue and all are answered; Stop() then ends a call the allocator never answers and one
// still queued, both Unavailable, and returns once no `done` runs any more.
TEST(AllocatorClient, AtMostWorkersInFlightOnTheGivenExecutorAndStopEndsEveryCall) {
  Listener l;
  std::atomic<int> active{0}, most{0}, served{0};
  std::atomic<bool> hold{false}, done{false};
  std::vector<std::thread> conns;
  std::thread server([&] {
    timeval tv{0, 100000};
    ::setsockopt(l.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    while (!done.load()) {
      int c = ::accept(l.fd, nullptr, nullptr);
      if (c < 0) continue;
      conns.emplace_back([&, c] {
        std::string carry;
        while (ReadRequest(c, &carry)) {
          const int now = active.fetch_add(1) + 1;
          int seen = most.load();
          while (now > seen && !most.compare_exchange_weak(seen, now)) {
          }
          if (hold.load()) break;             // never answers: the client must end the call itself
          std::this_thread::sleep_for(30ms);  // the allocator's work
          active.fetch_sub(1);
          served.fetch_add(1);
          ::send(c, kOk.data(), kOk.size(), MSG_NOSIGNAL);
        }
        while (!done.load()) std::this_thread::sleep_for(10ms);
        ::close(c);
      });
    }
  });
  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  std::thread io_thread([&io] { io.run(); });

  AllocatorOptions o;
  o.address = "http://127.0.0.1:" + std::to_string(l.port);
  o.workers = 2;
  auto client = std::make_unique<AllocatorClient>(o);
  ASSERT_TRUE(client->Init(io.get_executor()).ok());
  client->Start();
  constexpr int kCalls = 8;
  std::vector<std::promise<AllocatorAnswer>> answers(kCalls);
  for (auto& p : answers) {
    client->Allocate("{}", Clock::now() + 10s, [&p](AllocatorAnswer a) { p.set_value(a); });
  }
  for (auto& p : answers) {
    AllocatorAnswer a = p.get_future().get();
    ASSERT_TRUE(a.status.ok()) << a.status.ToString();
    EXPECT_EQ(a.http_status, 200);
  }
  EXPECT_EQ(served.load(), kCalls);
  EXPECT_EQ(most.load(), 2);  // never more than --allocator-workers at the allocator

  hold = true;
  active = 0;
  std::promise<AllocatorAnswer> held, queued;
  std::atomic<int> answered{0};
  client->Allocate("{}", Clock::now() + 10s, [&](AllocatorAnswer a) {
    answered.fetch_add(1);
    held.set_value(a);
  });
  client->Allocate("{}", Clock::now() + 10s, [&](AllocatorAnswer a) {
    answered.fetch_add(1);
    queued.set_value(a);
  });
  client->Allocate("{}", Clock::now() + 10s, [&](AllocatorAnswer a) {
    answered.fetch_add(1);
    (void)a;
  });
  for (int i = 0; i < 500 && active.load() < 2; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(active.load(), 2);  // two held at the allocator, the third queued
  const auto stop_start = Clock::now();
  client->Stop();
  EXPECT_LT(Clock::now() - stop_start, 2s);
  EXPECT_EQ(answered.load(), 3);  // every `done` ran before Stop() returned
  EXPECT_EQ(held.get_future().get().status.code(), Status::Code::kUnavailable);
  EXPECT_EQ(queued.get_future().get().status.code(), Status::Code::kUnavailable);
  client.reset();
  done = true;
  server.join();
  for (auto& t : conns) t.join();
  work.reset();
  io_thread.join();
}

// Issue 35: a call's callback holds the client's shared state, not the client. The owner destroys
// the client the moment its answer arrives, while the callback that delivered it is still
// finishing (freeing its slot): nothing freed is touched (run under ASan or TSan).
TEST(AllocatorClient, DestroyedAsSoonAsItsAnswerArrives) {
  Listener l;
  std::atomic<bool> done{false};
  std::vector<std::thread> conns;
  std::thread server([&] {
    timeval tv{0, 100000};
    ::setsockopt(l.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    while (!done.load()) {
      int c = ::accept(l.fd, nullptr, nullptr);
      if (c < 0) continue;
      conns.emplace_back([c] {
        std::string carry;
        while (ReadRequest(c, &carry)) ::send(c, kOk.data(), kOk.size(), MSG_NOSIGNAL);
        ::close(c);
      });
    }
  });
  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  std::thread io_thread([&io] { io.run(); });
  AllocatorOptions o;
  o.address = "http://127.0.0.1:" + std::to_string(l.port);
  o.workers = 1;
  for (int i = 0; i < 50; ++i) {
    auto client = std::make_unique<AllocatorClient>(o);
    ASSERT_TRUE(client->Init(i % 2 ? io.get_executor() : boost::asio::any_io_executor()).ok());
    client->Start();
    // Two calls: the first one's callback hands its slot to the second as the owner goes.
    std::promise<AllocatorAnswer> first;
    client->Allocate("{}", Clock::now() + 10s, [&first](AllocatorAnswer a) { first.set_value(a); });
    client->Allocate("{}", Clock::now() + 10s, [](AllocatorAnswer) {});
    EXPECT_EQ(first.get_future().get().http_status, 200);
    client.reset();  // Stop(): the second call ends (answered or Unavailable), then the client goes
  }
  done = true;
  server.join();
  for (auto& t : conns) t.join();
  work.reset();
  io_thread.join();
}

// Stop() waits for callbacks that run on the client's I/O thread: called there, it would hang
// forever. It fails at once with a message naming the rule instead.
TEST(AllocatorClientDeathTest, StopOnItsIoThreadFailsLoudly) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        boost::asio::io_context io;
        AllocatorOptions o;
        o.address = "http://127.0.0.1:1";
        AllocatorClient client(o);
        (void)client.Init(io.get_executor());
        client.Start();
        boost::asio::post(io, [&client] { client.Stop(); });
        io.run();
      },
      "AllocatorClient::Stop called on its own I/O thread");
}

TEST(IoThread, RunningOnTellsTheIoContextsThreadsApart) {
  boost::asio::io_context io;
  const boost::asio::any_io_executor ex = io.get_executor();
  const boost::asio::any_io_executor strand = boost::asio::make_strand(io);
  EXPECT_FALSE(runtime::RunningOn(ex));
  EXPECT_FALSE(runtime::RunningOn(strand));
  EXPECT_FALSE(runtime::RunningOn(boost::asio::any_io_executor()));
  bool on_io = false, on_strand = false, other = true;
  boost::asio::io_context elsewhere;
  boost::asio::post(io, [&] {
    on_io = runtime::RunningOn(ex);
    on_strand = runtime::RunningOn(strand);
    other = runtime::RunningOn(elsewhere.get_executor());
  });
  io.run();
  EXPECT_TRUE(on_io);
  EXPECT_TRUE(on_strand);
  EXPECT_FALSE(other);
  runtime::DieIfOn(ex, "not on it");  // returns: this thread does not run `io` now
}

// --allocator-server-name: a certificate that names only 127.0.0.1, dialled as "localhost" (as a
// Service name that the certificate does not carry): refused unless the expected name is given.
TEST(AllocatorClient, ServerNameIsTheVerifiedName) {
  using server::testing::Cert;
  using server::testing::MakeCert;
  Cert ca = MakeCert("allocation-ca", nullptr, true);
  Cert leaf = MakeCert("agones-allocator", &ca, false);  // IP SAN 127.0.0.1 only
  struct Pair final : server::KeyPairSource {
    std::shared_ptr<const server::KeyPair> pair;
    std::shared_ptr<const server::KeyPair> Current() const override { return pair; }
  } keypair;
  auto kp = server::ParseKeyPair(leaf.cert_pem(), leaf.key_pem());
  ASSERT_TRUE(kp.ok());
  keypair.pair = *kp;
  prometheus::Registry registry;
  std::unique_ptr<server::ConnectionServer> srv;
  int port = 0;
  for (int attempt = 0; attempt < 20 && port == 0; ++attempt) {
    server::ConnectionOptions co;
    co.name = "allocator";
    co.bind_address = "127.0.0.1";
    co.port = 20000 + static_cast<int>((::getpid() * 13 + attempt * 151) % 30000);
    srv = std::make_unique<server::ConnectionServer>(
        co,
        [](const server::HttpRequest&, server::Responder r) {
          r(server::HttpResponse{200, "application/json", R"({"gameServerName":"gs"})", {}});
        },
        &keypair, nullptr, registry);
    if (srv->Start().ok()) port = co.port;
  }
  ASSERT_NE(port, 0);
  const std::string ca_file = ::testing::TempDir() + "/allocator-ca-" + std::to_string(::getpid());
  std::ofstream(ca_file) << ca.cert_pem();
  auto run = [&](const std::string& server_name) {
    AllocatorOptions o;
    o.address = "https://localhost:" + std::to_string(port);
    o.ca_file = ca_file;
    o.server_name = server_name;
    o.workers = 1;
    AllocatorClient client(o);
    EXPECT_TRUE(client.Init().ok());
    client.Start();
    AllocatorAnswer a = Call(client, Clock::now() + 5s);
    client.Stop();
    return a;
  };
  AllocatorAnswer refused = run("");
  EXPECT_FALSE(refused.status.ok());
  AllocatorAnswer served = run("127.0.0.1");
  ASSERT_TRUE(served.status.ok()) << served.status.ToString();
  EXPECT_EQ(served.http_status, 200);
  srv->Stop();
  srv->WaitStopped(5s);
  std::remove(ca_file.c_str());
}

}  // namespace
}  // namespace aw::gateway
