#include "test_certs.h"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <atomic>

namespace aw::server::testing {
namespace {

// Frees what OpenSslFree (tls_keypair.h) does not cover.
struct LocalFree {
  void operator()(BIO* b) const { BIO_free(b); }
  void operator()(X509_EXTENSION* e) const { X509_EXTENSION_free(e); }
};

std::string ToPem(auto write) {
  std::unique_ptr<BIO, LocalFree> bio(BIO_new(BIO_s_mem()));
  write(bio.get());
  char* data = nullptr;
  long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(len));
}

void AddExt(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  std::unique_ptr<X509_EXTENSION, LocalFree> ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
  ASSERT_TRUE(ext);
  X509_add_ext(cert, ext.get(), -1);
}

}  // namespace

std::string Cert::cert_pem() const {
  return ToPem([&](BIO* b) { PEM_write_bio_X509(b, x509.get()); });
}

std::string Cert::key_pem() const {
  return ToPem([&](BIO* b) {
    PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  });
}

Cert MakeCert(const std::string& cn, const Cert* issuer, bool ca, const char* eku) {
  static std::atomic<long> serial{1};
  Cert c;
  c.key.reset(EVP_EC_gen("P-256"));
  c.x509.reset(X509_new());
  X509* x = c.x509.get();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
  X509_gmtime_adj(X509_getm_notBefore(x), -60);
  X509_gmtime_adj(X509_getm_notAfter(x), 3600);
  X509_set_pubkey(x, c.key.get());
  X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509* issuer_x = issuer ? issuer->x509.get() : x;
  X509_set_issuer_name(x, X509_get_subject_name(issuer_x));
  AddExt(x, issuer_x, NID_basic_constraints, ca ? "critical,CA:TRUE" : "critical,CA:FALSE");
  if (ca) AddExt(x, issuer_x, NID_key_usage, "critical,keyCertSign,digitalSignature");
  if (eku) AddExt(x, issuer_x, NID_ext_key_usage, eku);
  if (!ca && !eku) AddExt(x, issuer_x, NID_subject_alt_name, "IP:127.0.0.1");
  X509_sign(x, issuer ? issuer->key.get() : c.key.get(), EVP_sha256());
  return c;
}

}  // namespace aw::server::testing
