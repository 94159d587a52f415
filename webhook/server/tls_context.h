// TLS settings for the admission listener.
//
// Promise: ConfigureServerContext turns an SSL_CTX into one that accepts only TLS 1.2 and 1.3,
// with forward-secret AEAD ciphers for TLS 1.2 (ECDHE + AES-GCM/ChaCha20-Poly1305), no
// renegotiation or compression, ALPN answering "http/1.1" (the only protocol served; a client
// that offers only other protocols proceeds without ALPN), and a certificate callback that
// picks the current key pair from `source` at every full handshake. Swapping the pair in the
// source therefore takes effect for the next handshake without touching the SSL_CTX; handshakes
// already in progress keep the pair they picked.
#pragma once

#include <memory>

#include <openssl/ssl.h>

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

bool ConfigureServerContext(SSL_CTX* ctx, const KeyPairSource* source);

}  // namespace aw::server
