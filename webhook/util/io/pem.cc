#include "util/io/pem.h"

#include <fmt/format.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>

#include "util/io/openssl_errors.h"

namespace aw::util {
namespace {

struct BioDelete {
  void operator()(BIO* b) const { BIO_free(b); }
};

std::unique_ptr<BIO, BioDelete> MemBio(std::string_view text) {
  return std::unique_ptr<BIO, BioDelete>(
      BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

Status TooLarge(std::string_view name) {
  return Status::InvalidArgument(fmt::format("{}: larger than 1 MiB", name));
}

}  // namespace

StatusOr<std::vector<X509Ptr>> ParseCertificates(std::string_view pem, std::string_view name) {
  ERR_clear_error();
  if (pem.size() > kMaxPemBytes) return TooLarge(name);
  auto bio = MemBio(pem);
  if (!bio) return Status::Internal(fmt::format("{}: out of memory", name));
  std::vector<X509Ptr> certs;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    certs.emplace_back(cert);
  }
  // The loop ends at the end of the input (PEM_R_NO_START_LINE: no further block) or at a block
  // that does not decode.
  const unsigned long err = ERR_peek_last_error();
  if (err != 0 &&
      !(ERR_GET_LIB(err) == ERR_LIB_PEM && ERR_GET_REASON(err) == PEM_R_NO_START_LINE)) {
    return Status::InvalidArgument(
        fmt::format("{}: bad PEM certificate: {}", name, OpenSslErrors("unknown OpenSSL error")));
  }
  ERR_clear_error();
  if (certs.empty())
    return Status::InvalidArgument(fmt::format("{}: no PEM certificate found", name));
  return certs;
}

StatusOr<EvpPkeyPtr> ParsePrivateKey(std::string_view pem, std::string_view name) {
  ERR_clear_error();
  if (pem.size() > kMaxPemBytes) return TooLarge(name);
  auto bio = MemBio(pem);
  if (!bio) return Status::Internal(fmt::format("{}: out of memory", name));
  EvpPkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key) {
    return Status::InvalidArgument(
        fmt::format("{}: no PEM private key: {}", name, OpenSslErrors("unknown OpenSSL error")));
  }
  ERR_clear_error();
  return key;
}

Status CheckKeyMatches(X509* cert, EVP_PKEY* key, std::string_view cert_name,
                       std::string_view key_name) {
  const bool match = X509_check_private_key(cert, key) == 1;
  ERR_clear_error();
  if (!match) {
    return Status::InvalidArgument(
        fmt::format("{} does not match the public key of {}", key_name, cert_name));
  }
  return Status::Ok();
}

X509StackPtr ToStack(std::vector<X509Ptr> certs) {
  X509StackPtr stack(sk_X509_new_null());
  if (!stack) return nullptr;
  for (X509Ptr& cert : certs) {
    if (sk_X509_push(stack.get(), cert.get()) == 0) return nullptr;
    cert.release();  // the stack owns it now
  }
  return stack;
}

}  // namespace aw::util
