// Probes against real local sockets: HTTP 200/503/slow/closed/garbage, TCP open/closed,
// UDP reply/no reply/port closed, bounded concurrency, and the status-line parser.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "probe/core/http_status.h"
#include "probe/prober.h"
#include "runtime/dispatcher.h"
#include "runtime/io_thread.h"

namespace aw::probe {
namespace {

// A socket bound to 127.0.0.1 on an ephemeral port.
class Bound {
 public:
  explicit Bound(int type) {
    fd_ = ::socket(AF_INET, type, 0);
    int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    if (type == SOCK_STREAM) ::listen(fd_, 64);
  }
  ~Bound() { Close(); }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd() const { return fd_; }
  uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

// Accepts connections and answers each with `response` (after reading the request head),
// or closes at once when `response` is empty, or holds the connection when `hold` is set.
class TinyHttp {
 public:
  TinyHttp(std::string response, bool hold = false)
      : listener_(SOCK_STREAM), response_(std::move(response)), hold_(hold) {
    thread_ = std::thread([this] { Serve(); });
  }
  ~TinyHttp() {
    stop_ = true;
    ::shutdown(listener_.fd(), SHUT_RDWR);
    thread_.join();
    for (int fd : held_) ::close(fd);
  }
  uint16_t port() const { return listener_.port(); }
  std::string last_request() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_request_;
  }

 private:
  void Serve() {
    while (!stop_) {
      int c = ::accept(listener_.fd(), nullptr, nullptr);
      if (c < 0) return;
      if (response_.empty() && !hold_) {
        ::close(c);
        continue;
      }
      std::string req;
      char buf[512];
      while (req.find("\r\n\r\n") == std::string::npos) {
        ssize_t n = ::recv(c, buf, sizeof(buf), 0);
        if (n <= 0) break;
        req.append(buf, static_cast<size_t>(n));
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        last_request_ = req;
      }
      if (hold_) {
        held_.push_back(c);
        continue;
      }
      ::send(c, response_.data(), response_.size(), MSG_NOSIGNAL);
      ::close(c);
    }
  }

  Bound listener_;
  std::string response_;
  bool hold_;
  std::atomic<bool> stop_{false};
  std::vector<int> held_;
  std::mutex mu_;
  std::string last_request_;
  std::thread thread_;
};

Result RunProbe(Prober& prober, Target target) {
  std::promise<Result> p;
  auto f = p.get_future();
  prober.Probe(target, [&p](Result r) { p.set_value(std::move(r)); });
  return f.get();
}

// A prober with its event loop running (the test fails at once when the system refuses one).
std::unique_ptr<SocketProber> MustCreate(ProberOptions options) {
  auto p = SocketProber::Create(std::move(options));
  if (!p.ok()) {
    ADD_FAILURE() << p.status().ToString();
    std::abort();
  }
  return std::move(*p);
}

ProberOptions Opts(int timeout_ms = 300) {
  ProberOptions o;
  o.timeout = std::chrono::milliseconds(timeout_ms);
  o.max_concurrency = 8;
  o.udp_payload = "are-you-there";
  return o;
}

TEST(ProbeHttp, Status200IsReady) {
  TinyHttp server("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  auto owned = MustCreate(Opts());
  SocketProber& prober = *owned;
  Result r = RunProbe(prober, {Type::kHttp, "127.0.0.1", server.port(), "/ready?x=1"});
  EXPECT_EQ(r.status, Status::kSuccess) << r.detail;
  std::string req = server.last_request();
  EXPECT_EQ(req.rfind("GET /ready?x=1 HTTP/1.1\r\n", 0), 0u) << req;
  EXPECT_NE(req.find("Host: 127.0.0.1:" + std::to_string(server.port())), std::string::npos);
}

TEST(ProbeHttp, Status204IsReady) {
  TinyHttp server("HTTP/1.0 204 No Content\r\n\r\n");
  auto owned = MustCreate(Opts());
  SocketProber& prober = *owned;
  EXPECT_TRUE(RunProbe(prober, {Type::kHttp, "127.0.0.1", server.port(), "/"}).ok());
}

TEST(ProbeHttp, Status503IsNotReady) {
  TinyHttp server("HTTP/1.1 503 Service Unavailable\r\n\r\n");
  auto owned = MustCreate(Opts());
  SocketProber& prober = *owned;
  Result r = RunProbe(prober, {Type::kHttp, "127.0.0.1", server.port(), "/"});
  EXPECT_EQ(r.status, Status::kFailure);
  EXPECT_EQ(r.detail, "http 503");
}

TEST(ProbeHttp, RedirectIsNotReady) {
  TinyHttp server("HTTP/1.1 302 Found\r\nLocation: /x\r\n\r\n");
  auto owned = MustCreate(Opts());
  SocketProber& prober = *owned;
  EXPECT_EQ(RunProbe(prober, {Type::kHttp, "127.0.0.1", server.port(), "/"}).status,
            Status::kFailure);
}

TEST(ProbeHttp, SlowServerTimesOut) {
  TinyHttp server("", /*hold=*/true);
  auto owned = MustCreate(Opts(100));
  SocketProber& prober = *owned;
  Result r = RunProbe(prober, {Type::kHttp, "127.0.0.1", server.port(), "/"});
  EXPECT_EQ(r.status, Status::kTimeout) << r.detail;
}

TEST(ProbeHttp, ClosedConnectionIsNotReady) {
  TinyHttp server("");
  auto owned = MustCreate(Opts());
  SocketProber& prober = *owned;
  Result r = RunProbe(prober, {Type::kHttp, "127.0.0.1", server.port(), "/"});
  EXPECT_EQ(r.status, Status::kFailure) << r.detail;
}

TEST(ProbeHttp, GarbageIsNotReady) {
  TinyHttp server("SSH-2.0-OpenSSH\r\n");
  auto owned = MustCreate(Opts());
  SocketProber& prober = *owned;
  Result r = RunProbe(prober, {Type::kHttp, "127.0.0.1", server.port(), "/"});
  EXPECT_EQ(r.status, Status::kFailure);
  EXPECT_EQ(r.detail, "malformed HTTP response");
}

TEST(ProbeHttp, ClosedPortIsNotReady) {
  uint16_t port;
  {
    Bound b(SOCK_STREAM);
    port = b.port();
  }
  auto owned = MustCreate(Opts());
  SocketProber& prober = *owned;
  Result r = RunProbe(prober, {Type::kHttp, "127.0.0.1", port, "/"});
  EXPECT_EQ(r.status, Status::kFailure);
  EXPECT_EQ(r.detail, "connection refused");
}

TEST(ProbeHttp, BadPathIsAnError) {
  auto owned = MustCreate(Opts());
  SocketProber& prober = *owned;
  EXPECT_EQ(RunProbe(prober, {Type::kHttp, "127.0.0.1", 80, "/a b\r\nX: y"}).status,
            Status::kError);
  EXPECT_EQ(RunProbe(prober, {Type::kHttp, "127.0.0.1", 80, "nopath"}).status, Status::kError);
}

TEST(ProbeTcp, OpenPortIsReady) {
  Bound listener(SOCK_STREAM);
  auto owned = MustCreate(Opts());
  SocketProber& prober = *owned;
  Result r = RunProbe(prober, {Type::kTcp, "127.0.0.1", listener.port(), ""});
  EXPECT_EQ(r.status, Status::kSuccess) << r.detail;
}

TEST(ProbeTcp, ClosedPortIsNotReady) {
  uint16_t port;
  {
    Bound b(SOCK_STREAM);
    port = b.port();
  }
  auto owned = MustCreate(Opts());
  SocketProber& prober = *owned;
  Result r = RunProbe(prober, {Type::kTcp, "127.0.0.1", port, ""});
  EXPECT_EQ(r.status, Status::kFailure);
}

TEST(ProbeTcp, Ipv6LoopbackAndHostNames) {
  Bound listener(SOCK_STREAM);
  auto owned = MustCreate(Opts());
  SocketProber& prober = *owned;
  // "localhost" may resolve to ::1 first (refused): resolution itself must work.
  EXPECT_NE(RunProbe(prober, {Type::kTcp, "localhost", listener.port(), ""}).status,
            Status::kError);
  Result bad = RunProbe(prober, {Type::kTcp, "no-such-host.invalid", listener.port(), ""});
  EXPECT_EQ(bad.status, Status::kError);
  EXPECT_EQ(RunProbe(prober, {Type::kTcp, "", listener.port(), ""}).status, Status::kError);
  EXPECT_EQ(RunProbe(prober, {Type::kTcp, "127.0.0.1", 0, ""}).status, Status::kError);
}

TEST(ProbeUdp, ReplyIsReady) {
  Bound server(SOCK_DGRAM);
  std::string got;
  std::thread echo([&] {
    char buf[256];
    sockaddr_in from{};
    socklen_t len = sizeof(from);
    ssize_t n =
        ::recvfrom(server.fd(), buf, sizeof(buf), 0, reinterpret_cast<sockaddr*>(&from), &len);
    if (n > 0) {
      got.assign(buf, static_cast<size_t>(n));
      ::sendto(server.fd(), "pong", 4, 0, reinterpret_cast<sockaddr*>(&from), len);
    }
  });
  auto owned = MustCreate(Opts());
  SocketProber& prober = *owned;
  Result r = RunProbe(prober, {Type::kUdp, "127.0.0.1", server.port(), ""});
  echo.join();
  EXPECT_EQ(r.status, Status::kSuccess) << r.detail;
  EXPECT_EQ(got, "are-you-there");
}

TEST(ProbeUdp, NoReplyTimesOut) {
  Bound server(SOCK_DGRAM);  // bound, never answers
  auto owned = MustCreate(Opts(100));
  SocketProber& prober = *owned;
  Result r = RunProbe(prober, {Type::kUdp, "127.0.0.1", server.port(), ""});
  EXPECT_EQ(r.status, Status::kTimeout) << r.detail;
}

TEST(ProbeUdp, ClosedPortIsNotReadyOrTimesOut) {
  uint16_t port;
  {
    Bound b(SOCK_DGRAM);
    port = b.port();
  }
  auto owned = MustCreate(Opts(200));
  SocketProber& prober = *owned;
  Result r = RunProbe(prober, {Type::kUdp, "127.0.0.1", port, ""});
  EXPECT_FALSE(r.ok());
}

TEST(Prober, BoundedConcurrencyRunsEveryProbe) {
  TinyHttp server("HTTP/1.1 200 OK\r\n\r\n");
  ProberOptions o = Opts(5000);
  o.max_concurrency = 3;
  auto owned = MustCreate(o);
  SocketProber& prober = *owned;
  constexpr int kProbes = 200;
  std::atomic<int> ok{0};
  std::atomic<int> done{0};
  std::promise<void> all;
  for (int i = 0; i < kProbes; ++i) {
    prober.Probe({Type::kHttp, "127.0.0.1", server.port(), "/"}, [&](Result r) {
      EXPECT_LE(prober.Active(), 3u);
      if (r.ok()) ok++;
      if (++done == kProbes) all.set_value();
    });
  }
  all.get_future().wait();
  EXPECT_EQ(ok.load(), kProbes);
}

TEST(Prober, PendingProbesFailWhenStopped) {
  TinyHttp server("", /*hold=*/true);
  std::atomic<int> stopped{0};
  {
    ProberOptions o = Opts(60'000);
    o.max_concurrency = 1;
    auto owned = MustCreate(o);
    SocketProber& prober = *owned;
    for (int i = 0; i < 5; ++i) {
      prober.Probe({Type::kHttp, "127.0.0.1", server.port(), "/"}, [&](Result r) {
        if (r.status == Status::kError) stopped++;
      });
    }
  }
  EXPECT_EQ(stopped.load(), 5);
}

// On the process's dispatcher (an executor given to Create): no thread of the prober's own; the
// probes run there, the ones in flight fail with "prober stopped" at destruction, and nothing of
// the prober is left on the dispatcher afterwards (run under ASan and TSan).
TEST(ProberOnDispatcher, ProbesRunOnTheGivenExecutorAndStopCleanly) {
  auto d = runtime::Dispatcher::Start("probe-test");
  ASSERT_TRUE(d.ok());
  TinyHttp ok_server("HTTP/1.1 200 OK\r\n\r\n");
  TinyHttp held("", /*hold=*/true);
  std::atomic<int> stopped{0};
  {
    ProberOptions o = Opts(60'000);
    auto p = SocketProber::Create(o, (*d)->executor());
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    SocketProber& prober = **p;
    std::promise<bool> on_dispatcher;
    prober.Probe({Type::kHttp, "127.0.0.1", ok_server.port(), "/"},
                 [&on_dispatcher, ex = (*d)->executor()](Result r) {
                   on_dispatcher.set_value(r.ok() && runtime::RunningOn(ex));
                 });
    EXPECT_TRUE(on_dispatcher.get_future().get());
    for (int i = 0; i < 3; ++i) {
      prober.Probe({Type::kHttp, "127.0.0.1", held.port(), "/"}, [&](Result r) {
        if (r.status == Status::kError) stopped++;
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // connected, answers held
  }
  EXPECT_EQ(stopped.load(), 3);
  EXPECT_TRUE((*d)->Stop(std::chrono::steady_clock::now() + std::chrono::seconds(5)).ok());
}

TEST(StatusLine, Parses) {
  EXPECT_EQ(ParseStatusLine("HTTP/1.1 200 OK\r\n").code, 200);
  EXPECT_EQ(ParseStatusLine("HTTP/1.0 503\r\n").code, 503);
  EXPECT_EQ(ParseStatusLine("HTTP/1.1 204 No Content\n").state, StatusLineState::kComplete);
  EXPECT_EQ(ParseStatusLine("HTTP/1.1 20").state, StatusLineState::kIncomplete);
  EXPECT_EQ(ParseStatusLine("HT").state, StatusLineState::kIncomplete);
  EXPECT_EQ(ParseStatusLine("").state, StatusLineState::kIncomplete);
  EXPECT_EQ(ParseStatusLine("XYZ").state, StatusLineState::kMalformed);
  EXPECT_EQ(ParseStatusLine("HTTP/2 200\r\n").state, StatusLineState::kMalformed);
  EXPECT_EQ(ParseStatusLine("HTTP/1.1 2x0 OK\r\n").state, StatusLineState::kMalformed);
  EXPECT_EQ(ParseStatusLine("HTTP/1.1 2000\r\n").state, StatusLineState::kMalformed);
  EXPECT_EQ(ParseStatusLine("HTTP/1.1 099\r\n").state, StatusLineState::kMalformed);
  EXPECT_EQ(ParseStatusLine("HTTP/1.1 " + std::string(2000, 'x')).state,
            StatusLineState::kMalformed);
  EXPECT_EQ(ParseStatusLine("HTTP/1.1 200 OK\r\n", 5).state, StatusLineState::kMalformed);
}

}  // namespace
// With no file descriptor left, Create() cannot make the event loop: it returns the error (which
// names the prober and the refused call) instead of throwing or returning a prober that cannot run.
// The sanitizer build (ASan + UBSan) cannot run this test: UBSan's vptr check opens a pipe to test
// that the memory it reads is mapped, and here every descriptor is taken on purpose, so it reports
// Asio's and boost::system_error's objects as invalid. The unsanitized unit suite runs it.
#if defined(__SANITIZE_ADDRESS__)
#define AW_PROBE_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
#define AW_PROBE_TEST_SANITIZED 1
#endif
#endif

TEST(Prober, NoFileDescriptorLeftIsAStatus) {
#ifdef AW_PROBE_TEST_SANITIZED
  GTEST_SKIP() << "needs descriptors for the sanitizer's own checks; run by the unsanitized suite";
#endif
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  const int lowest = ::dup(0);
  ASSERT_GE(lowest, 0);
  ::close(lowest);
  rlimit low = saved;
  low.rlim_cur = static_cast<rlim_t>(lowest) + 8;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> fillers;
  for (int fd; (fd = ::dup(0)) >= 0;) fillers.push_back(fd);
  auto got = SocketProber::Create(Opts());
  for (int fd : fillers) ::close(fd);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), aw::Status::Code::kIOError) << got.status().ToString();
  EXPECT_NE(got.status().message().find("prober: eventfd"), std::string::npos)
      << got.status().ToString();
  // With descriptors back, the same call succeeds and the prober works.
  auto again = SocketProber::Create(Opts());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  Result r = RunProbe(**again, {Type::kTcp, "127.0.0.1", 1, "/"});
  EXPECT_NE(r.status, Status::kSuccess);
}

}  // namespace aw::probe
