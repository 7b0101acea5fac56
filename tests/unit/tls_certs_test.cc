// The certificates of common/tls_certs.h, checked with OpenSSL's own
// verifier (X509_verify_cert) and, for the fingerprint, the openssl command.
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/tls_certs.h"
#include "testing/temp_tree.h"

namespace slotd {
namespace {

using std::chrono::hours;

using Cert = std::unique_ptr<X509, decltype(&X509_free)>;

// The first certificate of `pem`; null (and a test failure) when there is none.
Cert Parse(const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  Cert cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr), X509_free);
  EXPECT_NE(cert, nullptr) << pem;
  return cert;
}

// X509_V_OK when OpenSSL verifies `leaf_pem` against the one trust anchor
// `anchor_pem` for `purpose` (X509_PURPOSE_SSL_SERVER, ...) and, unless
// empty, host name `host`; else OpenSSL's verify error.
int Verify(const std::string& leaf_pem, const std::string& anchor_pem, int purpose, const std::string& host = "") {
  Cert leaf = Parse(leaf_pem);
  Cert anchor = Parse(anchor_pem);
  std::unique_ptr<X509_STORE, decltype(&X509_STORE_free)> store(X509_STORE_new(), X509_STORE_free);
  X509_STORE_add_cert(store.get(), anchor.get());
  std::unique_ptr<X509_STORE_CTX, decltype(&X509_STORE_CTX_free)> context(X509_STORE_CTX_new(), X509_STORE_CTX_free);
  X509_STORE_CTX_init(context.get(), store.get(), leaf.get(), nullptr);
  X509_STORE_CTX_set_purpose(context.get(), purpose);
  if (!host.empty()) X509_VERIFY_PARAM_set1_host(X509_STORE_CTX_get0_param(context.get()), host.c_str(), 0);
  X509_verify_cert(context.get());
  ERR_clear_error();
  return X509_STORE_CTX_get_error(context.get());
}

// The subjectAltName entries of `pem`: "DNS:name" and "IP:address" as
// OpenSSL prints them.
std::vector<std::string> AltNames(const std::string& pem) {
  Cert cert = Parse(pem);
  std::vector<std::string> out;
  auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert.get(), NID_subject_alt_name, nullptr, nullptr));
  if (!names) return out;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    STACK_OF(CONF_VALUE)* values = i2v_GENERAL_NAME(nullptr, sk_GENERAL_NAME_value(names, i), nullptr);
    for (int j = 0; j < sk_CONF_VALUE_num(values); ++j) {
      const CONF_VALUE* value = sk_CONF_VALUE_value(values, j);
      out.push_back(std::string(value->name) + ":" + value->value);
    }
    sk_CONF_VALUE_pop_free(values, X509V3_conf_free);
  }
  GENERAL_NAMES_free(names);
  return out;
}

// What `command` prints on stdout.
std::string Output(const std::string& command) {
  std::unique_ptr<FILE, decltype(&pclose)> pipe(popen(command.c_str(), "r"), pclose);
  std::string out;
  char buffer[256];
  while (pipe && fgets(buffer, sizeof buffer, pipe.get())) out += buffer;
  return out;
}

// A CA and what it issued, made once: P-256 keys are quick, but not free.
class TlsCerts : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    Result<PemPair> made = MakeCertificateAuthority("test CA", hours(24));
    ASSERT_TRUE(made.ok()) << made.status().message();
    ca_ = new PemPair(*made);
  }
  static void TearDownTestSuite() {
    delete ca_;
    ca_ = nullptr;
  }

  static CertificateRequest ServerRequest() {
    CertificateRequest request;
    request.common_name = "agent1";
    request.dns_names = {"agent1.example.com", "localhost"};
    request.ip_addresses = {"192.0.2.7", "::1"};
    request.use = CertificateRequest::Use::kServer;
    request.valid_for = hours(48);
    return request;
  }

  static PemPair* ca_;
};
PemPair* TlsCerts::ca_ = nullptr;

TEST_F(TlsCerts, TheAuthorityIsACertificateAuthority) {
  Cert cert = Parse(ca_->cert_pem);
  EXPECT_EQ(X509_check_ca(cert.get()), 1);
  EXPECT_TRUE(X509_get_key_usage(cert.get()) & KU_KEY_CERT_SIGN);
  EXPECT_TRUE(X509_get_key_usage(cert.get()) & KU_CRL_SIGN);
  EXPECT_NE(X509_get0_subject_key_id(cert.get()), nullptr);
  EXPECT_EQ(CertificateCommonName(ca_->cert_pem).value(), "test CA");
  EXPECT_NE(ca_->key_pem.find("-----BEGIN PRIVATE KEY-----"), std::string::npos);
}

TEST_F(TlsCerts, AServerCertificateVerifiesForItsNamesOnly) {
  Result<PemPair> server = IssueCertificate(*ca_, ServerRequest());
  ASSERT_TRUE(server.ok()) << server.status().message();
  EXPECT_EQ(Verify(server->cert_pem, ca_->cert_pem, X509_PURPOSE_SSL_SERVER, "agent1.example.com"), X509_V_OK);
  EXPECT_EQ(Verify(server->cert_pem, ca_->cert_pem, X509_PURPOSE_SSL_SERVER, "localhost"), X509_V_OK);
  EXPECT_EQ(Verify(server->cert_pem, ca_->cert_pem, X509_PURPOSE_SSL_SERVER, "agent2.example.com"),
            X509_V_ERR_HOSTNAME_MISMATCH);
  // Not a client's certificate.
  EXPECT_EQ(Verify(server->cert_pem, ca_->cert_pem, X509_PURPOSE_SSL_CLIENT), X509_V_ERR_INVALID_PURPOSE);
}

TEST_F(TlsCerts, AServerCertificateNamesItsHostsAndAddresses) {
  Result<PemPair> server = IssueCertificate(*ca_, ServerRequest());
  ASSERT_TRUE(server.ok()) << server.status().message();
  EXPECT_EQ(AltNames(server->cert_pem),
            (std::vector<std::string>{"DNS:agent1.example.com", "DNS:localhost", "IP Address:192.0.2.7",
                                      "IP Address:0:0:0:0:0:0:0:1"}));
  Cert cert = Parse(server->cert_pem);
  EXPECT_EQ(X509_get_extended_key_usage(cert.get()), static_cast<uint32_t>(XKU_SSL_SERVER));
  EXPECT_EQ(X509_get_key_usage(cert.get()), static_cast<uint32_t>(KU_DIGITAL_SIGNATURE));
  EXPECT_EQ(X509_check_ca(cert.get()), 0);
  EXPECT_NE(X509_get0_authority_key_id(cert.get()), nullptr);
  EXPECT_EQ(ASN1_OCTET_STRING_cmp(X509_get0_authority_key_id(cert.get()),
                                  X509_get0_subject_key_id(Parse(ca_->cert_pem).get())),
            0);
  EXPECT_EQ(CertificateCommonName(server->cert_pem).value(), "agent1");
  // Valid from 5 minutes ago for 48 hours from now.
  const auto now = std::chrono::system_clock::now();
  const auto not_after = CertificateNotAfter(server->cert_pem).value();
  EXPECT_LT(not_after - (now + hours(48)), std::chrono::minutes(1));
  EXPECT_GT(not_after - (now + hours(48)), -std::chrono::minutes(1));
  const time_t four_minutes_ago = std::chrono::system_clock::to_time_t(now - std::chrono::minutes(4));
  EXPECT_LT(X509_cmp_time(X509_get0_notBefore(cert.get()), const_cast<time_t*>(&four_minutes_ago)), 0);
}

TEST_F(TlsCerts, EachCertificateHasItsOwnSerialAndKey) {
  Result<PemPair> first = IssueCertificate(*ca_, ServerRequest());
  Result<PemPair> second = IssueCertificate(*ca_, ServerRequest());
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_NE(ASN1_INTEGER_cmp(X509_get0_serialNumber(Parse(first->cert_pem).get()),
                             X509_get0_serialNumber(Parse(second->cert_pem).get())),
            0);
  EXPECT_NE(first->key_pem, second->key_pem);
}

TEST_F(TlsCerts, AClientCertificateIsForClientAuthentication) {
  CertificateRequest request;
  request.common_name = "alice";
  request.use = CertificateRequest::Use::kClient;
  request.valid_for = hours(24);
  Result<PemPair> client = IssueCertificate(*ca_, request);
  ASSERT_TRUE(client.ok()) << client.status().message();
  Cert cert = Parse(client->cert_pem);
  EXPECT_EQ(X509_get_extended_key_usage(cert.get()), static_cast<uint32_t>(XKU_SSL_CLIENT));
  EXPECT_EQ(Verify(client->cert_pem, ca_->cert_pem, X509_PURPOSE_SSL_CLIENT), X509_V_OK);
  EXPECT_EQ(Verify(client->cert_pem, ca_->cert_pem, X509_PURPOSE_SSL_SERVER), X509_V_ERR_INVALID_PURPOSE);
  EXPECT_TRUE(AltNames(client->cert_pem).empty());
  EXPECT_EQ(CertificateCommonName(client->cert_pem).value(), "alice");

  request.use = CertificateRequest::Use::kServerAndClient;
  Result<PemPair> both = IssueCertificate(*ca_, request);
  ASSERT_TRUE(both.ok()) << both.status().message();
  EXPECT_EQ(X509_get_extended_key_usage(Parse(both->cert_pem).get()),
            static_cast<uint32_t>(XKU_SSL_SERVER | XKU_SSL_CLIENT));
}

TEST_F(TlsCerts, ACertificateOfAnotherAuthorityDoesNotVerify) {
  Result<PemPair> other_ca = MakeCertificateAuthority("other CA", hours(24));
  ASSERT_TRUE(other_ca.ok()) << other_ca.status().message();
  Result<PemPair> server = IssueCertificate(*other_ca, ServerRequest());
  ASSERT_TRUE(server.ok()) << server.status().message();
  EXPECT_EQ(Verify(server->cert_pem, ca_->cert_pem, X509_PURPOSE_SSL_SERVER, "localhost"),
            X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
}

TEST_F(TlsCerts, ASelfSignedCertificateIsItsOwnTrustAnchor) {
  Result<PemPair> self = MakeSelfSigned(ServerRequest());
  ASSERT_TRUE(self.ok()) << self.status().message();
  Cert cert = Parse(self->cert_pem);
  EXPECT_EQ(X509_NAME_cmp(X509_get_issuer_name(cert.get()), X509_get_subject_name(cert.get())), 0);
  EXPECT_EQ(X509_check_ca(cert.get()), 0);
  EXPECT_EQ(Verify(self->cert_pem, self->cert_pem, X509_PURPOSE_SSL_SERVER, "agent1.example.com"), X509_V_OK);
  EXPECT_EQ(Verify(self->cert_pem, ca_->cert_pem, X509_PURPOSE_SSL_SERVER), X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT);
}

TEST_F(TlsCerts, TheFingerprintIsTheOneOpensslPrints) {
  TempTree dir("tls_certs_test");
  dir.Write("server.crt", ca_->cert_pem);
  const std::string printed = Output("openssl x509 -noout -fingerprint -sha256 -in " + dir.root() + "/server.crt");
  ASSERT_NE(printed.find('='), std::string::npos) << printed;
  const std::string expected = printed.substr(printed.find('=') + 1, printed.find('\n') - printed.find('=') - 1);
  Result<std::string> fingerprint = CertificateFingerprint(ca_->cert_pem);
  ASSERT_TRUE(fingerprint.ok()) << fingerprint.status().message();
  EXPECT_EQ(*fingerprint, expected);
  EXPECT_EQ(fingerprint->size(), 32u * 3 - 1);
}

TEST_F(TlsCerts, TextThatHoldsNoCertificateIsRefused) {
  for (const std::string& text : {std::string(""), std::string("hello\n"), ca_->key_pem}) {
    Result<std::string> fingerprint = CertificateFingerprint(text);
    ASSERT_FALSE(fingerprint.ok());
    EXPECT_EQ(fingerprint.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(fingerprint.status().message().find("not a PEM certificate"), std::string::npos)
        << fingerprint.status().message();
    EXPECT_FALSE(CertificateCommonName(text).ok());
    EXPECT_FALSE(CertificateNotAfter(text).ok());
  }
}

TEST_F(TlsCerts, WritePemPairKeepsTheKeyToItsOwner) {
  TempTree dir("tls_certs_test");
  const std::string cert_path = dir.root() + "/agent1.crt", key_path = dir.root() + "/agent1.key";
  ASSERT_TRUE(WritePemPair(*ca_, cert_path, key_path).ok());
  struct stat cert_stat {}, key_stat {};
  ASSERT_EQ(stat(cert_path.c_str(), &cert_stat), 0);
  ASSERT_EQ(stat(key_path.c_str(), &key_stat), 0);
  EXPECT_EQ(cert_stat.st_mode & 07777, 0644u);
  EXPECT_EQ(key_stat.st_mode & 07777, 0600u);
  EXPECT_EQ(Output("cat " + cert_path), ca_->cert_pem);
  EXPECT_EQ(Output("cat " + key_path), ca_->key_pem);

  const Status status = WritePemPair(*ca_, dir.root() + "/no/such/dir/a.crt", dir.root() + "/no/such/dir/a.key");
  EXPECT_EQ(status.code(), Status::Code::kUnavailable);
  EXPECT_NE(status.message().find("no/such/dir/a.key"), std::string::npos) << status.message();
}

TEST_F(TlsCerts, ABadIpAddressIsRefusedByName) {
  CertificateRequest request = ServerRequest();
  request.ip_addresses = {"127.0.0.1", "127.0.0.300"};
  Result<PemPair> server = IssueCertificate(*ca_, request);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(server.status().message().find("\"127.0.0.300\" is not an IP address"), std::string::npos)
      << server.status().message();
  request.ip_addresses = {"fe80::1::2"};
  EXPECT_NE(MakeSelfSigned(request).status().message().find("\"fe80::1::2\""), std::string::npos);
}

TEST_F(TlsCerts, BadNamesAndValiditiesAreRefused) {
  EXPECT_TRUE(CheckCertificateRequest(ServerRequest()).ok());
  CertificateRequest request = ServerRequest();
  request.ip_addresses = {"localhost"};
  EXPECT_NE(CheckCertificateRequest(request).message().find("\"localhost\" is not an IP address"), std::string::npos);
  request = ServerRequest();
  request.dns_names = {"agent 1"};
  EXPECT_EQ(IssueCertificate(*ca_, request).status().code(), Status::Code::kInvalidArgument);
  request.dns_names = {""};
  EXPECT_EQ(IssueCertificate(*ca_, request).status().code(), Status::Code::kInvalidArgument);
  request = ServerRequest();
  request.common_name = std::string(65, 'a');
  Result<PemPair> long_name = IssueCertificate(*ca_, request);
  EXPECT_EQ(long_name.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(long_name.status().message().find("1 to 64 characters"), std::string::npos) << long_name.status().message();
  request.common_name = "";
  EXPECT_EQ(IssueCertificate(*ca_, request).status().code(), Status::Code::kInvalidArgument);
  request = ServerRequest();
  request.valid_for = hours(0);
  EXPECT_EQ(IssueCertificate(*ca_, request).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(MakeCertificateAuthority("CA", hours(24 * 365 * 101)).status().code(), Status::Code::kInvalidArgument);
}

TEST_F(TlsCerts, OnlyACertificateAuthorityWithItsOwnKeyIssues) {
  Result<PemPair> other_ca = MakeCertificateAuthority("other CA", hours(24));
  ASSERT_TRUE(other_ca.ok());
  Result<PemPair> mixed = IssueCertificate({ca_->cert_pem, other_ca->key_pem}, ServerRequest());
  EXPECT_EQ(mixed.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(mixed.status().message().find("does not belong"), std::string::npos) << mixed.status().message();

  Result<PemPair> leaf = IssueCertificate(*ca_, ServerRequest());
  ASSERT_TRUE(leaf.ok());
  Result<PemPair> from_leaf = IssueCertificate(*leaf, ServerRequest());
  EXPECT_EQ(from_leaf.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(from_leaf.status().message().find("no certificate authority"), std::string::npos)
      << from_leaf.status().message();

  Result<PemPair> no_key = IssueCertificate({ca_->cert_pem, "not a key"}, ServerRequest());
  EXPECT_EQ(no_key.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(no_key.status().message().find("the CA's key"), std::string::npos) << no_key.status().message();
}

}  // namespace
}  // namespace slotd
