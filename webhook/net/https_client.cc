#include "net/https_client.h"

#include <fmt/format.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>

#include <array>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <deque>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "util/io/file.h"
#include "util/io/log.h"
#include "util/io/mutex.h"
#include "util/io/openssl_errors.h"
#include "util/io/pem.h"

namespace aw::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using Strand = asio::strand<asio::any_io_executor>;

constexpr size_t kMaxErrorBody = 64 * 1024;
constexpr size_t kChunkBuffer = 16 * 1024;
constexpr std::chrono::milliseconds kMaxConnect{10000};

// Bearer token, from a static string or a file re-read when it changes. Used on the strand only.
class TokenSource {
 public:
  TokenSource(std::string token, std::string file, std::string log_name)
      : token_(std::move(token)), file_(std::move(file)), log_name_(std::move(log_name)) {}

  std::string Get(bool force_reload) {
    if (file_.empty()) return token_;
    auto now = Clock::now();
    if (force_reload || !loaded_ || now - last_check_ >= std::chrono::seconds(1)) {
      last_check_ = now;
      struct stat st {};
      bool changed = true;
      if (::stat(file_.c_str(), &st) == 0) {
        changed = !loaded_ || force_reload || st.st_mtim.tv_sec != mtime_.tv_sec ||
                  st.st_mtim.tv_nsec != mtime_.tv_nsec || st.st_size != size_ || st.st_ino != ino_;
      }
      if (changed) {
        StatusOr<std::string> t = util::ReadFile(file_);
        if (t.ok()) {
          std::string v = *t;
          while (!v.empty() && (v.back() == '\n' || v.back() == '\r' || v.back() == ' '))
            v.pop_back();
          if (loaded_ && v != cached_)
            log::info(log_name_ + ": bearer token file changed; using the new token",
                      {{"file", file_}});
          cached_ = std::move(v);
          loaded_ = true;
          mtime_ = st.st_mtim;
          size_ = st.st_size;
          ino_ = st.st_ino;
        } else if (!loaded_) {
          log::warn(log_name_ + ": cannot read bearer token file",
                    {{"file", file_}, {"error", t.status().message()}});
        }
      }
    }
    return cached_;
  }
  bool FromFile() const { return !file_.empty(); }

 private:
  std::string token_;
  std::string file_;
  std::string log_name_;
  bool loaded_ = false;
  std::string cached_;
  Clock::time_point last_check_{};
  struct timespec mtime_ {};
  off_t size_ = 0;
  ino_t ino_ = 0;
};

enum class Stage { kResolve, kConnect, kTlsHandshake, kWrite, kRead };

const char* StageName(Stage s) {
  switch (s) {
    case Stage::kResolve:
      return "resolve";
    case Stage::kConnect:
      return "connect";
    case Stage::kTlsHandshake:
      return "TLS handshake";
    case Stage::kWrite:
      return "write";
    case Stage::kRead:
      return "read";
  }
  return "?";
}

struct Failure {
  Stage stage = Stage::kConnect;
  std::string detail;
  bool closed = false;  // the peer closed or reset the connection
  bool timed_out = false;
  bool stopped = false;  // cancelled or shut down
};

std::string Millis(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return fmt::format("{}s", d.count() / 1000);
  return fmt::format("{}ms", d.count());
}

std::string Bytes(size_t n) {
  if (n % (1 << 20) == 0) return fmt::format("{} MiB", n >> 20);
  if (n % 1024 == 0) return fmt::format("{} KiB", n >> 10);
  return fmt::format("{} bytes", n);
}

std::string IdleFor(Clock::duration d) {
  return fmt::format("{:.1f}s", std::chrono::duration<double>(d).count());
}

std::string EndpointString(const tcp::endpoint& ep) {
  if (ep.address().is_v6()) return fmt::format("[{}]:{}", ep.address().to_string(), ep.port());
  return fmt::format("{}:{}", ep.address().to_string(), ep.port());
}

bool IsClosedError(const beast::error_code& ec) {
  return ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe || ec == asio::error::connection_aborted ||
         ec == asio::ssl::error::stream_truncated || ec == http::error::end_of_stream ||
         ec == http::error::partial_message;
}

// What an error code from a socket, TLS or parser operation means, in an operator's words.
Failure Classify(Stage stage, const beast::error_code& ec, std::chrono::milliseconds timeout,
                 bool stopped) {
  Failure f{stage, ""};
  if (stopped) {
    f.detail = "stopped";
    f.stopped = true;
    return f;
  }
  if (ec == beast::error::timeout) {
    f.detail = "timed out after " + Millis(timeout);
    f.timed_out = true;
    return f;
  }
  if (ec == asio::ssl::error::stream_truncated) {
    f.detail = "connection closed by the server (EOF without TLS close_notify)";
    f.closed = true;
  } else if (ec == asio::error::eof || ec == http::error::end_of_stream ||
             ec == http::error::partial_message) {
    f.detail = "connection closed by the server (EOF)";
    f.closed = true;
  } else if (ec == http::error::header_limit) {
    f.detail = "malformed response: response headers over the limit";
  } else if (ec.category() == http::make_error_code(http::error::bad_version).category()) {
    f.detail = "malformed response: " + ec.message();
  } else {
    f.detail = ec.message();
    f.closed = IsClosedError(ec);
  }
  std::string queued = util::OpenSslErrors();
  if (!queued.empty() && f.detail.find(queued) == std::string::npos)
    f.detail += " (" + queued + ")";
  return f;
}

// One connection: TLS over tcp_stream, or plain tcp_stream.
struct Conn {
  std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> tls;
  std::unique_ptr<beast::tcp_stream> plain;
  beast::flat_buffer buf;
  Clock::time_point idle_since{};
  int requests = 0;
  std::string peer;

  beast::tcp_stream& tcp() { return tls ? beast::get_lowest_layer(*tls) : *plain; }
  template <typename F>
  void With(F&& f) {
    if (tls)
      f(*tls);
    else
      f(*plain);
  }
  // True when the idle connection still looks open: nothing to read, no hang-up, no error.
  bool IdleAndOpen() {
    if (!tcp().socket().is_open() || buf.size() > 0) return false;
    if (tls && SSL_pending(tls->native_handle()) > 0) return false;
    pollfd p{tcp().socket().native_handle(), POLLIN | POLLRDHUP, 0};
    return ::poll(&p, 1, 0) == 0;
  }
  void Close() {
    beast::error_code ignored;
    tcp().socket().shutdown(tcp::socket::shutdown_both, ignored);
    tcp().close();
  }
};

class ClientImpl;

// One call: up to two attempts (the retry rule), and one more round after a 401 when the token
// comes from a file. Lives on the strand.
class Op : public Call, public std::enable_shared_from_this<Op> {
 public:
  Op(std::shared_ptr<ClientImpl> client, Request req, HttpsClient::OnChunk on_chunk,
     HttpsClient::Done done)
      : client_(std::move(client)),
        req_(std::move(req)),
        on_chunk_(std::move(on_chunk)),
        done_(std::move(done)) {}

  void Cancel() override;
  void Start();
  void Abort();  // on the strand: Cancel() or Shutdown()

 private:
  struct Attempt {
    bool reused = false;
    Clock::duration idle{};
    int request_on_conn = 0;
    std::string peer;
    size_t written = 0, total = 0, consumed = 0;
    size_t received() const { return consumed; }
  };

  bool streaming() const { return static_cast<bool>(on_chunk_); }
  void Begin(bool fresh);
  void Resolve();
  void ConnectNext(std::shared_ptr<std::vector<tcp::endpoint>> eps, size_t i, std::string errors);
  void Handshake();
  void Write();
  void ReadHead();
  void ReadBody();
  void OnPiece(size_t n);
  void Fail(Failure f);
  void Finish(StatusOr<Response> r);
  void Complete();
  std::string Describe(const Failure& f) const;
  std::string What() const;
  bool Stopped() const;

  std::shared_ptr<ClientImpl> client_;
  Request req_;
  HttpsClient::OnChunk on_chunk_;
  HttpsClient::Done done_;
  bool finished_ = false;
  bool aborted_ = false;
  std::atomic<bool> cancel_requested_{false};
  bool retried_auth_ = false;
  int attempt_no_ = 0;
  std::string first_;
  std::string token_;
  std::string wire_;
  std::unique_ptr<Conn> conn_;
  Attempt a_;
  Clock::time_point connect_deadline_{};
  std::optional<tcp::resolver> resolver_;
  std::optional<http::response_parser<http::buffer_body>> parser_;
  std::vector<char> chunk_;
  Response out_;
  bool body_to_caller_ = false;
  bool too_big_ = false;
  bool paused_ = false;
};

class ClientImpl final : public HttpsClient, public std::enable_shared_from_this<ClientImpl> {
 public:
  ClientImpl(asio::any_io_executor ex, ClientOptions o)
      : strand_(asio::make_strand(ex)),
        opts_(std::move(o)),
        tokens_(opts_.token, opts_.token_file, opts_.log_name),
        ssl_(asio::ssl::context::tls_client) {
    bool v6 = opts_.host.find(':') != std::string::npos;
    std::string h = v6 ? "[" + opts_.host + "]" : opts_.host;
    const int default_port = opts_.plain_http ? 80 : 443;
    host_header_ = opts_.port == default_port ? h : fmt::format("{}:{}", h, opts_.port);
  }

  Status Init() {
    if (opts_.plain_http) return Status::Ok();
    std::vector<util::X509Ptr> ca;
    if (!opts_.ca_pem.empty() && !opts_.insecure_skip_tls_verify) {
      auto certs = util::ParseCertificates(opts_.ca_pem, "certificate authority");
      if (!certs) return certs.status();
      ca = std::move(certs).value();
    }
    util::X509Ptr client_cert;
    util::EvpPkeyPtr client_key;
    if (!opts_.client_cert_pem.empty()) {
      auto certs = util::ParseCertificates(opts_.client_cert_pem, "client certificate");
      if (!certs) return certs.status();
      client_cert = std::move(certs->front());
      auto key = util::ParsePrivateKey(opts_.client_key_pem, "client key");
      if (!key) return key.status();
      client_key = std::move(key).value();
      if (Status s = util::CheckKeyMatches(client_cert.get(), client_key.get(),
                                           "client certificate", "client key");
          !s.ok()) {
        return s;
      }
    }
    SSL_CTX* ctx = ssl_.native_handle();
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    static const unsigned char kAlpn[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
    SSL_CTX_set_alpn_protos(ctx, kAlpn, sizeof(kAlpn));
    verify_ = !opts_.insecure_skip_tls_verify;
    if (verify_) {
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
      if (!ca.empty()) {
        // Trust exactly the configured CA, as client-go does: no system roots.
        X509_STORE* store = SSL_CTX_get_cert_store(ctx);
        for (auto& x : ca) {
          if (X509_STORE_add_cert(store, x.get()) != 1) ERR_clear_error();  // duplicates
        }
      } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
        return Status::InvalidArgument("system trust store: " +
                                       util::OpenSslErrors("unknown OpenSSL error"));
      }
    } else {
      SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
    }
    if (client_cert && (SSL_CTX_use_certificate(ctx, client_cert.get()) != 1 ||
                        SSL_CTX_use_PrivateKey(ctx, client_key.get()) != 1)) {
      return Status::InvalidArgument("client certificate: " +
                                     util::OpenSslErrors("unknown OpenSSL error"));
    }
    ERR_clear_error();
    return Status::Ok();
  }

  std::shared_ptr<Call> Do(Request req, Done done) override {
    return Launch(std::move(req), nullptr, std::move(done));
  }
  std::shared_ptr<Call> Stream(Request req, OnChunk on_chunk, Done done) override {
    return Launch(std::move(req), std::move(on_chunk), std::move(done));
  }

  void Shutdown() override {
    if (shutdown_.exchange(true)) return;
    asio::post(strand_, [self = shared_from_this()] {
      self->idle_.clear();  // closes them
      auto ops = self->in_flight_;
      for (auto& w : ops)
        if (auto op = w.lock()) op->Abort();
    });
  }
  bool IsShutdown() const override { return shutdown_.load(); }

  Counters counters() const override {
    Counters c;
    c.connections_opened = opened_.load();
    c.connections_reused = reused_.load();
    c.stale_discarded = stale_.load();
    c.expired_discarded = expired_.load();
    c.stale_retries = retries_.load();
    return c;
  }

  // --- used by Op, on the strand ---
  const ClientOptions& opts() const { return opts_; }
  Strand& strand() { return strand_; }
  asio::ssl::context& ssl() { return ssl_; }
  bool verify() const { return verify_; }
  TokenSource& tokens() { return tokens_; }
  const std::string& host_header() const { return host_header_; }
  std::atomic<bool> shutdown_{false};
  std::atomic<uint64_t> opened_{0}, reused_{0}, stale_{0}, expired_{0}, retries_{0};
  std::set<std::weak_ptr<Op>, std::owner_less<std::weak_ptr<Op>>> in_flight_;

  std::unique_ptr<Conn> TakeIdle() {
    auto now = Clock::now();
    // Oldest first: the pool is used last in, first out.
    size_t expired = 0;
    while (expired < idle_.size() && now - idle_[expired]->idle_since >= opts_.max_idle_age)
      ++expired;
    idle_.erase(idle_.begin(), idle_.begin() + static_cast<std::ptrdiff_t>(expired));
    expired_ += expired;
    while (!idle_.empty()) {
      std::unique_ptr<Conn> c = std::move(idle_.back());
      idle_.pop_back();
      if (c->IdleAndOpen()) return c;
      ++stale_;
      log::debug(opts_.log_name + ": dropping a pooled connection the server closed",
                 {{"peer", c->peer}, {"idle", IdleFor(now - c->idle_since)}});
    }
    return nullptr;
  }

  void Release(std::unique_ptr<Conn> c) {
    if (shutdown_.load() || idle_.size() >= opts_.max_idle) return;
    c->idle_since = Clock::now();
    idle_.push_back(std::move(c));
  }

 private:
  std::shared_ptr<Call> Launch(Request req, OnChunk on_chunk, Done done) {
    auto op = std::make_shared<Op>(shared_from_this(), std::move(req), std::move(on_chunk),
                                   std::move(done));
    asio::post(strand_, [op] { op->Start(); });
    return op;
  }

  Strand strand_;
  ClientOptions opts_;
  TokenSource tokens_;
  asio::ssl::context ssl_;
  bool verify_ = true;
  std::string host_header_;
  std::vector<std::unique_ptr<Conn>> idle_;  // most recently used last
};

void Op::Cancel() {
  cancel_requested_.store(true);
  asio::post(client_->strand(), [self = shared_from_this()] { self->Abort(); });
}

bool Op::Stopped() const { return aborted_ || client_->shutdown_.load(); }

void Op::Abort() {
  if (finished_) return;
  aborted_ = true;
  if (paused_) {
    paused_ = false;
    Finish(Status::Cancelled(client_->shutdown_.load() ? "client is shut down" : "call cancelled"));
    return;
  }
  if (resolver_) resolver_->cancel();
  if (conn_) {
    beast::error_code ignored;
    conn_->tcp().socket().cancel(ignored);
    conn_->tcp().cancel();
  }
}

std::string Op::What() const {
  const auto& o = client_->opts();
  return fmt::format("{} {}:{}{}{}", req_.method, o.host, o.port, o.base_path,
                     req_.path.substr(0, req_.path.find('?')));
}

void Op::Start() {
  client_->in_flight_.insert(weak_from_this());
  if (client_->shutdown_.load()) return Finish(Status::Cancelled("client is shut down"));
  if (cancel_requested_.load()) return Finish(Status::Cancelled("call cancelled"));
  static const std::set<std::string> kMethods = {"GET", "POST", "PUT", "PATCH", "DELETE"};
  if (!kMethods.count(req_.method))
    return Finish(Status::InvalidArgument(What() + ": unsupported method " + req_.method));
  if (streaming() && req_.method != "GET")
    return Finish(Status::InvalidArgument(What() + ": streaming supports GET only"));
  token_ = client_->tokens().Get(retried_auth_);
  attempt_no_ = 0;
  first_.clear();
  Begin(false);
}

void Op::Begin(bool fresh) {
  a_ = Attempt{};
  out_ = Response{};
  too_big_ = false;
  conn_ = (!streaming() && !fresh) ? client_->TakeIdle() : nullptr;
  if (conn_) {
    a_.reused = true;
    a_.idle = Clock::now() - conn_->idle_since;
    a_.peer = conn_->peer;
    ++client_->reused_;
    return Write();
  }
  conn_ = std::make_unique<Conn>();
  if (client_->opts().plain_http) {
    conn_->plain = std::make_unique<beast::tcp_stream>(client_->strand());
  } else {
    conn_->tls =
        std::make_unique<beast::ssl_stream<beast::tcp_stream>>(client_->strand(), client_->ssl());
  }
  connect_deadline_ = Clock::now() + std::min(req_.timeout, kMaxConnect);
  Resolve();
}

void Op::Resolve() {
  const auto& o = client_->opts();
  beast::error_code ec;
  auto ip = asio::ip::make_address(o.host, ec);
  if (!ec) {
    auto eps = std::make_shared<std::vector<tcp::endpoint>>();
    eps->emplace_back(ip, static_cast<unsigned short>(o.port));
    return ConnectNext(eps, 0, "");
  }
  resolver_.emplace(client_->strand());
  resolver_->async_resolve(
      o.host, std::to_string(o.port), tcp::resolver::numeric_service,
      [self = shared_from_this()](beast::error_code ec, tcp::resolver::results_type results) {
        self->resolver_.reset();
        if (ec || self->Stopped()) {
          Failure f = Classify(Stage::kResolve, ec, {}, self->Stopped());
          if (!f.stopped)
            f.detail =
                fmt::format("cannot resolve {}: {}", self->client_->opts().host, ec.message());
          return self->Fail(std::move(f));
        }
        auto eps = std::make_shared<std::vector<tcp::endpoint>>();
        for (const auto& r : results) eps->push_back(r.endpoint());
        self->ConnectNext(eps, 0, "");
      });
}

void Op::ConnectNext(std::shared_ptr<std::vector<tcp::endpoint>> eps, size_t i,
                     std::string errors) {
  if (Stopped()) return Fail(Classify(Stage::kConnect, {}, {}, true));
  if (i >= eps->size()) {
    Failure f{Stage::kConnect, errors.empty() ? "no address" : errors};
    return Fail(std::move(f));
  }
  const auto connect_timeout = std::min(req_.timeout, kMaxConnect);
  conn_->tcp().expires_at(connect_deadline_);
  tcp::endpoint ep = (*eps)[i];
  conn_->tcp().async_connect(ep, [self = shared_from_this(), eps, i, errors, ep,
                                  connect_timeout](beast::error_code ec) mutable {
    if (self->Stopped()) return self->Fail(Classify(Stage::kConnect, ec, {}, true));
    if (ec) {
      Failure f = Classify(Stage::kConnect, ec, connect_timeout, false);
      errors += fmt::format("{}{}: {}", errors.empty() ? "" : "; ", EndpointString(ep), f.detail);
      if (f.timed_out) {
        f.detail = errors;
        return self->Fail(std::move(f));
      }
      beast::error_code ignored;
      self->conn_->tcp().socket().close(ignored);
      return self->ConnectNext(eps, i + 1, std::move(errors));
    }
    self->conn_->peer = EndpointString(ep);
    self->a_.peer = self->conn_->peer;
    self->conn_->tcp().socket().set_option(tcp::no_delay(true), ec);
    if (self->conn_->tls) return self->Handshake();
    ++self->client_->opened_;
    self->Write();
  });
}

void Op::Handshake() {
  const auto& o = client_->opts();
  const std::string& name = o.tls_server_name.empty() ? o.host : o.tls_server_name;
  SSL* ssl = conn_->tls->native_handle();
  beast::error_code ec;
  (void)asio::ip::make_address(name, ec);
  const bool ip = !ec;
  if (!ip) SSL_set_tlsext_host_name(ssl, name.c_str());
  if (client_->verify()) {
    int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str())
                : SSL_set1_host(ssl, name.c_str());
    if (ok != 1) {
      return Fail(Failure{Stage::kTlsHandshake,
                          "cannot set the expected server name: " + util::OpenSslErrors()});
    }
  }
  const auto connect_timeout = std::min(req_.timeout, kMaxConnect);
  conn_->tcp().expires_at(connect_deadline_);
  conn_->tls->async_handshake(
      asio::ssl::stream_base::client,
      [self = shared_from_this(), connect_timeout](beast::error_code ec) {
        if (ec || self->Stopped()) {
          Failure f = Classify(Stage::kTlsHandshake, ec, connect_timeout, self->Stopped());
          long v = SSL_get_verify_result(self->conn_->tls->native_handle());
          if (!f.stopped && self->client_->verify() && v != X509_V_OK)
            f.detail += fmt::format(" (server certificate: {})", X509_verify_cert_error_string(v));
          return self->Fail(std::move(f));
        }
        ++self->client_->opened_;
        self->Write();
      });
}

void Op::Write() {
  a_.request_on_conn = ++conn_->requests;
  const auto& o = client_->opts();
  wire_ = fmt::format(
      "{} {}{} HTTP/1.1\r\nHost: {}\r\nAccept: application/json\r\n"
      "User-Agent: allocating-webhook\r\n",
      req_.method, o.base_path, req_.path, client_->host_header());
  if (!token_.empty()) wire_ += "Authorization: Bearer " + token_ + "\r\n";
  if (!req_.content_type.empty()) wire_ += "Content-Type: " + req_.content_type + "\r\n";
  if (req_.method != "GET" || !req_.body.empty())
    wire_ += fmt::format("Content-Length: {}\r\n", req_.body.size());
  wire_ += "\r\n";
  a_.total = wire_.size() + req_.body.size();
  std::array<asio::const_buffer, 2> bufs{asio::buffer(wire_), asio::buffer(req_.body)};
  conn_->tcp().expires_after(req_.timeout);
  conn_->With([&](auto& s) {
    asio::async_write(s, bufs, [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->a_.written = n;
      if (ec || self->Stopped())
        return self->Fail(Classify(Stage::kWrite, ec, self->req_.timeout, self->Stopped()));
      self->ReadHead();
    });
  });
}

void Op::ReadHead() {
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(client_->opts().max_header_bytes));
  parser_->body_limit(boost::none);
  conn_->tcp().expires_after(req_.timeout);
  conn_->With([&](auto& s) {
    http::async_read_header(
        s, conn_->buf, *parser_, [self = shared_from_this()](beast::error_code ec, size_t n) {
          self->a_.consumed += n;
          if (ec || self->Stopped()) {
            Failure f = Classify(Stage::kRead, ec, self->req_.timeout, self->Stopped());
            if (ec == http::error::header_limit)
              f.detail = "malformed response: response headers over " +
                         Bytes(self->client_->opts().max_header_bytes);
            return self->Fail(std::move(f));
          }
          auto& h = self->parser_->get();
          int status = h.result_int();
          if (status >= 100 && status < 200 && status != 101) return self->ReadHead();
          self->out_.status = status;
          if (auto it = h.find(http::field::retry_after); it != h.end())
            self->out_.retry_after = std::string(it->value());
          self->body_to_caller_ = self->streaming() && status >= 200 && status < 300;
          self->ReadBody();
        });
  });
}

void Op::ReadBody() {
  if (parser_->is_done()) return Complete();
  chunk_.resize(kChunkBuffer);
  parser_->get().body().data = chunk_.data();
  parser_->get().body().size = chunk_.size();
  conn_->tcp().expires_after(req_.timeout);
  // One parse step per read (async_read_some), handed on at once: a watch's event reaches the
  // caller when its chunk arrives. http::async_read would go on reading until the message ended
  // or the body buffer was full, holding back the events of a quiet watch until the server ended
  // the stream (timeoutSeconds, minutes) or dropping them with the connection (a restart).
  conn_->With([&](auto& s) {
    http::async_read_some(
        s, conn_->buf, *parser_, [self = shared_from_this()](beast::error_code ec, size_t n) {
          self->a_.consumed += n;
          if (ec == http::error::need_buffer) ec = {};
          if (ec || self->Stopped()) {
            return self->Fail(Classify(Stage::kRead, ec, self->req_.timeout, self->Stopped()));
          }
          self->OnPiece(self->chunk_.size() - self->parser_->get().body().size);
        });
  });
}

void Op::OnPiece(size_t n) {
  std::string_view data(chunk_.data(), n);
  if (body_to_caller_) {
    if (n == 0) return ReadBody();
    paused_ = true;
    auto self = shared_from_this();
    on_chunk_(data, [self](bool more) {
      asio::post(self->client_->strand(), [self, more] {
        if (!self->paused_) return;  // aborted meanwhile
        self->paused_ = false;
        if (!more) {
          self->conn_->Close();
          return self->Finish(std::move(self->out_));
        }
        self->ReadBody();
      });
    });
    return;
  }
  size_t limit = streaming() ? kMaxErrorBody : client_->opts().max_body;
  if (out_.body.size() + n > limit) {
    out_.body.append(data.substr(0, limit - out_.body.size()));
    if (!streaming()) {
      too_big_ = true;
      Failure f{Stage::kRead, "response body over " + Bytes(client_->opts().max_body)};
      return Fail(std::move(f));
    }
  } else {
    out_.body.append(data);
  }
  ReadBody();
}

void Op::Complete() {
  if (out_.status == 401 && client_->tokens().FromFile() && !retried_auth_) {
    // A rotated token: re-read the file and make the call once more.
    retried_auth_ = true;
    if (!streaming() && parser_->keep_alive()) client_->Release(std::move(conn_));
    conn_.reset();
    token_ = client_->tokens().Get(true);
    attempt_no_ = 0;
    first_.clear();
    return Begin(false);
  }
  if (!streaming() && parser_->keep_alive())
    client_->Release(std::move(conn_));
  else
    conn_->Close();
  Finish(std::move(out_));
}

std::string Op::Describe(const Failure& f) const {
  std::string c = a_.reused ? fmt::format("a reused connection (idle {}, request {} on it)",
                                          IdleFor(a_.idle), a_.request_on_conn)
                            : "a new connection";
  std::string to = a_.peer.empty() ? "" : " to " + a_.peer;
  std::string s = fmt::format("{} failed on {}{}: {}", StageName(f.stage), c, to, f.detail);
  if (f.stage == Stage::kWrite || f.stage == Stage::kRead) {
    s += fmt::format(" ({} of {} request bytes written, {} response bytes received)", a_.written,
                     a_.total, a_.received());
  }
  return s;
}

void Op::Fail(Failure f) {
  if (finished_) return;
  // Bytes buffered but not parsed (a partial status line) count as received.
  if (conn_) a_.consumed += conn_->buf.size();
  if (conn_) conn_->Close();
  conn_.reset();
  if (f.stopped || Stopped()) {
    return Finish(
        Status::Cancelled(client_->shutdown_.load() ? "client is shut down" : "call cancelled"));
  }
  // Bytes buffered but not parsed (a partial status line) count as received.
  bool stale = a_.reused && f.closed && !f.timed_out && a_.received() == 0 &&
               (f.stage == Stage::kWrite || f.stage == Stage::kRead);
  if (attempt_no_ == 0 && stale && req_.resend_on_closed_connection) {
    ++client_->retries_;
    ++attempt_no_;
    first_ = Describe(f);
    log::debug(client_->opts().log_name +
                   ": connection closed by the server; retrying on a new connection",
               {{"request", What()}, {"error", first_}});
    return Begin(true);
  }
  std::string msg = fmt::format("{}: {}", What(), Describe(f));
  if (!first_.empty()) msg += "; first attempt: " + first_;
  Finish(Status::Unavailable(std::move(msg)));
}

void Op::Finish(StatusOr<Response> r) {
  if (finished_) return;
  finished_ = true;
  client_->in_flight_.erase(weak_from_this());
  auto done = std::move(done_);
  on_chunk_ = nullptr;
  done(std::move(r));
}

}  // namespace

StatusOr<std::shared_ptr<HttpsClient>> HttpsClient::Create(asio::any_io_executor executor,
                                                           ClientOptions options) {
  auto c = std::make_shared<ClientImpl>(std::move(executor), std::move(options));
  if (Status s = c->Init(); !s.ok()) return s;
  return std::shared_ptr<HttpsClient>(std::move(c));
}

// --- IoThreadClient ---

struct IoThreadClient::Impl {
  asio::io_context io{1};
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::shared_ptr<HttpsClient> client;
  std::thread thread;
};

IoThreadClient::IoThreadClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StatusOr<std::unique_ptr<IoThreadClient>> IoThreadClient::Create(ClientOptions options) {
  // A write to a connection the peer closed must not kill the process: ignore SIGPIPE unless the
  // program installed its own handler (as the transport this client replaced did).
  struct sigaction old {};
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
  auto impl = std::make_unique<Impl>();
  auto c = HttpsClient::Create(impl->io.get_executor(), std::move(options));
  if (!c.ok()) return c.status();
  impl->client = std::move(c).value();
  impl->thread = std::thread([io = &impl->io] { io->run(); });
  return std::unique_ptr<IoThreadClient>(new IoThreadClient(std::move(impl)));
}

IoThreadClient::~IoThreadClient() {
  impl_->client->Shutdown();
  impl_->work.reset();
  impl_->thread.join();
}

void IoThreadClient::Shutdown() { impl_->client->Shutdown(); }
bool IoThreadClient::IsShutdown() const { return impl_->client->IsShutdown(); }
Counters IoThreadClient::counters() const { return impl_->client->counters(); }
HttpsClient& IoThreadClient::async() { return *impl_->client; }
asio::any_io_executor IoThreadClient::executor() { return impl_->io.get_executor(); }

}  // namespace aw::net
