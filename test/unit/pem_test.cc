// util/io/pem.h: the one PEM reader (certificates, private keys, the key-matches check).
#include "util/io/pem.h"

#include <gtest/gtest.h>
#include <openssl/err.h>

#include <string>

#include "test_certs.h"

namespace aw::util {
namespace {

using server::testing::Cert;
using server::testing::MakeCert;

std::string Err(const Status& s) { return s.message(); }

TEST(Pem, CertificatesInFileOrder) {
  Cert ca = MakeCert("ca", nullptr, true);
  Cert leaf = MakeCert("leaf", &ca, false);
  auto certs = ParseCertificates(leaf.cert_pem() + ca.cert_pem(), "chain.pem");
  ASSERT_TRUE(certs.ok()) << certs.status().message();
  ASSERT_EQ(certs->size(), 2u);
  EXPECT_EQ(X509_cmp((*certs)[0].get(), leaf.x509.get()), 0);
  EXPECT_EQ(X509_cmp((*certs)[1].get(), ca.x509.get()), 0);
  EXPECT_EQ(ERR_peek_error(), 0u);
}

TEST(Pem, SkipsTextAndOtherBlocks) {
  Cert leaf = MakeCert("leaf", nullptr, false);
  // A combined file (key first), with comments around the blocks.
  auto certs = ParseCertificates(
      "# bundle\n" + leaf.key_pem() + "comment\n" + leaf.cert_pem() + "trailing text\n",
      "combined.pem");
  ASSERT_TRUE(certs.ok()) << certs.status().message();
  EXPECT_EQ(certs->size(), 1u);
}

TEST(Pem, NoCertificateNamesTheFile) {
  auto r = ParseCertificates("not pem at all", "ca.crt");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(Err(r.status()), "ca.crt: no PEM certificate found");
  EXPECT_FALSE(ParseCertificates("", "empty.crt").ok());
  EXPECT_EQ(ERR_peek_error(), 0u);
}

TEST(Pem, BadBlockIsAnErrorNotSkipped) {
  Cert a = MakeCert("a", nullptr, false);
  const std::string bad = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
  // A broken intermediate after a good leaf: the chain is refused, not returned shorter.
  auto r = ParseCertificates(a.cert_pem() + bad, "tls.crt");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(Err(r.status()).find("tls.crt: bad PEM certificate: "), std::string::npos)
      << Err(r.status());
  // Truncated in the middle of a block.
  const std::string pem = a.cert_pem();
  EXPECT_FALSE(ParseCertificates(pem.substr(0, pem.size() / 2), "half.crt").ok());
  EXPECT_EQ(ERR_peek_error(), 0u);
}

TEST(Pem, TooLarge) {
  Cert a = MakeCert("a", nullptr, false);
  std::string big = a.cert_pem() + std::string(kMaxPemBytes, '#');
  EXPECT_EQ(Err(ParseCertificates(big, "big.crt").status()), "big.crt: larger than 1 MiB");
  EXPECT_EQ(Err(ParsePrivateKey(big, "big.key").status()), "big.key: larger than 1 MiB");
}

TEST(Pem, PrivateKeyAndMatch) {
  Cert a = MakeCert("a", nullptr, false);
  Cert b = MakeCert("b", nullptr, false);
  auto key = ParsePrivateKey(a.key_pem(), "a.key");
  ASSERT_TRUE(key.ok()) << key.status().message();
  EXPECT_TRUE(CheckKeyMatches(a.x509.get(), key->get(), "a.crt", "a.key").ok());
  Status mismatch = CheckKeyMatches(b.x509.get(), key->get(), "b.crt", "a.key");
  EXPECT_EQ(Err(mismatch), "a.key does not match the public key of b.crt");
  EXPECT_EQ(ERR_peek_error(), 0u);
}

TEST(Pem, NoPrivateKey) {
  Cert a = MakeCert("a", nullptr, false);
  auto r = ParsePrivateKey(a.cert_pem(), "tls.key");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(Err(r.status()).find("tls.key: no PEM private key: "), std::string::npos);
  EXPECT_EQ(ERR_peek_error(), 0u);
}

TEST(Pem, ToStackOwnsTheCertificates) {
  Cert ca = MakeCert("ca", nullptr, true);
  Cert leaf = MakeCert("leaf", &ca, false);
  auto certs = ParseCertificates(leaf.cert_pem() + ca.cert_pem(), "chain.pem");
  ASSERT_TRUE(certs.ok());
  X509StackPtr stack = ToStack(std::move(certs).value());
  ASSERT_NE(stack, nullptr);
  EXPECT_EQ(sk_X509_num(stack.get()), 2);
  EXPECT_EQ(sk_X509_num(ToStack({}).get()), 0);
}

}  // namespace
}  // namespace aw::util
