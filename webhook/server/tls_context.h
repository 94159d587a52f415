// TLS settings for the admission listener.
//
// Promise: ConfigureServerContext turns an SSL_CTX into one that accepts only TLS 1.2 and 1.3,
// with forward-secret AEAD ciphers for TLS 1.2 (ECDHE + AES-GCM/ChaCha20-Poly1305), no
// renegotiation or compression, ALPN answering "http/1.1" (or "h2" first, then "http/1.1", on a
// listener that serves HTTP/2; a client that offers only other protocols proceeds without ALPN),
// and a certificate callback that picks the current key pair from `source` at every full handshake.
// Swapping the pair in the source therefore takes effect for the next handshake without touching
// the SSL_CTX; handshakes already in progress keep the pair they picked.
//
// ConfigureClientVerification (mutual TLS) makes a server context require a client certificate
// and verify it, at every handshake, against the CA bundle `source` holds at that moment (chain
// to one of its certificates, validity dates, extended key usage clientAuth when present, as
// OpenSSL's "ssl_client" purpose checks); a client without one, or with one that does not verify,
// fails the handshake. Sessions are not cached or resumed on such a context, so a CA removed from
// the bundle is refused at the very next connection.
#pragma once

#include <openssl/ssl.h>

#include <memory>
#include <string>
#include <string_view>

#include "server/tls_keypair.h"

namespace aw::server {

// Where the current key pair comes from. Must be thread-safe; must outlive the SSL_CTX.
class KeyPairSource {
 public:
  virtual ~KeyPairSource() = default;
  virtual std::shared_ptr<const KeyPair> Current() const = 0;
};

// TLS 1.2 cipher list (TLS 1.3 suites are OpenSSL's defaults, all AEAD).
inline constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

// `http2`: ALPN offers "h2" as well (preferred when the client offers it), for a listener that
// serves HTTP/2 (ConnectionOptions::http2).
bool ConfigureServerContext(SSL_CTX* ctx, const KeyPairSource* source, bool http2 = false);

// Trusted CA certificates for client verification. Immutable; share through shared_ptr.
class CaBundle {
 public:
  explicit CaBundle(std::unique_ptr<STACK_OF(X509), OpenSslFree> certs);
  STACK_OF(X509) * certs() const { return certs_.get(); }
  size_t size() const;

 private:
  std::unique_ptr<STACK_OF(X509), OpenSslFree> certs_;
};

using CaBundleResult = StatusOr<std::shared_ptr<const CaBundle>>;
// Every PEM certificate in `pem` (at least one; a CERTIFICATE block that does not decode is an
// InvalidArgument naming `name`: util::ParseCertificates).
CaBundleResult ParseCaBundle(std::string_view pem, std::string_view name = "CA bundle");

// Where the current client CA bundle comes from. Thread-safe; must outlive the SSL_CTX.
class ClientCaSource {
 public:
  virtual ~ClientCaSource() = default;
  virtual std::shared_ptr<const CaBundle> CurrentCa() const = 0;
};

// After ConfigureServerContext.
bool ConfigureClientVerification(SSL_CTX* ctx, const ClientCaSource* source);

}  // namespace aw::server
