// PEM: the one reader of PEM certificates and private keys (serving pair, client CA bundles, the
// Kubernetes and allocator clients' CA and client certificate), over OpenSSL, owning what it
// returns.
//
// Promise:
//   - ParseCertificates(pem, name) returns every PEM certificate in `pem`, in file order (at
//     least one). Text outside PEM blocks and PEM blocks of other types (a private key in the same
//     file) are skipped, as OpenSSL's PEM reader does. A CERTIFICATE block that does not decode is
//     an error, not skipped: a chain or bundle is never returned with a certificate silently left
//     out. Errors are InvalidArgument naming `name`: "<name>: no PEM certificate found",
//     "<name>: bad PEM certificate: <OpenSSL's reason>", "<name>: larger than 1 MiB".
//   - ParsePrivateKey(pem, name) returns the first PEM private key (PKCS#8, PKCS#1 RSA or SEC1
//     EC), or InvalidArgument "<name>: no PEM private key: <reason>".
//   - CheckKeyMatches(cert, key, cert_name, key_name) is OK when `key` is the private key of
//     `cert`'s public key, else InvalidArgument "<key_name> does not match the public key of
//     <cert_name>".
//   - Every function leaves the calling thread's OpenSSL error queue empty. Never throws.
// Thread-safe: yes (no shared state).
#pragma once

#include <openssl/evp.h>
#include <openssl/x509.h>

#include <memory>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace aw::util {

struct OpenSslDelete {
  void operator()(X509* p) const { X509_free(p); }
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(STACK_OF(X509) * p) const { sk_X509_pop_free(p, X509_free); }
};
using X509Ptr = std::unique_ptr<X509, OpenSslDelete>;
using EvpPkeyPtr = std::unique_ptr<EVP_PKEY, OpenSslDelete>;
using X509StackPtr = std::unique_ptr<STACK_OF(X509), OpenSslDelete>;

// The most PEM text one call reads: certificate files and bundles are a few KiB.
inline constexpr size_t kMaxPemBytes = 1 << 20;

StatusOr<std::vector<X509Ptr>> ParseCertificates(std::string_view pem, std::string_view name);
StatusOr<EvpPkeyPtr> ParsePrivateKey(std::string_view pem, std::string_view name);
Status CheckKeyMatches(X509* cert, EVP_PKEY* key, std::string_view cert_name,
                       std::string_view key_name);

// The certificates as an OpenSSL stack (which then owns them); nullptr only when out of memory.
X509StackPtr ToStack(std::vector<X509Ptr> certs);

}  // namespace aw::util
