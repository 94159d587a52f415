// TlsEngine: the server side of one TLS connection as a state machine over byte buffers that
// this object owns and sizes to what passes through, with no socket and no fixed buffer.
//
// Promise:
//   - OpenSSL reads ciphertext only from the input this engine was given (PrepareInput /
//     CommitInput) and writes ciphertext only into its output (Output / OutputSent); nothing
//     else is buffered here. Input is kept until OpenSSL has taken it, output until it is sent;
//     ReleaseIdle() frees both when they are empty, so an idle connection holds only OpenSSL's
//     own state (whose record buffers SSL_MODE_RELEASE_BUFFERS frees between records);
//   - Handshake/Read/Write run one OpenSSL call and say what it needs next: kDone (with the
//     bytes read or written), kInput (more ciphertext: send Output() first, then give input and
//     call again with the same arguments), or kError (with an error code: OpenSSL's in Asio's
//     ssl category, as boost::asio::ssl::stream reports it, net::error::eof for the peer's
//     close_notify, ssl::error::stream_truncated for a transport error inside OpenSSL). After
//     every call, Output() may hold bytes to send (handshake messages, records, an alert);
//   - a Write of n bytes either writes all n (the output always takes everything) or fails;
//   - not thread-safe: one caller at a time (a connection's strand). Not movable: OpenSSL's BIO
//     points at it.
#pragma once

#include <openssl/ssl.h>

#include <boost/asio/buffer.hpp>
#include <boost/system/error_code.hpp>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace aw::server {

class TlsEngine {
 public:
  enum class Want { kDone, kInput, kError };
  struct Step {
    Want want = Want::kDone;
    size_t bytes = 0;
    boost::system::error_code ec;
  };

  // A server-side connection of `ctx`. On failure (out of memory) every call returns kError.
  explicit TlsEngine(SSL_CTX* ctx);
  ~TlsEngine();
  TlsEngine(const TlsEngine&) = delete;
  TlsEngine& operator=(const TlsEngine&) = delete;

  Step Handshake();
  Step Read(void* data, size_t size);
  Step Write(const void* data, size_t size);

  // Ciphertext to send, in order. OutputSent() drops all of it (sent, or the connection failed).
  std::string_view Output() const { return std::string_view(out_.data(), out_.size()); }
  void OutputSent() { out_.clear(); }

  // Space for the next ciphertext from the peer: sized to what OpenSSL last asked for (at least a
  // small read, at most a whole TLS record). Valid until CommitInput, which keeps the first `n`
  // bytes of it. One PrepareInput at a time.
  boost::asio::mutable_buffer PrepareInput();
  void CommitInput(size_t n);

  // Frees the input and output buffers when they hold nothing; with `failed` (the connection is
  // of no further use) the input also when it still holds bytes.
  void ReleaseIdle(bool failed = false);

  // Ciphertext received and not yet taken by OpenSSL.
  size_t BufferedInput() const { return in_len_ - in_pos_; }
  // Bytes buffered here (input not yet taken, output not yet sent), and their capacity.
  size_t BufferedBytes() const { return (in_len_ - in_pos_) + out_.size(); }
  size_t BufferCapacity() const { return in_cap_ + out_.capacity(); }

  SSL* native_handle() const { return ssl_.get(); }

 private:
  struct SslFree {
    void operator()(SSL* s) const { SSL_free(s); }
  };
  static int BioWrite(BIO* bio, const char* data, int len);
  static int BioRead(BIO* bio, char* data, int len);
  static long BioCtrl(BIO* bio, int cmd, long num, void* ptr);
  static const BIO_METHOD* Method();
  Step Finish(int ok, size_t bytes);

  std::unique_ptr<SSL, SslFree> ssl_;
  std::unique_ptr<char[]> in_;  // ciphertext from the peer: [in_pos_, in_len_) not yet taken
  size_t in_cap_ = 0;
  size_t in_pos_ = 0;
  size_t in_len_ = 0;
  size_t wanted_ = 0;      // the largest read OpenSSL asked for that found no input
  std::vector<char> out_;  // ciphertext to send
};

}  // namespace aw::server
