#include "server/tls_engine.h"

#include <openssl/bio.h>
#include <openssl/err.h>

#include <algorithm>
#include <boost/asio/error.hpp>
#include <boost/asio/ssl/error.hpp>
#include <cstring>

namespace aw::server {
namespace {

namespace net = boost::asio;

// A read from the socket asks for at least this much and at most one TLS record with its header
// and overhead. An idle connection waits with a kMinRead buffer; once a record's header is in,
// the next read asks for the rest of that record.
constexpr size_t kMinRead = 1024;
constexpr size_t kMaxRead = 16 * 1024 + 2 * 1024;

struct BioMethodFree {
  void operator()(BIO_METHOD* m) const { BIO_meth_free(m); }
};

}  // namespace

const BIO_METHOD* TlsEngine::Method() {
  static const std::unique_ptr<BIO_METHOD, BioMethodFree> method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "aw-tls-engine");
    if (m != nullptr) {
      BIO_meth_set_write(m, &TlsEngine::BioWrite);
      BIO_meth_set_read(m, &TlsEngine::BioRead);
      BIO_meth_set_ctrl(m, &TlsEngine::BioCtrl);
    }
    return std::unique_ptr<BIO_METHOD, BioMethodFree>(m);
  }();
  return method.get();
}

TlsEngine::TlsEngine(SSL_CTX* ctx) {
  const BIO_METHOD* method = Method();
  if (method == nullptr) return;
  std::unique_ptr<SSL, SslFree> ssl(SSL_new(ctx));
  if (!ssl) return;
  BIO* bio = BIO_new(method);
  if (bio == nullptr) return;
  BIO_set_data(bio, this);
  BIO_set_init(bio, 1);
  SSL_set_bio(ssl.get(), bio, bio);  // one reference, owned by the SSL from here
  SSL_set_accept_state(ssl.get());
  ssl_ = std::move(ssl);
}

TlsEngine::~TlsEngine() = default;

int TlsEngine::BioWrite(BIO* bio, const char* data, int len) {
  BIO_clear_retry_flags(bio);
  auto* self = static_cast<TlsEngine*>(BIO_get_data(bio));
  if (len <= 0) return 0;
  self->out_.insert(self->out_.end(), data, data + len);
  return len;
}

int TlsEngine::BioRead(BIO* bio, char* data, int len) {
  BIO_clear_retry_flags(bio);
  auto* self = static_cast<TlsEngine*>(BIO_get_data(bio));
  if (len <= 0) return 0;
  const size_t available = self->in_len_ - self->in_pos_;
  if (available == 0) {
    self->wanted_ = std::max(self->wanted_, static_cast<size_t>(len));
    BIO_set_retry_read(bio);
    return -1;
  }
  const size_t n = std::min(available, static_cast<size_t>(len));
  std::memcpy(data, self->in_.get() + self->in_pos_, n);
  self->in_pos_ += n;
  return static_cast<int>(n);
}

long TlsEngine::BioCtrl(BIO* /*bio*/, int cmd, long /*num*/, void* /*ptr*/) {
  switch (cmd) {
    case BIO_CTRL_FLUSH:  // output is taken at once; nothing to flush
      return 1;
    case BIO_CTRL_PENDING:
    case BIO_CTRL_WPENDING:
      return 0;
    default:
      return 0;
  }
}

TlsEngine::Step TlsEngine::Finish(int ok, size_t bytes) {
  if (ok == 1) return Step{Want::kDone, bytes, {}};
  const int err = SSL_get_error(ssl_.get(), ok);
  Step step{Want::kError, 0, {}};
  switch (err) {
    case SSL_ERROR_WANT_READ:
      step.want = Want::kInput;
      break;
    case SSL_ERROR_ZERO_RETURN:  // the peer's close_notify
      step.ec = net::error::eof;
      break;
    case SSL_ERROR_SSL:
      step.ec = boost::system::error_code(static_cast<int>(ERR_get_error()),
                                          net::error::get_ssl_category());
      break;
    default:  // SSL_ERROR_SYSCALL and anything a memory BIO cannot cause
      if (unsigned long e = ERR_get_error(); e != 0) {
        step.ec = boost::system::error_code(static_cast<int>(e), net::error::get_ssl_category());
      } else {
        step.ec = net::ssl::error::stream_truncated;
      }
      break;
  }
  ERR_clear_error();
  return step;
}

TlsEngine::Step TlsEngine::Handshake() {
  if (!ssl_) return Step{Want::kError, 0, net::error::no_memory};
  ERR_clear_error();
  wanted_ = 0;
  return Finish(SSL_do_handshake(ssl_.get()), 0);
}

TlsEngine::Step TlsEngine::Read(void* data, size_t size) {
  if (!ssl_) return Step{Want::kError, 0, net::error::no_memory};
  ERR_clear_error();
  wanted_ = 0;
  size_t n = 0;
  const int ok = SSL_read_ex(ssl_.get(), data, size, &n);
  return Finish(ok, n);
}

TlsEngine::Step TlsEngine::Write(const void* data, size_t size) {
  if (!ssl_) return Step{Want::kError, 0, net::error::no_memory};
  ERR_clear_error();
  wanted_ = 0;
  size_t n = 0;
  const int ok = SSL_write_ex(ssl_.get(), data, size, &n);
  return Finish(ok, n);
}

net::mutable_buffer TlsEngine::PrepareInput() {
  const size_t unread = in_len_ - in_pos_;
  const size_t want = std::clamp(wanted_ > unread ? wanted_ - unread : 0, kMinRead, kMaxRead);
  if (in_cap_ - in_len_ < want) {
    const size_t cap = unread + want;
    auto next = std::make_unique_for_overwrite<char[]>(cap);
    if (unread > 0) std::memcpy(next.get(), in_.get() + in_pos_, unread);
    in_ = std::move(next);
    in_cap_ = cap;
    in_len_ = unread;
    in_pos_ = 0;
  }
  return net::mutable_buffer(in_.get() + in_len_, want);
}

void TlsEngine::CommitInput(size_t n) { in_len_ += std::min(n, in_cap_ - in_len_); }

void TlsEngine::ReleaseIdle(bool failed) {
  if (in_pos_ == in_len_ || failed) {
    in_.reset();
    in_cap_ = in_pos_ = in_len_ = 0;
  }
  if (out_.empty()) std::vector<char>().swap(out_);
}

}  // namespace aw::server
