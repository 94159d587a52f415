// TlsStream: the server side of TLS over a beast::tcp_stream, for ConnectionServer's sessions,
// without fixed per-connection buffers.
//
// Why not boost::asio::ssl::stream (beast::ssl_stream): each one holds four 17 KiB buffers for
// its whole life (two zero-filled in its stream_core, two in its engine's BIO pair), about
// 68 KiB per open connection whether bytes move or not. A gateway holding 1,000 waiting
// allocations paid ~80 MiB for them. Here TlsEngine (tls_engine.h) keeps ciphertext only while
// it passes through, so a connection that is idle or waiting for its answer holds OpenSSL's
// state and nothing else.
//
// Promise:
//   - async_handshake (server side), async_read_some and async_write_some meet Asio's
//     AsyncReadStream / AsyncWriteStream requirements, so Beast's http::async_read / async_write
//     and net::async_write run on it; completion handlers are never called from inside the
//     initiating call;
//   - one operation at a time: ConnectionServer's session never overlaps them. One started
//     while another is outstanding completes with net::error::in_progress and changes nothing;
//   - deadlines, cancel() and close() are the next layer's: a socket read or write that overruns
//     the beast::tcp_stream's expiry completes the operation with beast::error::timeout;
//     cancel() with net::error::operation_aborted (the TLS state stays usable: the operation may
//     be started again);
//   - errors: TLS failures in Asio's ssl category (as ssl::stream reports them); the peer's
//     close_notify, or its end of the TCP stream (FIN), is net::error::eof; socket errors as the
//     socket gives them (a reset: connection_reset);
//   - between operations the stream buffers nothing (BufferCapacity() == 0) unless the peer
//     sent more than the last operation took; after a failed operation, never;
//   - async_write_some takes at most kMaxWriteBytes of plaintext per call, in one SSL_write (the
//     buffers of a sequence are copied together first), so a response that fits is one record;
//   - not movable (the engine's BIO points into it).
#pragma once

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <cstddef>
#include <string>
#include <utility>

#include "server/tls_engine.h"

namespace aw::server {

class TlsStream {
 public:
  using next_layer_type = boost::beast::tcp_stream;
  using executor_type = next_layer_type::executor_type;
  static constexpr size_t kMaxWriteBytes = 64 * 1024;

  TlsStream(boost::asio::ip::tcp::socket&& socket, boost::asio::ssl::context& ctx)
      : next_(std::move(socket)), engine_(ctx.native_handle()) {}
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  executor_type get_executor() noexcept { return next_.get_executor(); }
  next_layer_type& next_layer() noexcept { return next_; }
  SSL* native_handle() const { return engine_.native_handle(); }
  // What the engine holds right now (for tests and diagnostics).
  size_t BufferCapacity() const { return engine_.BufferCapacity(); }

  // Completion: void(error_code).
  template <class Token>
  auto async_handshake(Token&& token) {
    return boost::asio::async_compose<Token, void(boost::system::error_code)>(
        Op<Kind::kHandshake, boost::asio::mutable_buffer>{*this, {}}, token, next_);
  }
  // Completes (void(error_code)) once ciphertext from the peer is here to be processed (at once if
  // some is buffered already): e.g. a ClientHello before async_handshake. Only a small read
  // buffer is held meanwhile.
  template <class Token>
  auto async_wait_input(Token&& token) {
    return boost::asio::async_compose<Token, void(boost::system::error_code)>(
        Op<Kind::kWaitInput, boost::asio::mutable_buffer>{*this, {}}, token, next_);
  }
  // Completion: void(error_code, size_t bytes_read).
  template <class MutableBuffers, class Token>
  auto async_read_some(const MutableBuffers& buffers, Token&& token) {
    return boost::asio::async_compose<Token, void(boost::system::error_code, size_t)>(
        Op<Kind::kRead, MutableBuffers>{*this, buffers}, token, next_);
  }
  // Completion: void(error_code, size_t bytes_written): every byte counted is encrypted and
  // handed to the socket.
  template <class ConstBuffers, class Token>
  auto async_write_some(const ConstBuffers& buffers, Token&& token) {
    return boost::asio::async_compose<Token, void(boost::system::error_code, size_t)>(
        Op<Kind::kWrite, ConstBuffers>{*this, buffers}, token, next_);
  }

 private:
  enum class Kind { kHandshake, kWaitInput, kRead, kWrite };
  using Step = TlsEngine::Step;
  using Want = TlsEngine::Want;

  // One operation: run the engine; send what it wrote; read when it wants input; repeat.
  template <Kind K, class Buffers>
  struct Op {
    enum class State { kStart, kSending, kReceiving, kPosted };
    TlsStream& s;
    Buffers buffers;
    State state = State::kStart;
    bool owner = false;   // this operation holds the stream
    bool did_io = false;  // a socket operation ran (so completing now is not inline)
    size_t written = 0;   // kWrite: plaintext already taken by the engine
    Step step;            // what the last engine call said

    template <class Self>
    void operator()(Self& self, boost::system::error_code ec = {}, size_t n = 0) {
      switch (state) {
        case State::kStart:
          if (s.busy_) return Finish(self, boost::asio::error::in_progress, 0);
          s.busy_ = owner = true;
          break;
        case State::kSending:
          s.engine_.OutputSent();
          if (ec) return Finish(self, ec, 0);
          if (step.want == Want::kDone) return Finish(self, {}, step.bytes);
          if (step.want == Want::kError) return Finish(self, step.ec, 0);
          return Receive(self);
        case State::kReceiving:
          if (ec) return Finish(self, ec, 0);
          s.engine_.CommitInput(n);
          break;
        case State::kPosted:
          if (owner) s.busy_ = false;
          if constexpr (K == Kind::kHandshake || K == Kind::kWaitInput) {
            return self.complete(step.ec);
          } else {
            return self.complete(step.ec, step.bytes);
          }
      }
      step = Run();
      if (!s.engine_.Output().empty()) {
        state = State::kSending;
        did_io = true;
        const auto out = s.engine_.Output();
        return boost::asio::async_write(s.next_, boost::asio::buffer(out.data(), out.size()),
                                        std::move(self));
      }
      if (step.want == Want::kInput) return Receive(self);
      Finish(self, step.ec, step.bytes);
    }

    Step Run() {
      if constexpr (K == Kind::kHandshake) {
        return s.engine_.Handshake();
      } else if constexpr (K == Kind::kWaitInput) {
        return s.engine_.BufferedInput() > 0 ? Step{} : Step{Want::kInput, 0, {}};
      } else if constexpr (K == Kind::kRead) {
        for (auto it = boost::asio::buffer_sequence_begin(buffers);
             it != boost::asio::buffer_sequence_end(buffers); ++it) {
          boost::asio::mutable_buffer b(*it);
          if (b.size() > 0) return s.engine_.Read(b.data(), b.size());
        }
        return Step{};  // nothing asked: 0 bytes, at once
      } else {
        // One SSL_write for the whole sequence (up to kMaxWriteBytes): a response is one TLS
        // record, not one per buffer (Beast serialises a message as several buffers: start line,
        // fields, body).
        const char* data = nullptr;
        size_t size = 0;
        size_t skip = written;
        size_t pieces = 0;
        std::string& gathered = GatherScratch();
        for (auto it = boost::asio::buffer_sequence_begin(buffers);
             it != boost::asio::buffer_sequence_end(buffers) && size < kMaxWriteBytes; ++it) {
          boost::asio::const_buffer b(*it);
          if (skip >= b.size()) {
            skip -= b.size();
            continue;
          }
          b += skip;
          skip = 0;
          const size_t take = std::min(b.size(), kMaxWriteBytes - size);
          if (take == 0) continue;
          if (pieces == 0) {
            data = static_cast<const char*>(b.data());
          } else {
            if (pieces == 1) gathered.assign(data, size);
            gathered.append(static_cast<const char*>(b.data()), take);
            data = gathered.data();
          }
          ++pieces;
          size += take;
        }
        if (size == 0) return Step{Want::kDone, 0, {}};
        Step w = s.engine_.Write(data, size);
        if (pieces > 1 && gathered.capacity() > kMaxWriteBytes) std::string().swap(gathered);
        if (w.want == Want::kDone) written += w.bytes;
        return w.want == Want::kDone ? Step{Want::kDone, written, {}} : w;
      }
    }

    // Per io thread: the buffers of one write copied together (used only within Run()).
    static std::string& GatherScratch() {
      thread_local std::string scratch;
      scratch.clear();
      return scratch;
    }

    template <class Self>
    void Receive(Self& self) {
      state = State::kReceiving;
      did_io = true;
      s.next_.async_read_some(s.engine_.PrepareInput(), std::move(self));
    }

    template <class Self>
    void Finish(Self& self, boost::system::error_code ec, size_t n) {
      // After an error other than a cancel the connection is over: nothing is kept for it.
      if (owner) s.engine_.ReleaseIdle(ec && ec != boost::asio::error::operation_aborted);
      step.ec = ec;
      step.bytes = ec ? 0 : n;
      if (!did_io) {  // never complete from inside the initiating call
        state = State::kPosted;
        did_io = true;
        return boost::asio::post(s.next_.get_executor(), std::move(self));
      }
      if (owner) s.busy_ = false;
      if constexpr (K == Kind::kHandshake || K == Kind::kWaitInput) {
        self.complete(ec);
      } else {
        self.complete(ec, step.bytes);
      }
    }
  };

  next_layer_type next_;
  TlsEngine engine_;
  bool busy_ = false;
};

}  // namespace aw::server
