// TLS key pairs: loading a certificate chain and private key from PEM files, validated.
//
// Promise: ParseKeyPair either returns a pair whose private key matches the leaf certificate
// (plus every intermediate certificate that followed it in the file: one that does not decode is
// an error, never left out) or an error message naming the file and the problem (util/io/pem.h);
// it never returns a half-loaded pair. KeyPair owns its OpenSSL objects
// and is immutable once built, so it can be shared between threads through a shared_ptr.
#pragma once

#include <openssl/evp.h>
#include <openssl/x509.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "util/io/pem.h"
#include "util/status.h"

namespace aw::server {

using OpenSslFree = util::OpenSslDelete;

class KeyPair {
 public:
  KeyPair(std::unique_ptr<X509, OpenSslFree> cert, std::unique_ptr<EVP_PKEY, OpenSslFree> key,
          std::unique_ptr<STACK_OF(X509), OpenSslFree> chain);

  X509* cert() const { return cert_.get(); }
  EVP_PKEY* key() const { return key_.get(); }
  STACK_OF(X509) * chain() const { return chain_.get(); }

  // Leaf certificate facts, for logs and metrics.
  const std::string& subject() const { return subject_; }
  const std::string& fingerprint_sha256() const { return fingerprint_; }
  std::chrono::system_clock::time_point not_after() const { return not_after_; }

 private:
  std::unique_ptr<X509, OpenSslFree> cert_;
  std::unique_ptr<EVP_PKEY, OpenSslFree> key_;
  std::unique_ptr<STACK_OF(X509), OpenSslFree> chain_;
  std::string subject_;
  std::string fingerprint_;
  std::chrono::system_clock::time_point not_after_;
};

using KeyPairResult = StatusOr<std::shared_ptr<const KeyPair>>;

// Parses PEM text already read from the files (the names are for messages only); InvalidArgument
// saying what is wrong with which file.
KeyPairResult ParseKeyPair(std::string_view cert_pem, std::string_view key_pem,
                           std::string_view cert_name = "certificate",
                           std::string_view key_name = "key");

}  // namespace aw::server
