#include "server/tls_keypair.h"

#include <fmt/format.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>

#include "util/io/openssl_errors.h"

namespace aw::server {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};

std::unique_ptr<BIO, BioFree> MemBio(std::string_view text) {
  return std::unique_ptr<BIO, BioFree>(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

}  // namespace

KeyPair::KeyPair(std::unique_ptr<X509, OpenSslFree> cert,
                 std::unique_ptr<EVP_PKEY, OpenSslFree> key,
                 std::unique_ptr<STACK_OF(X509), OpenSslFree> chain)
    : cert_(std::move(cert)), key_(std::move(key)), chain_(std::move(chain)) {
  char name[512];
  X509_NAME_oneline(X509_get_subject_name(cert_.get()), name, sizeof(name));
  subject_ = name;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int md_len = 0;
  if (X509_digest(cert_.get(), EVP_sha256(), md, &md_len) == 1) {
    for (unsigned i = 0; i < md_len; ++i) fingerprint_ += fmt::format("{:02x}", md[i]);
  }
  const ASN1_TIME* na = X509_get0_notAfter(cert_.get());
  struct tm tm {};
  if (na != nullptr && ASN1_TIME_to_tm(na, &tm) == 1) {
    not_after_ = std::chrono::system_clock::from_time_t(timegm(&tm));
  }
}

KeyPairResult ParseKeyPair(std::string_view cert_pem, std::string_view key_pem,
                           std::string_view cert_name, std::string_view key_name) {
  ERR_clear_error();
  if (cert_pem.empty()) return Status::InvalidArgument(fmt::format("{} is empty", cert_name));
  if (key_pem.empty()) return Status::InvalidArgument(fmt::format("{} is empty", key_name));
  if (cert_pem.size() > (1 << 20) || key_pem.size() > (1 << 20)) {
    return Status::InvalidArgument("certificate or key file larger than 1 MiB");
  }

  auto cert_bio = MemBio(cert_pem);
  std::unique_ptr<X509, OpenSslFree> cert(
      PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr));
  if (!cert)
    return Status::InvalidArgument(fmt::format("{}: no PEM certificate: {}", cert_name,
                                               util::OpenSslErrors("unknown OpenSSL error")));
  std::unique_ptr<STACK_OF(X509), OpenSslFree> chain(sk_X509_new_null());
  while (true) {
    X509* extra = PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr);
    if (extra == nullptr) break;
    sk_X509_push(chain.get(), extra);
  }
  ERR_clear_error();  // the loop above ends with a "no start line" error

  auto key_bio = MemBio(key_pem);
  std::unique_ptr<EVP_PKEY, OpenSslFree> key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (!key)
    return Status::InvalidArgument(fmt::format("{}: no PEM private key: {}", key_name,
                                               util::OpenSslErrors("unknown OpenSSL error")));

  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return Status::InvalidArgument(
        fmt::format("{} does not match the public key of {}", key_name, cert_name));
  }
  return std::make_shared<const KeyPair>(std::move(cert), std::move(key), std::move(chain));
}

}  // namespace aw::server
