// Certificates made in memory for the unit tests that run real TLS (ECDSA P-256, one hour).
#pragma once

#include <openssl/evp.h>
#include <openssl/x509.h>

#include <memory>
#include <string>

#include "server/tls_keypair.h"

namespace aw::server::testing {

struct Cert {
  std::unique_ptr<EVP_PKEY, OpenSslFree> key;
  std::unique_ptr<X509, OpenSslFree> x509;
  std::string cert_pem() const;
  std::string key_pem() const;
};

// A certificate for `cn`, signed by `issuer` (self-signed when null). A CA when `ca`; otherwise
// with the extended key usage `eku` when given, else a serving certificate for IP 127.0.0.1.
// Fails the calling test (gtest) when an extension cannot be made.
Cert MakeCert(const std::string& cn, const Cert* issuer, bool ca, const char* eku = nullptr);

}  // namespace aw::server::testing
