// H2Session (server/h2_session.h) driven in memory by nghttp2's client API or by hand-made
// frames, and the ALPN choice of ConnectionServer's TLS listeners (h2 only where opted in).
#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>
#include <prometheus/registry.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/connection_server.h"
#include "server/h2_session.h"
#include "test_certs.h"

namespace aw::server {
namespace {

// A client stream's view of the answer.
struct ClientStream {
  std::map<std::string, std::string> headers;   // first HEADERS
  std::map<std::string, std::string> trailers;  // trailing HEADERS
  std::string body;
  bool closed = false;
  uint32_t close_error = 0;
  int header_blocks = 0;
};

// An nghttp2 client session wired to an H2Session in memory.
class Pair {
 public:
  explicit Pair(H2Options opts = {}) {
    server_ = std::make_unique<H2Session>(opts, [this](int32_t id, HttpRequest& req) {
      requests_.push_back({id, std::string(req.method), std::string(req.path),
                           std::string(req.content_type), std::string(req.body),
                           std::string(req.header("x-test")), req.body_too_large, req.http2});
      req.on_abandoned([this, id] { abandoned_.push_back(id); });
      if (on_request) on_request(id);
    });
    EXPECT_TRUE(server_->Start().ok());
    nghttp2_session_callbacks* cbs = nullptr;
    nghttp2_session_callbacks_new(&cbs);
    nghttp2_session_callbacks_set_on_header_callback(
        cbs, [](nghttp2_session*, const nghttp2_frame* f, const uint8_t* n, size_t nl,
                const uint8_t* v, size_t vl, uint8_t, void* u) {
          auto& st = static_cast<Pair*>(u)->streams_[f->hd.stream_id];
          auto& into = st.header_blocks > 0 ? st.trailers : st.headers;
          into[std::string(reinterpret_cast<const char*>(n), nl)] =
              std::string(reinterpret_cast<const char*>(v), vl);
          return 0;
        });
    nghttp2_session_callbacks_set_on_frame_recv_callback(
        cbs, [](nghttp2_session*, const nghttp2_frame* f, void* u) {
          if (f->hd.type == NGHTTP2_HEADERS)
            ++static_cast<Pair*>(u)->streams_[f->hd.stream_id].header_blocks;
          if (f->hd.type == NGHTTP2_GOAWAY) static_cast<Pair*>(u)->goaway_ = true;
          return 0;
        });
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(
        cbs, [](nghttp2_session*, uint8_t, int32_t id, const uint8_t* d, size_t n, void* u) {
          static_cast<Pair*>(u)->streams_[id].body.append(reinterpret_cast<const char*>(d), n);
          return 0;
        });
    nghttp2_session_callbacks_set_on_stream_close_callback(
        cbs, [](nghttp2_session*, int32_t id, uint32_t err, void* u) {
          auto& st = static_cast<Pair*>(u)->streams_[id];
          st.closed = true;
          st.close_error = err;
          return 0;
        });
    nghttp2_session_client_new(&client_, cbs, this);
    nghttp2_session_callbacks_del(cbs);
    nghttp2_submit_settings(client_, NGHTTP2_FLAG_NONE, nullptr, 0);
  }
  ~Pair() {
    server_.reset();
    nghttp2_session_del(client_);
  }

  // Moves bytes both ways until neither side has anything to send.
  void Pump() {
    for (int i = 0; i < 100; ++i) {
      bool moved = false;
      const uint8_t* data = nullptr;
      std::string to_server;
      for (ssize_t n; (n = nghttp2_session_mem_send(client_, &data)) > 0;) {
        to_server.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
      }
      if (!to_server.empty()) {
        moved = true;
        last_receive = server_->Receive(to_server);
      }
      std::string to_client = server_->TakeOutput();
      if (!to_client.empty()) {
        moved = true;
        server_->Flushed(true);
        nghttp2_session_mem_recv(client_, reinterpret_cast<const uint8_t*>(to_client.data()),
                                 to_client.size());
      }
      if (!moved) return;
    }
  }

  int32_t Request(const std::string& path, const std::string& body,
                  std::vector<std::pair<std::string, std::string>> extra = {}) {
    std::vector<std::pair<std::string, std::string>> fields = {
        {":method", "POST"},
        {":scheme", "https"},
        {":authority", "gw"},
        {":path", path},
        {"content-type", "application/grpc"}};
    for (auto& f : extra) fields.push_back(f);
    std::vector<nghttp2_nv> nva;
    for (auto& [n, v] : fields) {
      nva.push_back({reinterpret_cast<uint8_t*>(n.data()), reinterpret_cast<uint8_t*>(v.data()),
                     n.size(), v.size(), NGHTTP2_NV_FLAG_NONE});
    }
    bodies_.push_back(std::make_unique<std::pair<std::string, size_t>>(body, 0));
    nghttp2_data_provider dp{};
    dp.source.ptr = bodies_.back().get();
    dp.read_callback = [](nghttp2_session*, int32_t, uint8_t* buf, size_t len, uint32_t* flags,
                          nghttp2_data_source* src, void*) -> ssize_t {
      auto* b = static_cast<std::pair<std::string, size_t>*>(src->ptr);
      const size_t n = std::min(len, b->first.size() - b->second);
      std::memcpy(buf, b->first.data() + b->second, n);
      b->second += n;
      if (b->second == b->first.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
      return static_cast<ssize_t>(n);
    };
    return nghttp2_submit_request(client_, nullptr, nva.data(), nva.size(), &dp, nullptr);
  }

  struct Seen {
    int32_t id;
    std::string method, path, content_type, body, x_test;
    bool too_large, http2;
  };

  nghttp2_session* client_ = nullptr;
  std::unique_ptr<H2Session> server_;
  std::vector<Seen> requests_;
  std::vector<int32_t> abandoned_;
  std::map<int32_t, ClientStream> streams_;
  std::vector<std::unique_ptr<std::pair<std::string, size_t>>> bodies_;
  std::function<void(int32_t)> on_request;
  Status last_receive;
  bool goaway_ = false;
};

TEST(H2Session, RequestAndAnswerWithTrailers) {
  Pair p;
  const int32_t id = p.Request("/svc/Method?x=1", "payload", {{"x-test", "meta"}});
  p.Pump();
  ASSERT_EQ(p.requests_.size(), 1u);
  const auto& r = p.requests_[0];
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.path, "/svc/Method");
  EXPECT_EQ(r.content_type, "application/grpc");
  EXPECT_EQ(r.body, "payload");
  EXPECT_EQ(r.x_test, "meta");
  EXPECT_TRUE(r.http2);
  EXPECT_FALSE(r.too_large);
  EXPECT_EQ(p.server_->Waiting(), 1u);
  std::optional<bool> written;
  HttpResponse res;
  res.content_type = "application/grpc";
  res.body = "answer";
  res.trailers = {{"grpc-status", "0"}};
  res.on_written = [&written](bool ok) { written = ok; };
  p.server_->Respond(id, std::move(res));
  p.Pump();
  auto& st = p.streams_[id];
  EXPECT_EQ(st.headers[":status"], "200");
  EXPECT_EQ(st.headers["content-type"], "application/grpc");
  EXPECT_EQ(st.body, "answer");
  EXPECT_EQ(st.trailers["grpc-status"], "0");
  EXPECT_TRUE(st.closed);
  EXPECT_EQ(st.close_error, 0u);
  ASSERT_TRUE(written.has_value());
  EXPECT_TRUE(*written);
  EXPECT_TRUE(p.abandoned_.empty());
  EXPECT_EQ(p.server_->OpenStreams(), 0u);
}

TEST(H2Session, TrailersOnlyAnswerIsOneHeadersFrame) {
  Pair p;
  const int32_t id = p.Request("/svc/M", "");
  p.Pump();
  HttpResponse res;
  res.content_type = "application/grpc";
  res.headers = {{"grpc-status", "8"}, {"grpc-message", "none"}, {"Connection", "close"}};
  p.server_->Respond(id, std::move(res));
  p.Pump();
  auto& st = p.streams_[id];
  EXPECT_EQ(st.header_blocks, 1);
  EXPECT_EQ(st.headers["grpc-status"], "8");
  EXPECT_EQ(st.headers.count("connection"), 0u) << "connection-specific fields are not sent";
  EXPECT_TRUE(st.body.empty());
  EXPECT_TRUE(st.closed);
}

TEST(H2Session, ClientResetAbandonsTheWaitingStream) {
  Pair p;
  const int32_t id = p.Request("/svc/M", "x");
  p.Pump();
  ASSERT_EQ(p.requests_.size(), 1u);
  nghttp2_submit_rst_stream(p.client_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
  p.Pump();
  ASSERT_EQ(p.abandoned_.size(), 1u);
  EXPECT_EQ(p.abandoned_[0], id);
  EXPECT_EQ(p.server_->Waiting(), 0u);
  // The late answer is not delivered, and says so.
  std::optional<bool> written;
  HttpResponse late;
  late.on_written = [&written](bool ok) { written = ok; };
  p.server_->Respond(id, std::move(late));
  ASSERT_TRUE(written.has_value());
  EXPECT_FALSE(*written);
}

TEST(H2Session, ConnectionEndAbandonsEveryWaitingStream) {
  std::vector<int32_t> abandoned;
  {
    Pair p;
    p.Request("/a", "1");
    p.Request("/b", "2");
    p.Pump();
    ASSERT_EQ(p.requests_.size(), 2u);
    p.server_.reset();  // the connection closed
    abandoned = p.abandoned_;
  }
  EXPECT_EQ(abandoned.size(), 2u);
}

TEST(H2Session, BodyOverTheLimitIsDispatchedAsTooLarge) {
  H2Options o;
  o.max_body_bytes = 1000;
  Pair p(o);
  p.Request("/svc/M", std::string(50000, 'x'));
  p.Pump();
  ASSERT_EQ(p.requests_.size(), 1u);
  EXPECT_TRUE(p.requests_[0].too_large);
  EXPECT_TRUE(p.requests_[0].body.empty());
}

// Streams sending bodies at once share a budget: the one that would pass it is reset, the others
// are served.
TEST(H2Session, BufferedBodiesBoundedPerConnection) {
  H2Options o;
  o.max_body_bytes = 100000;
  o.max_buffered_bytes = 150000;
  Pair p(o);
  // Two streams whose DATA arrives interleaved, neither finished: 2 x 90,000 > 150,000.
  const int32_t a = p.Request("/a", std::string(90000, 'a'));
  const int32_t b = p.Request("/b", std::string(90000, 'b'));
  p.Pump();
  // The client's flow control windows (1 MiB per stream) let both send everything: one of them
  // passed the budget and was reset; the other was dispatched whole.
  ASSERT_EQ(p.requests_.size(), 1u);
  EXPECT_EQ(p.requests_[0].body.size(), 90000u);
  const int32_t refused = p.requests_[0].id == a ? b : a;
  EXPECT_TRUE(p.streams_[refused].closed);
  EXPECT_EQ(p.streams_[refused].close_error, static_cast<uint32_t>(NGHTTP2_ENHANCE_YOUR_CALM));
}

TEST(H2Session, OversizedHeadersAnswered431) {
  H2Options o;
  o.max_header_count = 5;
  Pair p(o);
  const int32_t id =
      p.Request("/svc/M", "", {{"a", "1"}, {"b", "2"}, {"c", "3"}, {"d", "4"}, {"e", "5"}});
  p.Pump();
  EXPECT_TRUE(p.requests_.empty());
  EXPECT_EQ(p.streams_[id].headers[":status"], "431");
}

TEST(H2Session, ShutdownSendsGoawayAndServesOpenStreams) {
  Pair p;
  const int32_t id = p.Request("/svc/M", "x");
  p.Pump();
  p.server_->Shutdown();
  p.Pump();
  EXPECT_TRUE(p.goaway_);
  EXPECT_TRUE(p.server_->WantsIo()) << "an open stream is still served";
  p.server_->Respond(id, HttpResponse{});
  p.Pump();
  EXPECT_TRUE(p.streams_[id].closed);
  EXPECT_FALSE(p.server_->WantsIo());
}

TEST(H2Session, StreamsOverTheConnectionCapGetGoaway) {
  H2Options o;
  o.max_requests = 2;
  Pair p(o);
  p.Request("/1", "");
  p.Request("/2", "");
  p.Pump();
  EXPECT_TRUE(p.goaway_);
}

// The frame types in `out` (a server's output: 9-byte frame headers and payloads).
std::vector<int> FrameTypes(const std::string& out) {
  std::vector<int> types;
  for (size_t i = 0; i + 9 <= out.size();) {
    const size_t len = (static_cast<unsigned char>(out[i]) << 16) |
                       (static_cast<unsigned char>(out[i + 1]) << 8) |
                       static_cast<unsigned char>(out[i + 2]);
    types.push_back(static_cast<unsigned char>(out[i + 3]));
    i += 9 + len;
  }
  return types;
}

// Hand-made frames: garbage, a bad preface, HEADERS on stream 0, an oversized frame: each is a
// connection error (Receive fails, or GOAWAY is queued and the session wants no more), no request.
TEST(H2Session, MalformedInputIsAnErrorNeverACrash) {
  const std::string preface("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
  const std::string empty_settings("\x00\x00\x00\x04\x00\x00\x00\x00\x00", 9);
  for (const std::string& input :
       {std::string("GET / HTTP/1.1\r\n\r\n"), std::string(100, '\0'),
        preface + empty_settings +
            std::string("\x00\x00\x04\x01\x05\x00\x00\x00\x00"
                        "abcd",
                        13),
        preface + empty_settings + std::string("\xff\xff\xff\x00\x00\x00\x00\x00\x01", 9) +
            std::string(1000, 'x')}) {
    H2Session s({}, [](int32_t, HttpRequest&) { ADD_FAILURE() << "no request in garbage"; });
    ASSERT_TRUE(s.Start().ok());
    const Status st = s.Receive(input);
    const std::string out = s.TakeOutput();
    const auto types = FrameTypes(out);
    const bool goaway = std::find(types.begin(), types.end(), NGHTTP2_GOAWAY) != types.end();
    EXPECT_TRUE(!st.ok() || (goaway && !s.WantsIo())) << "input of " << input.size() << " bytes";
    if (!st.ok()) {
      EXPECT_NE(st.message().find("HTTP/2"), std::string::npos) << st.message();
    }
  }
}

// SETTINGS_MAX_CONCURRENT_STREAMS is advertised: a conforming client (nghttp2's) holds the third
// stream back, so at most two requests are with the server.
TEST(H2Session, ConcurrentStreamCapAdvertised) {
  H2Options o;
  o.max_concurrent_streams = 2;
  Pair p(o);
  p.Pump();  // the client learns the cap; nghttp2's client then queues the third request itself
  for (int i = 0; i < 3; ++i) p.Request("/s", "x");
  p.Pump();
  EXPECT_EQ(p.requests_.size(), 2u);
  EXPECT_EQ(p.server_->Waiting(), 2u);
}

// ---- ALPN on ConnectionServer's TLS listeners ----

struct FixedKeyPair final : KeyPairSource {
  std::shared_ptr<const KeyPair> pair;
  std::shared_ptr<const KeyPair> Current() const override { return pair; }
};

std::string NegotiatedAlpn(bool http2_listener) {
  namespace net = boost::asio;
  namespace ssl = boost::asio::ssl;
  auto cert = testing::MakeCert("gw", nullptr, false);
  FixedKeyPair source;
  auto kp = ParseKeyPair(cert.cert_pem(), cert.key_pem());
  EXPECT_TRUE(kp.ok());
  source.pair = *kp;
  prometheus::Registry registry;
  ConnectionOptions opts;
  opts.name = http2_listener ? "gateway" : "admission";
  opts.bind_address = "127.0.0.1";
  opts.port = 0;
  opts.http2 = http2_listener;
  // Port 0 cannot be learnt from ConnectionServer: pick a free one.
  {
    net::io_context probe;
    net::ip::tcp::acceptor a(probe, net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
    opts.port = a.local_endpoint().port();
  }
  ConnectionServer server(
      opts, [](const HttpRequest&, Responder r) { r(HttpResponse{}); }, &source, nullptr, registry);
  EXPECT_TRUE(server.Start().ok());
  net::io_context ioc;
  ssl::context ctx(ssl::context::tls_client);
  ctx.set_verify_mode(ssl::verify_none);
  static const unsigned char kOffer[] = {2, 'h', '2', 8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  SSL_CTX_set_alpn_protos(ctx.native_handle(), kOffer, sizeof(kOffer));
  ssl::stream<net::ip::tcp::socket> stream(ioc, ctx);
  boost::system::error_code ec;
  stream.next_layer().connect(net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"),
                                                     static_cast<unsigned short>(opts.port)),
                              ec);
  if (!ec) stream.handshake(ssl::stream_base::client, ec);
  EXPECT_FALSE(ec) << ec.message();
  const unsigned char* alpn = nullptr;
  unsigned int len = 0;
  SSL_get0_alpn_selected(stream.native_handle(), &alpn, &len);
  std::string got(reinterpret_cast<const char*>(alpn), len);
  stream.next_layer().close(ec);
  server.Stop();
  server.WaitStopped(std::chrono::seconds(2));
  return got;
}

// A plain listener with http2 set takes HTTP/2 with prior knowledge (the preface first) through a
// real socket; its handler sees the request and the answer comes back on the stream.
TEST(ConnectionServerH2, PriorKnowledgeOnAPlainListener) {
  namespace net = boost::asio;
  prometheus::Registry registry;
  ConnectionOptions opts;
  opts.name = "plain-h2";
  opts.bind_address = "127.0.0.1";
  opts.http2 = true;
  {
    net::io_context probe;
    net::ip::tcp::acceptor a(probe, net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
    opts.port = a.local_endpoint().port();
  }
  std::string seen_path, seen_body;
  bool seen_http2 = false;
  ConnectionServer server(
      opts,
      [&](const HttpRequest& req, Responder r) {
        seen_path = std::string(req.path);
        seen_body = std::string(req.body);
        seen_http2 = req.http2;
        HttpResponse out;
        out.body = "pong";
        out.trailers = {{"x-done", "yes"}};
        r(std::move(out));
      },
      nullptr, nullptr, registry);
  ASSERT_TRUE(server.Start().ok());
  // The client side: nghttp2's client session over a blocking socket.
  Pair p;  // only its client session and stream bookkeeping are used; its H2Session stays idle
  net::io_context ioc;
  net::ip::tcp::socket sock(ioc);
  sock.connect(net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"),
                                      static_cast<unsigned short>(opts.port)));
  const int32_t id = p.Request("/ping", "hello");
  auto& st = p.streams_[id];
  std::string out;
  const uint8_t* data = nullptr;
  for (ssize_t n; (n = nghttp2_session_mem_send(p.client_, &data)) > 0;) {
    out.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
  }
  net::write(sock, net::buffer(out));
  char buf[16384];
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!st.closed && std::chrono::steady_clock::now() < until) {
    boost::system::error_code ec;
    const size_t n = sock.read_some(net::buffer(buf), ec);
    if (ec) break;
    nghttp2_session_mem_recv(p.client_, reinterpret_cast<const uint8_t*>(buf), n);
    std::string more;
    for (ssize_t m; (m = nghttp2_session_mem_send(p.client_, &data)) > 0;) {
      more.append(reinterpret_cast<const char*>(data), static_cast<size_t>(m));
    }
    if (!more.empty()) net::write(sock, net::buffer(more));
  }
  EXPECT_TRUE(st.closed);
  EXPECT_EQ(st.headers[":status"], "200");
  EXPECT_EQ(st.body, "pong");
  EXPECT_EQ(st.trailers["x-done"], "yes");
  EXPECT_EQ(seen_path, "/ping");
  EXPECT_EQ(seen_body, "hello");
  EXPECT_TRUE(seen_http2);
  sock.close();
  server.Stop();
  server.WaitStopped(std::chrono::seconds(2));
}

TEST(ConnectionServerAlpn, GatewayOffersH2AdmissionOnlyHttp11) {
  EXPECT_EQ(NegotiatedAlpn(true), "h2");
  EXPECT_EQ(NegotiatedAlpn(false), "http/1.1");
}

}  // namespace
}  // namespace aw::server
