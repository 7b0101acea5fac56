// EtcdClient and `slotctl cluster` against a real etcd that serves https and
// asks every client for a certificate (--client-cert-auth): with the CA and
// a client certificate they work; without a certificate, or trusting
// another CA, they fail saying which. No agent and no engine: these tests
// take no engine (tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include "fleet/agent_document.h"
#include "fleet/etcd_client.h"
#include "integration/etcd.h"
#include "integration/harness.h"
#include "testing/tls_fixtures.h"

namespace slotd::testing {
namespace {

// A client of `etcd` with `tls`.
EtcdClient Client(const TestEtcd& etcd, const TlsClientOptions& tls) {
  EtcdOptions options;
  options.endpoints = {etcd.url()};
  options.tls = tls;
  return EtcdClient(options);
}

TEST(EtcdTls, AClientCertificateSignedByEtcdsCaPutsAndGets) {
  TestCertificates certs;
  TestEtcd etcd(certs);
  ASSERT_TRUE(etcd.started()) << etcd.log();
  ASSERT_EQ(etcd.url().rfind("https://127.0.0.1:", 0), 0u) << etcd.url();
  const EtcdClient client = Client(etcd, etcd.client_tls());
  auto lease = client.GrantLease(std::chrono::seconds(10));
  ASSERT_TRUE(lease.ok()) << lease.status().message();
  AgentDocument doc;
  doc.id = "a";
  doc.node = "node-1";
  doc.address = "127.0.0.1:6001";
  doc.scheme = "https";
  auto created = client.CreateIfAbsent(AgentKey("/tls-test", "a"), doc.ToJson().dump(), *lease);
  ASSERT_TRUE(created.ok()) << created.status().message();
  EXPECT_TRUE(created->created);
  auto listing = client.GetPrefix(AgentsPrefix("/tls-test"));
  ASSERT_TRUE(listing.ok()) << listing.status().message();
  ASSERT_EQ(listing->kvs.size(), 1u);
  EXPECT_EQ(AgentDocument::FromJson(listing->kvs[0].value).value(), doc);

  // The table shows the agent's API as the https URL it is.
  CommandResult listed = Slotctl({"cluster", "--etcd", etcd.url(), "--namespace", "/tls-test", "--etcd-cacert",
                                  certs.Cert("ca"), "--etcd-cert", certs.Cert("client"), "--etcd-key",
                                  certs.Key("client")});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(listed.out.find("https://127.0.0.1:6001"), std::string::npos) << listed.out;
}

TEST(EtcdTls, WithoutAClientCertificateTheCallFailsSayingOneIsWanted) {
  TestCertificates certs;
  TestEtcd etcd(certs);
  ASSERT_TRUE(etcd.started()) << etcd.log();
  TlsClientOptions tls = etcd.client_tls();
  tls.cert_file.clear();
  tls.key_file.clear();
  tls.cert_setting = "[etcd] cert-file and key-file";
  auto listing = Client(etcd, tls).GetPrefix("/tls-test/");
  ASSERT_FALSE(listing.ok());
  EXPECT_EQ(listing.status().code(), Status::Code::kUnavailable);
  EXPECT_NE(listing.status().message().find("the server asked for a client certificate and none was given (give one "
                                            "with [etcd] cert-file and key-file)"),
            std::string::npos)
      << listing.status().message();

  CommandResult refused = Slotctl({"cluster", "--etcd", etcd.url(), "--etcd-cacert", certs.Cert("ca")});
  EXPECT_EQ(refused.exit_code, 3) << refused.err;
  EXPECT_NE(refused.err.find("asked for a client certificate and none was given (give one with --etcd-cert and "
                             "--etcd-key"),
            std::string::npos)
      << refused.err;
}

TEST(EtcdTls, TrustingAnotherCaTheCallFailsSayingEtcdsIsUnknown) {
  TestCertificates certs;
  ASSERT_TRUE(certs.MakeCa("other")) << certs.error();
  TestEtcd etcd(certs);
  ASSERT_TRUE(etcd.started()) << etcd.log();
  TlsClientOptions tls = etcd.client_tls();
  tls.ca_file = certs.Cert("other");
  auto listing = Client(etcd, tls).GetPrefix("/tls-test/");
  ASSERT_FALSE(listing.ok());
  EXPECT_EQ(listing.status().code(), Status::Code::kUnavailable);
  EXPECT_NE(listing.status().message().find("etcd cannot be reached at " + etcd.url()), std::string::npos)
      << listing.status().message();
  EXPECT_NE(listing.status().message().find("the server's certificate is signed by a CA not in " +
                                            certs.Cert("other") + " (unknown CA)"),
            std::string::npos)
      << listing.status().message();
}

}  // namespace
}  // namespace slotd::testing
