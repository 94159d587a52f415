#include "server/tls_context.h"

#include <cstring>

#include "util/log.h"

namespace aw::server {
namespace {

// Picks the current pair for this handshake. Returning 0 aborts the handshake (no pair loaded).
int CertCallback(SSL* ssl, void* arg) {
  const auto* source = static_cast<const KeyPairSource*>(arg);
  std::shared_ptr<const KeyPair> pair = source->Current();
  if (!pair) return 0;
  // Copies references into this SSL object: the pair may be swapped right after.
  if (SSL_use_cert_and_key(ssl, pair->cert(), pair->key(), pair->chain(), /*override=*/1) != 1) {
    return 0;
  }
  return 1;
}

constexpr unsigned char kHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

int AlpnSelect(SSL* /*ssl*/, const unsigned char** out, unsigned char* outlen,
               const unsigned char* in, unsigned int inlen, void* /*arg*/) {
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, kHttp11, sizeof(kHttp11), in, inlen) ==
      OPENSSL_NPN_NEGOTIATED) {
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

}  // namespace

bool ConfigureServerContext(SSL_CTX* ctx, const KeyPairSource* source) {
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) return false;
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                               SSL_OP_CIPHER_SERVER_PREFERENCE |
                               SSL_OP_NO_SESSION_RESUMPTION_ON_RENEGOTIATION);
  if (SSL_CTX_set_cipher_list(ctx, kTls12Ciphers) != 1) return false;
  // Curves: X25519 first, then P-256 (ECDSA P-256 certificates).
  if (SSL_CTX_set1_groups_list(ctx, "X25519:P-256:P-384") != 1) return false;
  // Keep per-connection memory low when many keep-alive connections sit idle.
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
  SSL_CTX_sess_set_cache_size(ctx, 1024);
  static const unsigned char kSidCtx[] = "allocating-webhook";
  SSL_CTX_set_session_id_context(ctx, kSidCtx, sizeof(kSidCtx) - 1);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  SSL_CTX_set_alpn_select_cb(ctx, AlpnSelect, nullptr);
  // The source is only read through its const interface; OpenSSL's callback argument is void*.
  SSL_CTX_set_cert_cb(ctx, CertCallback, const_cast<KeyPairSource*>(source));
  return true;
}

}  // namespace aw::server
