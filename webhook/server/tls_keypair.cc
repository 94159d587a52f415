#include "server/tls_keypair.h"

#include <fmt/format.h>

namespace aw::server {
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
  if (cert_pem.empty()) return Status::InvalidArgument(fmt::format("{} is empty", cert_name));
  if (key_pem.empty()) return Status::InvalidArgument(fmt::format("{} is empty", key_name));
  StatusOr<std::vector<util::X509Ptr>> certs = util::ParseCertificates(cert_pem, cert_name);
  if (!certs) return certs.status();
  StatusOr<util::EvpPkeyPtr> key = util::ParsePrivateKey(key_pem, key_name);
  if (!key) return key.status();
  util::X509Ptr leaf = std::move(certs->front());
  certs->erase(certs->begin());
  if (Status s = util::CheckKeyMatches(leaf.get(), key->get(), cert_name, key_name); !s.ok()) {
    return s;
  }
  util::X509StackPtr chain = util::ToStack(std::move(certs).value());
  if (!chain) return Status::Internal(fmt::format("{}: out of memory", cert_name));
  return std::make_shared<const KeyPair>(std::move(leaf), std::move(key).value(), std::move(chain));
}

}  // namespace aw::server
