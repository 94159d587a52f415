#include "server/connection_server.h"

#include <fmt/format.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <exception>
#include <iterator>
#include <thread>
#include <type_traits>

#include "runtime/io_thread.h"
#include "server/bounded_body.h"
#include "server/connection_registry.h"
#include "server/h2_session.h"
#include "server/handshake_gate.h"
#include "server/tls_stream.h"
#include "util/io/log.h"
#include "util/io/mutex.h"

namespace aw::server {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

using PlainStream = beast::tcp_stream;

// The first read of a request, into an empty buffer: small, because an idle keep-alive connection
// holds this buffer while it waits (the rest of the request follows in larger reads).
constexpr size_t kFirstReadBytes = 1024;
constexpr size_t kReadChunk = 64 * 1024;  // Beast's largest single read
constexpr size_t kLingerChunk = 16 * 1024;
constexpr size_t kMaxLingerBytes = 4 * 1024 * 1024;
// While draining, how long a connection that has not sent its first request yet may take to.
constexpr auto kDrainFirstRequestWait = std::chrono::seconds(1);
constexpr std::string_view k100Continue = "HTTP/1.1 100 Continue\r\n\r\n";
// The start of the HTTP/2 connection preface (RFC 9113 3.4): a plain listener with http2 set takes
// a connection that opens with it as HTTP/2 with prior knowledge.
constexpr std::string_view kH2PrefaceStart = "PRI * HTTP/2.0";

Clock::duration ToClock(std::chrono::nanoseconds d) {
  return std::chrono::duration_cast<Clock::duration>(d);
}

bool IsHttpCategory(const beast::error_code& ec) {
  return ec.category() == http::make_error_code(http::error::end_of_stream).category();
}

// Runs `call` (which hands a request to the handler): the text of an exception that escaped it,
// or nullopt.
template <class Call>
std::optional<std::string> CallHandler(Call&& call) {
  try {
    call();
    return std::nullopt;
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}

struct ListenerMetrics {
  ListenerMetrics(prometheus::Registry& registry, const std::string& listener)
      : open(prometheus::BuildGauge()
                 .Name("allocating_webhook_connections_open")
                 .Help("Connections open on a listener")
                 .Register(registry)
                 .Add({{"listener", listener}})),
        evicted_idle(Evictions(registry).Add({{"listener", listener}, {"kind", "idle"}})),
        evicted_oldest(Evictions(registry).Add({{"listener", listener}, {"kind", "oldest"}})),
        evicted_waiting(Evictions(registry).Add({{"listener", listener}, {"kind", "waiting"}})),
        timeout_handshake(Timeouts(registry).Add({{"listener", listener}, {"phase", "handshake"}})),
        timeout_request(Timeouts(registry).Add({{"listener", listener}, {"phase", "request"}})),
        timeout_write(Timeouts(registry).Add({{"listener", listener}, {"phase", "write"}})),
        h2_connections(prometheus::BuildCounter()
                           .Name("allocating_webhook_http2_connections_total")
                           .Help("HTTP/2 connections served (ALPN h2 or prior knowledge)")
                           .Register(registry)
                           .Add({{"listener", listener}})),
        h2_streams(prometheus::BuildCounter()
                       .Name("allocating_webhook_http2_streams_total")
                       .Help("Requests received on HTTP/2 streams")
                       .Register(registry)
                       .Add({{"listener", listener}})) {}

  static prometheus::Family<prometheus::Counter>& Evictions(prometheus::Registry& r) {
    return prometheus::BuildCounter()
        .Name("allocating_webhook_connections_evicted_total")
        .Help(
            "Connections closed to admit a new one at the connection cap (kind: idle "
            "keep-alive, the oldest handshake/request in progress, or, when every connection "
            "waits for its answer, the oldest waiting request)")
        .Register(r);
  }
  static prometheus::Family<prometheus::Counter>& Timeouts(prometheus::Registry& r) {
    return prometheus::BuildCounter()
        .Name("allocating_webhook_connection_timeouts_total")
        .Help(
            "Connections closed because a TLS handshake, a request or a response write "
            "overran its deadline")
        .Register(r);
  }

  prometheus::Gauge& open;
  prometheus::Counter& evicted_idle;
  prometheus::Counter& evicted_oldest;
  prometheus::Counter& evicted_waiting;
  prometheus::Counter& timeout_handshake;
  prometheus::Counter& timeout_request;
  prometheus::Counter& timeout_write;
  prometheus::Counter& h2_connections;
  prometheus::Counter& h2_streams;
};

}  // namespace

struct ConnectionServer::Impl : std::enable_shared_from_this<ConnectionServer::Impl> {
  Impl(ConnectionOptions o, HttpHandler h, AsyncHttpHandler ah, const KeyPairSource* tls,
       const ClientCaSource* ca, prometheus::Registry& registry)
      : opts(std::move(o)),
        handler(std::move(h)),
        async_handler(std::move(ah)),
        tls_source(tls),
        client_ca(ca),
        metrics(registry, opts.name),
        conns(std::max<size_t>(1, opts.max_connections)),
        external(opts.executor),
        iocs(MakeContexts(external ? 0 : std::max<size_t>(1, opts.io_threads))),
        handshakes(opts.max_concurrent_handshakes),
        acceptor(external ? external : net::any_io_executor(iocs.front()->get_executor())),
        retry_timer(acceptor.get_executor()) {
    for (auto& ioc : iocs) work.push_back(net::make_work_guard(*ioc));
  }

  // One io_context per io thread, each run by its thread alone: a connection lives on one of them
  // (round robin at accept), so its handlers are serialised without a strand.
  static std::vector<std::unique_ptr<net::io_context>> MakeContexts(size_t n) {
    std::vector<std::unique_ptr<net::io_context>> v;
    for (size_t i = 0; i < n; ++i) v.push_back(std::make_unique<net::io_context>(1));
    return v;
  }
  net::any_io_executor NextExecutor() {
    if (external) return external;
    return iocs[next_context++ % iocs.size()]->get_executor();
  }
  // What a handler that uses this state holds: on an external executor the state itself (the
  // io_context outlives the server, and a handler may run, or be destroyed, after it); else
  // nothing (the io_contexts are members: their handlers go before the rest of the state).
  std::shared_ptr<Impl> Keep() { return external ? shared_from_this() : nullptr; }
  void SessionGone() {
    live.fetch_sub(1);
    if (!external) return;
    { MutexLock lock(live_mu); }
    live_cv.SignalAll();
  }
  // External executor: closes every connection still open and waits until no connection object
  // is left, or until `deadline`.
  bool CloseAll(Clock::time_point deadline);
  void StopContexts() {
    work.clear();
    for (auto& ioc : iocs) ioc->stop();
  }

  void DoAccept();
  void OnAccept(beast::error_code ec, tcp::socket socket);
  void RunLoop(net::io_context& ioc);
  void NoteEviction(ConnPhase phase);

  // Declaration order is destruction order in reverse: the io_context (and with it every
  // session) goes before the registry, metrics and TLS context the sessions use.
  const ConnectionOptions opts;
  const HttpHandler handler;
  const AsyncHttpHandler async_handler;  // used instead of `handler` when set
  const KeyPairSource* const tls_source;
  const ClientCaSource* const client_ca;
  ListenerMetrics metrics;
  ConnectionRegistry conns;
  std::atomic<size_t> live{0};  // Session objects alive
  Mutex live_mu;                // with live_cv: CloseAll waits for `live` to reach 0
  CondVar live_cv;
  const net::any_io_executor external;  // ConnectionOptions::executor (no io threads of our own)
  std::optional<ssl::context> ssl_ctx;
  std::vector<std::unique_ptr<net::io_context>> iocs;
  // Keeps each io thread running while its context has nothing to do (until StopContexts).
  std::vector<net::executor_work_guard<net::io_context::executor_type>> work;
  size_t next_context = 0;   // on the acceptor's context only
  HandshakeGate handshakes;  // its queue owns waiting sessions: destroyed before the io_context
  tcp::acceptor acceptor;
  net::steady_timer retry_timer;
  std::vector<std::thread> threads;
  std::atomic<bool> draining{false};  // answers close their connection (BeginDrain, Stop)
  std::atomic<bool> stopped{false};   // Stop(): not accepting, idle connections closed
  std::atomic<bool> serving{false};
  std::atomic<int64_t> last_eviction_log{0};  // steady_clock ticks
};

namespace {

// One connection: handshake (TLS), then requests until the client, a deadline, the request
// limit, an eviction or the drain ends it. Every member is touched only on the connection's
// io thread (the executor of its socket: an io_context that one thread runs).
template <class Stream>
class Session final : public Connection, public std::enable_shared_from_this<Session<Stream>> {
 public:
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;
  using Impl = ConnectionServer::Impl;

  template <class... Args>
  Session(Impl& srv, uint64_t id, Args&&... args)
      : keep_(srv.Keep()),
        srv_(srv),
        opts_(srv.opts),
        id_(id),
        stream_(std::forward<Args>(args)...),
        buffer_(srv.opts.limits.max_header_bytes + kReadChunk) {
    srv_.metrics.open.Increment();
    srv_.live.fetch_add(1);
  }
  ~Session() override {
    srv_.conns.Remove(id_);
    srv_.metrics.open.Decrement();
    srv_.SessionGone();
  }

  void Start() {
    net::dispatch(stream_.get_executor(), [self = this->shared_from_this()] { self->Begin(); });
  }
  void Cut() override {
    net::post(stream_.get_executor(), [self = this->shared_from_this()] { self->Close(); });
  }
  void Drain() override {
    net::post(stream_.get_executor(), [self = this->shared_from_this()] { self->OnDrain(); });
  }

 private:
  beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }
  std::shared_ptr<Session> self() { return this->shared_from_this(); }

  // The answer to a request whose handler threw `failure`: counted (on_error) and logged.
  HttpResponse InternalError(const HttpRequest& in, const std::string& failure) {
    if (opts_.on_error) opts_.on_error(500);
    log::error("internal error serving request",
               {{"listener", opts_.name}, {"path", std::string(in.path)}, {"error", failure}});
    return HttpResponse{
        500, "text/plain; charset=utf-8", fmt::format("internal error: {}\n", failure), {}};
  }

  void SetPhase(ConnPhase phase) {
    phase_ = phase;
    srv_.conns.SetPhase(id_, phase);
  }

  bool BytesPending() {
    beast::error_code ec;
    return buffer_.size() > 0 || lowest().socket().available(ec) > 0;
  }

  // TLS: wait (holding only a small read buffer) for the client's first bytes, then for a turn
  // at the listener's HandshakeGate, then handshake; all within handshake_timeout of the accept.
  void Begin() {
    if constexpr (kTls) {
      phase_ = ConnPhase::kHandshake;
      handshake_deadline_ = Clock::now() + ToClock(opts_.handshake_timeout);
      lowest().expires_at(handshake_deadline_);
      stream_.async_wait_input(beast::bind_front_handler(&Session::OnHelloBytes, self()));
    } else {
      WaitRequest();
    }
  }

  void OnHelloBytes(beast::error_code ec) {
    if (closed_) return;
    if (ec) {
      if (ec == beast::error::timeout) srv_.metrics.timeout_handshake.Increment();
      return Close();
    }
    // While it waits, the gate's queue owns the session (no operation of it is pending).
    const bool now = srv_.handshakes.Enter([s = self()]() {
      net::post(s->stream_.get_executor(), [s] { s->StartHandshake(); });
      return true;
    });
    if (now) StartHandshake();
  }

  // Holds a HandshakeGate slot from here until the handshake ends or the connection closes.
  void StartHandshake() {
    holds_handshake_slot_ = true;
    if (closed_) return ReleaseHandshakeSlot();
    if (Clock::now() >= handshake_deadline_) {  // its turn came too late
      srv_.metrics.timeout_handshake.Increment();
      return Close();
    }
    stream_.async_handshake(beast::bind_front_handler(&Session::OnHandshake, self()));
  }

  void ReleaseHandshakeSlot() {
    if (!holds_handshake_slot_) return;
    holds_handshake_slot_ = false;
    srv_.handshakes.Leave();
  }

  void OnHandshake(beast::error_code ec) {
    ReleaseHandshakeSlot();
    if (closed_) return;
    if (ec) {
      if (ec == beast::error::timeout) srv_.metrics.timeout_handshake.Increment();
      return Close();
    }
    if constexpr (kTls) {
      const unsigned char* alpn = nullptr;
      unsigned int alpn_len = 0;
      SSL_get0_alpn_selected(stream_.native_handle(), &alpn, &alpn_len);
      if (opts_.http2 && alpn_len == 2 && alpn[0] == 'h' && alpn[1] == '2') return H2Begin();
    }
    WaitRequest();
  }

  // Between requests: wait (idle) for the first byte of the next one.
  void WaitRequest() {
    if (closed_) return;
    if (buffer_.size() > 0) return StartRequest();
    auto wait = ToClock(opts_.idle_timeout);
    if (served_ == 0) wait = std::min(wait, ToClock(opts_.read_timeout));
    // Stopping: an idle connection closes, a new one gets a short wait for its first request.
    // Only draining (BeginDrain): an idle connection stays open until Stop(), also one whose last
    // answer, written before the drain began, did not say Connection: close, so that the client's
    // next request on it is answered (with Connection: close) instead of racing a close.
    if (srv_.stopped.load()) {
      if (served_ > 0 && !BytesPending()) return Close();
      wait = std::min<Clock::duration>(wait, kDrainFirstRequestWait);
    }
    // Idle between requests: first in line for eviction. A new connection waiting for its first
    // request is not idle: it keeps its phase and accept time (kHandshake), or a flood of new
    // connections would evict every legitimate client between its handshake and its request.
    phase_ = ConnPhase::kIdle;
    if (served_ > 0) srv_.conns.SetPhase(id_, ConnPhase::kIdle);
    buffer_.shrink_to_fit();  // empty here: an idle connection keeps no read buffer
    lowest().expires_after(wait);
    stream_.async_read_some(buffer_.prepare(kFirstReadBytes),
                            beast::bind_front_handler(&Session::OnFirstBytes, self()));
  }

  void OnFirstBytes(beast::error_code ec, size_t n) {
    if (closed_) return;
    if (ec == net::error::operation_aborted && rearm_) {  // shortened by OnDrain
      rearm_ = false;
      return WaitRequest();
    }
    if (ec) return Close();
    buffer_.commit(n);
    if constexpr (kTls) {
      // The rest of the TLS record that brought these bytes is decrypted already: room for all of
      // it, so that the next read takes it at once (not in the buffer's doubling steps, a read
      // operation each).
      const int pending = SSL_pending(stream_.native_handle());
      if (pending > 0) {
        buffer_.reserve(
            std::min(buffer_.size() + static_cast<size_t>(pending), buffer_.max_size()));
      }
    }
    if (!kTls && opts_.http2 && served_ == 0 && LooksLikeH2Preface()) return H2Begin();
    StartRequest();
  }

  bool LooksLikeH2Preface() const {
    auto data = buffer_.cdata();
    std::string_view got(static_cast<const char*>(data.data()), data.size());
    const size_t n = std::min(got.size(), kH2PrefaceStart.size());
    return n >= 3 && got.substr(0, n) == kH2PrefaceStart.substr(0, n);
  }

  // ---- HTTP/2 (ConnectionOptions::http2): H2Session drives the protocol; this loop moves its
  // bytes, one socket operation at a time (TlsStream allows no overlap): a write whenever the
  // session has output (cancelling the read that waits for the client), else a read whose
  // deadline is read_timeout from the first byte of any request still being received,
  // idle_timeout when no stream is open, none while every open stream waits for its answer. ----

  // The answer state of one stream, shared by the Responder's copies.
  struct H2Answer {
    std::shared_ptr<Session> session;
    int32_t stream = 0;
    std::atomic<bool> answered{false};
    ~H2Answer() {
      if (answered.load()) return;
      net::post(session->stream_.get_executor(), [s = session, id = stream] {
        if (s->h2_) s->h2_->Reset(id);  // the handler dropped the request without an answer
        s->H2Pump();
      });
    }
  };

  void H2Begin() {
    H2Options o = opts_.h2;
    o.max_body_bytes = opts_.limits.max_body_bytes;
    o.max_header_bytes = opts_.limits.max_header_bytes;
    o.max_header_count = opts_.limits.max_header_count;
    o.max_requests = std::min(o.max_requests, opts_.keep_alive_max_requests);
    h2_ =
        std::make_unique<H2Session>(o, [this](int32_t id, HttpRequest& in) { H2Dispatch(id, in); });
    if (!h2_->Start().ok()) return Close();
    srv_.metrics.h2_connections.Increment();
    if (buffer_.size() > 0) {  // prior knowledge: the preface is already read
      H2Feed();
      if (closed_) return;
    }
    H2Pump();
  }

  void H2Feed() {
    auto data = buffer_.cdata();
    const Status st =
        h2_->Receive(std::string_view(static_cast<const char*>(data.data()), data.size()));
    buffer_.consume(buffer_.size());
    if (!st.ok()) {
      h2_failed_ = true;  // GOAWAY is queued: written, then the connection closes
      if (opts_.on_error) opts_.on_error(400);
    }
  }

  void H2Dispatch(int32_t id, HttpRequest& in) {
    ++served_;
    srv_.metrics.h2_streams.Increment();
    auto state = std::make_shared<H2Answer>();
    state->session = self();
    state->stream = id;
    Responder respond = [state](HttpResponse out) {
      if (state->answered.exchange(true)) return;
      auto s = state->session;
      net::post(s->stream_.get_executor(), [s, id = state->stream, out = std::move(out)]() mutable {
        s->H2Deliver(id, std::move(out));
      });
    };
    const std::optional<std::string> failure = CallHandler([&] {
      if (srv_.async_handler) {
        srv_.async_handler(in, respond);
      } else {
        respond(srv_.handler(in));
      }
    });
    if (failure && !state->answered.load()) respond(InternalError(in, *failure));
  }

  void H2Deliver(int32_t id, HttpResponse out) {
    if (closed_ || !h2_) {
      if (out.on_written) out.on_written(false);
      return;
    }
    h2_->Respond(id, std::move(out));
    H2Pump();
  }

  void H2UpdatePhase() {
    const size_t receiving = h2_->Receiving();
    if (receiving == 0) {
      h2_request_since_.reset();
    } else if (!h2_request_since_) {
      h2_request_since_ = Clock::now();
    }
    const ConnPhase phase = receiving > 0            ? ConnPhase::kRequest
                            : h2_->Waiting() > 0     ? ConnPhase::kWaiting
                            : h2_->OpenStreams() > 0 ? ConnPhase::kResponse
                                                     : ConnPhase::kIdle;
    if (phase != phase_) SetPhase(phase);
  }

  void H2Pump() {
    if (closed_ || !h2_) return;
    // Draining: a connection with streams open keeps taking new ones (answered by the handler,
    // e.g. 503 / UNAVAILABLE, a health check NOT_SERVING) until none is open; then GOAWAY.
    if (srv_.draining.load() && h2_->OpenStreams() == 0) h2_->Shutdown();
    H2UpdatePhase();
    if (h2_io_) {
      if (h2_reading_ && h2_->WantsWrite()) lowest().cancel();  // write first, then read again
      return;
    }
    if (h2_->WantsWrite()) {
      h2_out_ = h2_->TakeOutput();
      if (!h2_out_.empty()) {
        h2_io_ = true;
        h2_reading_ = false;
        lowest().expires_after(ToClock(opts_.write_timeout));
        net::async_write(stream_, net::buffer(h2_out_),
                         beast::bind_front_handler(&Session::OnH2Written, self()));
        return;
      }
    }
    if (h2_failed_ || !h2_->WantsIo()) return Close();
    if (h2_request_since_) {
      lowest().expires_at(*h2_request_since_ + ToClock(opts_.read_timeout));
    } else if (h2_->OpenStreams() == 0) {
      auto wait = ToClock(opts_.idle_timeout);
      if (served_ == 0) wait = std::min(wait, ToClock(opts_.read_timeout));
      lowest().expires_after(wait);
    } else {
      lowest().expires_never();
    }
    h2_io_ = true;
    h2_reading_ = true;
    buffer_.clear();
    stream_.async_read_some(buffer_.prepare(kReadChunk),
                            beast::bind_front_handler(&Session::OnH2Read, self()));
  }

  void OnH2Read(beast::error_code ec, size_t n) {
    h2_io_ = h2_reading_ = false;
    if (closed_ || !h2_) return;
    if (ec == net::error::operation_aborted) return H2Pump();  // cancelled to write
    if (ec) {
      if (ec == beast::error::timeout && h2_request_since_)
        srv_.metrics.timeout_request.Increment();
      return Close();
    }
    buffer_.commit(n);
    H2Feed();
    buffer_.shrink_to_fit();
    H2Pump();
  }

  void OnH2Written(beast::error_code ec, size_t) {
    h2_io_ = false;
    h2_out_.clear();
    h2_out_.shrink_to_fit();
    if (closed_ || !h2_) return;
    if (ec) {
      if (ec == beast::error::timeout) srv_.metrics.timeout_write.Increment();
      h2_->Flushed(false);
      return Close();
    }
    h2_->Flushed(true);
    H2Pump();
  }

  void StartRequest() {
    SetPhase(ConnPhase::kRequest);
    deadline_ = Clock::now() + ToClock(opts_.read_timeout);
    close_after_ = discard_after_ = false;
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(opts_.limits.max_header_bytes));
    parser_->body_limit(boost::none);  // decided from the head (PlanBody), set before the body
    parser_->get().body().limit = opts_.limits.max_body_bytes;
    lowest().expires_at(deadline_);
    http::async_read_header(stream_, buffer_, *parser_,
                            beast::bind_front_handler(&Session::OnHead, self()));
  }

  void OnHead(beast::error_code ec, size_t head_bytes) {
    if (closed_) return;
    auto& req = parser_->get();
    // The request line length (2 SP + "HTTP/1.x"), once the parser has taken it.
    const size_t line = req.method_string().size() + req.target().size() + 10;
    const std::optional<size_t> parsed_line =
        req.method_string().empty() ? std::nullopt : std::optional<size_t>(line);
    if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
      auto data = buffer_.cdata();
      std::string_view buffered(static_cast<const char*>(data.data()), data.size());
      return Refuse(ClassifyHeadOverflow(parsed_line, buffered, opts_.limits));
    }
    if (ec) return OnReadError(ec);
    // Beast consumes the request line and complete fields early and bounds only what is still
    // buffered by its header_limit: the whole head is checked here (it is at most twice the limit).
    const size_t fields = static_cast<size_t>(std::distance(req.begin(), req.end()));
    if (HeadProblem p = CheckHead(line, head_bytes, fields, opts_.limits);
        p != HeadProblem::kNone) {
      return Refuse(p);
    }
    const bool expect_continue = beast::iequals(req[http::field::expect], "100-continue");
    parser_->body_limit(opts_.limits.max_body_bytes + opts_.limits.max_discard_bytes);
    std::optional<uint64_t> content_length;
    if (auto cl = parser_->content_length()) content_length = *cl;
    switch (PlanBody(content_length, expect_continue, opts_.limits)) {
      case BodyPlan::kRead:
        if (parser_->is_done()) return Dispatch(false);
        if (expect_continue && req.version() >= 11) return SendContinue();
        return ReadBody();
      case BodyPlan::kRefuseThenDiscard:
        discard_after_ = true;
        return Dispatch(true);
      case BodyPlan::kRefuseThenClose:
        close_after_ = true;
        return Dispatch(true);
    }
  }

  void OnReadError(const beast::error_code& ec) {
    if (ec == beast::error::timeout) {
      srv_.metrics.timeout_request.Increment();
      return Close();
    }
    if (IsHttpCategory(ec) && ec != http::error::end_of_stream &&
        ec != http::error::partial_message) {
      return RespondError(400, fmt::format("malformed HTTP request: {}\n", ec.message()));
    }
    Close();
  }

  void SendContinue() {
    lowest().expires_at(deadline_);
    net::async_write(stream_, net::buffer(k100Continue.data(), k100Continue.size()),
                     [self = self()](beast::error_code ec, size_t) {
                       if (self->closed_) return;
                       if (ec) return self->Close();
                       self->ReadBody();
                     });
  }

  void ReadBody() {
    lowest().expires_at(deadline_);
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&Session::OnBody, self()));
  }

  void OnBody(beast::error_code ec, size_t) {
    if (closed_) return;
    if (ec == http::error::body_limit) {  // a chunked body past the limit and the discard budget
      close_after_ = true;
      return Dispatch(true);
    }
    if (ec) return OnReadError(ec);
    Dispatch(parser_->get().body().overflow);
  }

  void Refuse(HeadProblem problem) {
    RespondError(StatusOf(problem), MessageOf(problem, opts_.limits));
  }

  // An answer of the connection layer itself; the connection closes after it.
  void RespondError(int status, std::string message) {
    if (opts_.on_error) opts_.on_error(status);
    close_after_ = true;
    keep_alive_ = false;
    HttpResponse out;
    out.status = status;
    out.body = std::move(message);
    Respond(std::move(out), 11);
  }

  void Dispatch(bool too_large) {
    auto& req = parser_->get();
    std::string_view target = req.target();
    const size_t q = target.find('?');
    HttpRequest in;
    in.method = req.method_string();
    in.path = target.substr(0, q);
    in.query = q == std::string_view::npos ? std::string_view() : target.substr(q + 1);
    in.content_type = req[http::field::content_type];
    in.body_too_large = too_large || req.body().overflow;
    if (!in.body_too_large) in.body = req.body().data;
    in.header = [&req](std::string_view name) -> std::string_view {
      auto it = req.find(name);
      return it == req.end() ? std::string_view() : std::string_view(it->value());
    };
    keep_alive_ = req.keep_alive();
    // The parser owns the head and body now: a connection waiting for its answer keeps no read
    // buffer (unless the client already pipelined its next request).
    buffer_.shrink_to_fit();
    if (srv_.async_handler) return DispatchAsync(in, req.version());
    HttpResponse out;
    if (auto failure = CallHandler([&] { out = srv_.handler(in); })) {
      out = InternalError(in, *failure);
    }
    Respond(std::move(out), req.version());
  }

  // The asynchronous handler: the connection waits (no deadline) until the Responder is called;
  // the answer is written on this connection's io thread. Meanwhile the connection is read
  // (WatchClient), so a client that closes it or resets it is seen at once: the handler's
  // on_abandoned callback runs and the connection closes.
  struct AnswerState {
    std::shared_ptr<Session> session;
    unsigned version = 11;
    std::atomic<bool> answered{false};
    // The last Responder copy is gone without an answer: close the connection.
    ~AnswerState() {
      if (answered.load()) return;
      net::post(session->stream_.get_executor(), [s = session] {
        s->on_abandoned_ = nullptr;  // the handler gave up, not the client
        s->awaiting_ = false;
        s->Close();
      });
    }
  };

  void DispatchAsync(HttpRequest& in, unsigned version) {
    lowest().expires_never();
    SetPhase(ConnPhase::kWaiting);
    awaiting_ = true;
    on_abandoned_ = nullptr;
    in.on_abandoned = [this](std::function<void()> fn) { on_abandoned_ = std::move(fn); };
    auto state = std::make_shared<AnswerState>();
    state->session = self();
    state->version = version;
    Responder respond = [state](HttpResponse out) {
      if (state->answered.exchange(true)) return;
      auto s = state->session;
      net::post(s->stream_.get_executor(),
                [s, version = state->version, out = std::move(out)]() mutable {
                  s->Deliver(std::move(out), version);
                });
    };
    const std::optional<std::string> failure =
        CallHandler([&] { srv_.async_handler(in, respond); });
    if (failure && !state->answered.load()) {
      HttpResponse error = InternalError(in, *failure);
      on_abandoned_ = nullptr;
      respond(std::move(error));
    }
    state.reset();
    respond = nullptr;  // the handler holds the only copies now
    WatchClient();
  }

  // While the answer is awaited: read what the client sends (kept for its next request) until it
  // closes the connection, or until the buffer is full (a client pipelining that much is not
  // watched further).
  void WatchClient() {
    if (closed_ || !awaiting_ || watching_) return;
    if (buffer_.size() + kFirstReadBytes > buffer_.max_size()) return;
    watching_ = true;
    stream_.async_read_some(buffer_.prepare(kFirstReadBytes),
                            beast::bind_front_handler(&Session::OnWatched, self()));
  }

  void OnWatched(beast::error_code ec, size_t n) {
    watching_ = false;
    if (closed_) return;
    buffer_.commit(n);
    if (pending_) {  // the answer came: the read was cancelled to write it
      auto [out, version] = std::move(*pending_);
      pending_.reset();
      if (ec && ec != net::error::operation_aborted) return Close();
      return Respond(std::move(out), version);
    }
    if (ec) return Close();  // the client closed or reset the connection: abandoned
    WatchClient();
  }

  void Deliver(HttpResponse out, unsigned version) {
    if (closed_) {
      if (out.on_written) out.on_written(false);
      return;
    }
    awaiting_ = false;
    on_abandoned_ = nullptr;
    if (watching_) {
      pending_.emplace(std::move(out), version);
      lowest().cancel();
      return;
    }
    Respond(std::move(out), version);
  }

  void Respond(HttpResponse out, unsigned version) {
    res_ = {};
    res_.version(version);
    res_.result(static_cast<unsigned>(out.status));
    res_.set(http::field::content_type, out.content_type);
    for (auto& [name, value] : out.headers) res_.set(name, value);
    res_.body() = std::move(out.body);
    on_written_ = std::move(out.on_written);
    const bool keep = keep_alive_ && !close_after_ && !srv_.draining.load() &&
                      served_ + 1 < opts_.keep_alive_max_requests;
    res_.keep_alive(keep);
    res_.prepare_payload();
    ++served_;
    SetPhase(ConnPhase::kResponse);
    lowest().expires_after(ToClock(opts_.write_timeout));
    http::async_write(stream_, res_, beast::bind_front_handler(&Session::OnWritten, self(), keep));
  }

  void OnWritten(bool keep, beast::error_code ec, size_t) {
    if (closed_) return;
    if (ec) {
      if (ec == beast::error::timeout) srv_.metrics.timeout_write.Increment();
      return Close();  // reports on_written(false)
    }
    ReportWritten(true);
    res_ = {};
    if (!keep) return Linger();
    if (discard_after_) {  // the refused body: read and drop it, within the request's deadline
      discard_after_ = false;
      SetPhase(ConnPhase::kRequest);
      lowest().expires_at(deadline_);
      return http::async_read(stream_, buffer_, *parser_,
                              [self = self()](beast::error_code ec2, size_t) {
                                if (self->closed_) return;
                                if (ec2) return self->OnReadError(ec2);
                                self->parser_.reset();
                                self->WaitRequest();
                              });
    }
    parser_.reset();
    WaitRequest();
  }

  // After the last response: stop sending, drain what the client still sends for a short while
  // (so an unread request body does not make the close a reset that destroys the answer), close.
  void Linger() {
    parser_.reset();
    SetPhase(ConnPhase::kResponse);
    beast::error_code ignored;
    lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
    lowest().expires_after(ToClock(opts_.linger_timeout));
    buffer_.clear();
    ReadLinger();
  }

  void ReadLinger() {
    lowest().async_read_some(buffer_.prepare(kLingerChunk),
                             [self = self()](beast::error_code ec, size_t n) {
                               if (self->closed_) return;
                               self->lingered_ += n;
                               if (ec || self->lingered_ > kMaxLingerBytes) return self->Close();
                               self->ReadLinger();
                             });
  }

  void OnDrain() {
    if (closed_) return;
    if (h2_) return H2Pump();  // GOAWAY once no stream is open (H2Pump)
    if (phase_ != ConnPhase::kIdle) return;
    if (BytesPending()) return;  // a request is arriving: it is read and answered
    if (served_ > 0) return Close();
    // A new connection that has not sent its request yet: give it a short while.
    rearm_ = true;
    lowest().cancel();
  }

  // Calls the response being written's on_written once (HttpResponse::on_written).
  void ReportWritten(bool written) {
    if (auto fn = std::move(on_written_)) {
      on_written_ = nullptr;
      fn(written);
    }
  }

  void Close() {
    ReleaseHandshakeSlot();
    if (closed_) return;
    closed_ = true;
    lowest().close();
    srv_.conns.Remove(id_);
    ReportWritten(false);  // a response was being written: it did not reach the client
    if (pending_) {        // an answer that waited for the client watch's read: never written
      auto fn = std::move(pending_->first.on_written);
      pending_.reset();
      if (fn) fn(false);
    }
    if (h2_) {  // every stream not answered yet is abandoned; unwritten answers are not delivered
      auto h2 = std::move(h2_);
      h2->Flushed(false);
      h2.reset();
    }
    if (awaiting_) {  // closed before its answer: the client left, or the connection was evicted
      awaiting_ = false;
      if (auto fn = std::move(on_abandoned_)) {
        on_abandoned_ = nullptr;
        fn();
      }
    }
  }

  // Declared first, so released last: the server's state on an external executor (Impl::Keep).
  const std::shared_ptr<void> keep_;
  Impl& srv_;
  const ConnectionOptions& opts_;
  const uint64_t id_;
  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<BoundedBody>> parser_;
  http::response<http::string_body> res_;
  Clock::time_point deadline_;
  Clock::time_point handshake_deadline_;
  bool holds_handshake_slot_ = false;
  ConnPhase phase_ = ConnPhase::kHandshake;
  size_t served_ = 0;
  size_t lingered_ = 0;
  bool keep_alive_ = true;
  bool close_after_ = false;
  bool discard_after_ = false;
  bool rearm_ = false;
  bool closed_ = false;
  // Asynchronous handler: a request is with it and not answered yet.
  bool awaiting_ = false;
  bool watching_ = false;  // WatchClient's read is outstanding
  std::function<void()> on_abandoned_;
  std::function<void(bool)> on_written_;  // the response being written (HttpResponse::on_written)
  std::optional<std::pair<HttpResponse, unsigned>> pending_;  // an answer waiting for the read
  // HTTP/2
  std::unique_ptr<H2Session> h2_;
  std::string h2_out_;       // being written
  bool h2_io_ = false;       // a read or write is outstanding
  bool h2_reading_ = false;  // ... and it is the read
  bool h2_failed_ = false;   // protocol error: write the GOAWAY, then close
  std::optional<Clock::time_point> h2_request_since_;  // a request is being received since
};

}  // namespace

void ConnectionServer::Impl::DoAccept() {
  acceptor.async_accept(NextExecutor(),
                        [this, keep = Keep()](beast::error_code ec, tcp::socket socket) {
                          OnAccept(ec, std::move(socket));
                        });
}

void ConnectionServer::Impl::NoteEviction(ConnPhase phase) {
  (phase == ConnPhase::kIdle      ? metrics.evicted_idle
   : phase == ConnPhase::kWaiting ? metrics.evicted_waiting
                                  : metrics.evicted_oldest)
      .Increment();
  const int64_t now = Clock::now().time_since_epoch().count();
  int64_t last = last_eviction_log.load();
  const int64_t gap = std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(10)).count();
  if (now - last >= gap && last_eviction_log.compare_exchange_strong(last, now)) {
    log::warn("connection limit reached; closing a connection to admit a new one",
              {{"listener", opts.name},
               {"max_connections", std::to_string(opts.max_connections)},
               {"closed", phase == ConnPhase::kIdle      ? "idle keep-alive"
                          : phase == ConnPhase::kWaiting ? "oldest waiting request"
                                                         : "oldest in progress"}});
  }
}

void ConnectionServer::Impl::OnAccept(beast::error_code ec, tcp::socket socket) {
  if (!acceptor.is_open()) return;  // stopped
  if (ec) {
    if (ec == net::error::operation_aborted) return;
    // Out of file descriptors or similar: retry shortly instead of spinning.
    log::warn("accept failed", {{"listener", opts.name}, {"error", ec.message()}});
    retry_timer.expires_after(std::chrono::milliseconds(50));
    retry_timer.async_wait([this, keep = Keep()](beast::error_code wait_ec) {
      if (!wait_ec && acceptor.is_open()) DoAccept();
    });
    return;
  }
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  const uint64_t id = conns.NextId();
  std::optional<ConnectionRegistry::Evicted> evicted;
  if (ssl_ctx) {
    auto s = std::make_shared<Session<TlsStream>>(*this, id, std::move(socket), *ssl_ctx);
    evicted = conns.Admit(id, s, ConnPhase::kHandshake);
    s->Start();
  } else {
    auto s = std::make_shared<Session<PlainStream>>(*this, id, std::move(socket));
    evicted = conns.Admit(id, s, ConnPhase::kHandshake);  // opening: until its first request
    s->Start();
  }
  if (evicted) {
    if (auto victim = evicted->conn.lock()) victim->Cut();
    NoteEviction(evicted->phase);
  }
  DoAccept();
}

void ConnectionServer::Impl::RunLoop(net::io_context& ioc) {
  // The decision log lines of one round of handlers leave in one write (flushed after the
  // handlers already queued on this thread's own context, and when the loop ends).
  log::DeferredWrites deferred([&ioc] { net::post(ioc, [] { log::DeferredWrites::Flush(); }); });
  for (;;) {
    try {
      ioc.run();
      return;
    } catch (const std::exception& e) {
      log::error("unexpected exception on an io thread",
                 {{"listener", opts.name}, {"error", e.what()}});
    }
  }
}

ConnectionServer::ConnectionServer(ConnectionOptions options, HttpHandler handler,
                                   const KeyPairSource* tls, prometheus::Registry& registry)
    : impl_(std::make_shared<Impl>(std::move(options), std::move(handler), AsyncHttpHandler(), tls,
                                   nullptr, registry)) {}

ConnectionServer::ConnectionServer(ConnectionOptions options, AsyncHttpHandler handler,
                                   const KeyPairSource* tls, const ClientCaSource* client_ca,
                                   prometheus::Registry& registry)
    : impl_(std::make_shared<Impl>(std::move(options), HttpHandler(), std::move(handler), tls,
                                   client_ca, registry)) {}

boost::asio::any_io_executor ConnectionServer::executor() const {
  if (impl_->external) return impl_->external;
  return impl_->iocs.front()->get_executor();
}

bool ConnectionServer::Impl::CloseAll(Clock::time_point deadline) {
  for (auto& conn : conns.All()) conn->Cut();
  MutexLock lock(live_mu);
  return live_cv.WaitUntil(live_mu, deadline, [this] { return live.load() == 0; });
}

ConnectionServer::~ConnectionServer() {
  Stop();
  if (impl_->external) {
    runtime::DieIfOn(impl_->external, "ConnectionServer's destructor");
    if (!impl_->CloseAll(Clock::now() + std::chrono::seconds(1))) {
      log::error("connections still alive when the server went; their state is kept until they go",
                 {{"listener", impl_->opts.name}, {"alive", std::to_string(impl_->live.load())}});
    }
    return;
  }
  impl_->StopContexts();
  for (auto& t : impl_->threads) {
    if (t.joinable()) t.join();
  }
}

Status ConnectionServer::Start() {
  Impl& s = *impl_;
  if (s.tls_source != nullptr) {
    s.ssl_ctx.emplace(ssl::context::tls_server);
    if (!ConfigureServerContext(s.ssl_ctx->native_handle(), s.tls_source, s.opts.http2)) {
      return Status::InvalidArgument("TLS context setup failed");
    }
    if (s.client_ca != nullptr &&
        !ConfigureClientVerification(s.ssl_ctx->native_handle(), s.client_ca)) {
      return Status::InvalidArgument("TLS client verification setup failed");
    }
  }
  const std::string where = fmt::format("{}:{}", s.opts.bind_address, s.opts.port);
  beast::error_code ec;
  const auto address = net::ip::make_address(s.opts.bind_address, ec);
  if (ec) {
    return Status::InvalidArgument(
        fmt::format("invalid bind address {}: {}", s.opts.bind_address, ec.message()));
  }
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(s.opts.port));
  s.acceptor.open(endpoint.protocol(), ec);
  if (!ec) s.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(endpoint, ec);
  if (!ec) s.acceptor.listen(s.opts.backlog, ec);
  if (ec) {
    return Status::IOError(fmt::format("cannot listen on {} ({}: address in use or not available)",
                                       where, ec.message()));
  }
  s.DoAccept();
  for (auto& ioc : s.iocs) {
    s.threads.emplace_back([&s, &ctx = *ioc] { s.RunLoop(ctx); });
  }
  s.serving.store(true);
  log::info("listening", {{"listener", s.opts.name},
                          {"address", where},
                          {"tls", s.ssl_ctx ? "true" : "false"},
                          {"io_threads", std::to_string(s.opts.io_threads)},
                          {"max_connections", std::to_string(s.opts.max_connections)}});
  return Status::Ok();
}

void ConnectionServer::BeginDrain() {
  Impl& s = *impl_;
  s.serving.store(false);
  s.draining.store(true);
}

void ConnectionServer::Stop() {
  Impl& s = *impl_;
  if (s.stopped.exchange(true)) return;
  s.draining.store(true);
  s.serving.store(false);
  net::post(s.acceptor.get_executor(), [&s, keep = s.Keep()] {
    beast::error_code ignored;
    s.acceptor.close(ignored);
    s.retry_timer.cancel();
  });
  for (auto& conn : s.conns.All()) conn->Drain();
}

bool ConnectionServer::WaitStopped(std::chrono::milliseconds timeout) {
  Impl& s = *impl_;
  if (s.external) {
    runtime::DieIfOn(s.external, "ConnectionServer::WaitStopped");
    const Clock::time_point deadline = Clock::now() + timeout;
    const bool drained = s.conns.WaitEmpty(deadline);
    // Closing is quick (a posted close each): a short while more when the drain used it all.
    const bool gone = s.CloseAll(std::max(deadline, Clock::now() + std::chrono::milliseconds(250)));
    return drained && gone;
  }
  const bool drained = s.conns.WaitEmpty(Clock::now() + timeout);
  s.StopContexts();
  for (auto& t : s.threads) {
    if (t.joinable()) t.join();
  }
  return drained;
}

bool ConnectionServer::WaitDrained(std::chrono::milliseconds timeout) {
  return impl_->conns.WaitEmpty(Clock::now() + timeout);
}

bool ConnectionServer::Serving() const { return impl_->serving.load(); }

size_t ConnectionServer::OpenConnections() const { return impl_->conns.Size(); }

size_t ConnectionServer::LiveConnections() const { return impl_->live.load(); }

}  // namespace aw::server
