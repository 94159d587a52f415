#include "server/tls_context.h"

#include <fmt/format.h>
#include <openssl/x509_vfy.h>

#include <cstring>

#include "util/io/log.h"
#include "util/io/pem.h"

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
constexpr unsigned char kH2Http11[] = {2, 'h', '2', 8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

// `arg` non-null: the listener serves HTTP/2 too ("h2" preferred).
int AlpnSelect(SSL* /*ssl*/, const unsigned char** out, unsigned char* outlen,
               const unsigned char* in, unsigned int inlen, void* arg) {
  unsigned char* selected = nullptr;
  const bool h2 = arg != nullptr;
  if (SSL_select_next_proto(&selected, outlen, h2 ? kH2Http11 : kHttp11,
                            h2 ? sizeof(kH2Http11) : sizeof(kHttp11), in,
                            inlen) == OPENSSL_NPN_NEGOTIATED) {
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

// Verifies the client's chain against the bundle current at this handshake (OpenSSL has set up
// `store_ctx` with the peer chain and the "ssl_client" purpose; only the trust anchors change).
int VerifyWithCurrentCa(X509_STORE_CTX* store_ctx, void* arg) {
  const auto* source = static_cast<const ClientCaSource*>(arg);
  std::shared_ptr<const CaBundle> bundle = source->CurrentCa();
  if (!bundle || bundle->size() == 0) {
    X509_STORE_CTX_set_error(store_ctx, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
    return 0;
  }
  // `bundle` stays alive (held here) for the whole verification.
  X509_STORE_CTX_set0_trusted_stack(store_ctx, bundle->certs());
  return X509_verify_cert(store_ctx) == 1 ? 1 : 0;
}

}  // namespace

CaBundle::CaBundle(std::unique_ptr<STACK_OF(X509), OpenSslFree> certs) : certs_(std::move(certs)) {}

size_t CaBundle::size() const {
  return certs_ ? static_cast<size_t>(sk_X509_num(certs_.get())) : 0;
}

CaBundleResult ParseCaBundle(std::string_view pem, std::string_view name) {
  StatusOr<std::vector<util::X509Ptr>> certs = util::ParseCertificates(pem, name);
  if (!certs) return certs.status();
  util::X509StackPtr stack = util::ToStack(std::move(certs).value());
  if (!stack) return Status::Internal(fmt::format("{}: out of memory", name));
  return std::make_shared<const CaBundle>(std::move(stack));
}

bool ConfigureClientVerification(SSL_CTX* ctx, const ClientCaSource* source) {
  if (source == nullptr) return false;
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  SSL_CTX_set_cert_verify_callback(ctx, VerifyWithCurrentCa, const_cast<ClientCaSource*>(source));
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
  SSL_CTX_set_num_tickets(ctx, 0);
  return true;
}

bool ConfigureServerContext(SSL_CTX* ctx, const KeyPairSource* source, bool http2) {
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) return false;
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                               SSL_OP_CIPHER_SERVER_PREFERENCE |
                               SSL_OP_NO_SESSION_RESUMPTION_ON_RENEGOTIATION);
  if (SSL_CTX_set_cipher_list(ctx, kTls12Ciphers) != 1) return false;
  // Curves: X25519 first, then P-256 (ECDSA P-256 certificates).
  if (SSL_CTX_set1_groups_list(ctx, "X25519:P-256:P-384") != 1) return false;
  // Keep per-connection memory low when many keep-alive connections sit idle. A write that must
  // be retried (after input) may come from another address: TlsStream gathers a write's buffers
  // into a per-thread scratch string first.
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
  SSL_CTX_sess_set_cache_size(ctx, 1024);
  static const unsigned char kSidCtx[] = "allocating-webhook";
  SSL_CTX_set_session_id_context(ctx, kSidCtx, sizeof(kSidCtx) - 1);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  static int h2_marker = 0;
  SSL_CTX_set_alpn_select_cb(ctx, AlpnSelect, http2 ? &h2_marker : nullptr);
  // The source is only read through its const interface; OpenSSL's callback argument is void*.
  SSL_CTX_set_cert_cb(ctx, CertCallback, const_cast<KeyPairSource*>(source));
  return true;
}

}  // namespace aw::server
