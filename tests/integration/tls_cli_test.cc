// `slotctl tls` through the real binary: a CA, an agent's and a client's
// certificates, the modes of their files, the agent.toml lines printed, and
// `openssl verify` of each certificate against the CA. No agent and no
// engine are involved (tests/CMakeLists.txt gives these tests no engine).
#include <sys/stat.h>

#include <gtest/gtest.h>

#include "integration/harness.h"

namespace slotd::testing {
namespace {

// slotctl's exit statuses for a failure and for a wrong command line (docs/cli.md).
constexpr int kTlsFailure = 1, kTlsUsage = 2;

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// Whether `openssl verify` accepts `cert` against the CA `ca_cert`, with its `checks` flags.
bool OpensslVerifies(const std::string& ca_cert, const std::string& cert, const std::vector<std::string>& checks) {
  std::vector<std::string> argv = {"openssl", "verify", "-CAfile", ca_cert};
  argv.insert(argv.end(), checks.begin(), checks.end());
  argv.push_back(cert);
  const CommandResult result = RunCommand(argv);
  return result.exit_code == 0;
}

bool Has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(TlsCli, MakesCertificatesOpensslVerifies) {
  TempDir dir;
  const std::string ca_dir = dir.path() + "/ca", ca_cert = ca_dir + "/ca.crt";
  CommandResult r = Slotctl({"tls", "ca", "--dir", ca_dir, "--name", "test CA", "--days", "30"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ModeOf(ca_cert), 0644u);
  EXPECT_EQ(ModeOf(ca_dir + "/ca.key"), 0600u);

  const std::string agents = dir.path() + "/agents";
  r = Slotctl({"tls", "cert", "--ca-dir", ca_dir, "--agent", "agent1", "--host", "agent1.example.com", "--ip",
               "192.0.2.7", "--out-dir", agents});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string agent_cert = agents + "/agent1.crt";
  EXPECT_EQ(ModeOf(agent_cert), 0644u);
  EXPECT_EQ(ModeOf(agents + "/agent1.key"), 0600u);
  EXPECT_TRUE(Has(r.out, "tls-cert-file = \"" + agent_cert + "\"\n")) << r.out;
  EXPECT_TRUE(Has(r.out, "tls-key-file = \"" + agents + "/agent1.key\"\n")) << r.out;
  EXPECT_TRUE(Has(r.out, "tls-client-ca-file = \"" + ca_cert + "\"\n")) << r.out;
  EXPECT_TRUE(
      OpensslVerifies(ca_cert, agent_cert, {"-purpose", "sslserver", "-verify_hostname", "agent1.example.com"}));
  EXPECT_TRUE(OpensslVerifies(ca_cert, agent_cert, {"-purpose", "sslserver", "-verify_ip", "192.0.2.7"}));
  EXPECT_FALSE(OpensslVerifies(ca_cert, agent_cert, {"-verify_hostname", "agent2.example.com"}));
  EXPECT_FALSE(OpensslVerifies(ca_cert, agent_cert, {"-purpose", "sslclient"}));

  r = Slotctl({"tls", "cert", "--ca-dir", ca_dir, "--client", "alice", "--role", "operator"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string client_cert = ca_dir + "/alice.crt", client_key = ca_dir + "/alice.key";
  EXPECT_EQ(ModeOf(client_key), 0600u);
  EXPECT_TRUE(Has(r.out, "client-roles = { \"alice\" = \"operator\" }\n")) << r.out;
  EXPECT_TRUE(Has(r.out, "--cacert " + ca_cert + " --cert " + client_cert + " --key " + client_key)) << r.out;
  EXPECT_TRUE(OpensslVerifies(ca_cert, client_cert, {"-purpose", "sslclient"}));
  EXPECT_FALSE(OpensslVerifies(ca_cert, client_cert, {"-purpose", "sslserver"}));

  r = Slotctl({"tls", "fingerprint", agent_cert});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const CommandResult openssl = RunCommand({"openssl", "x509", "-noout", "-fingerprint", "-sha256", "-in", agent_cert});
  ASSERT_TRUE(Has(openssl.out, "=")) << openssl.out << openssl.err;
  EXPECT_EQ(r.out, openssl.out.substr(openssl.out.find('=') + 1));
}

TEST(TlsCli, RefusesWhatItMustNot) {
  TempDir dir;
  const std::string ca_dir = dir.path() + "/ca";
  ASSERT_EQ(Slotctl({"tls", "ca", "--dir", ca_dir}).exit_code, 0);
  const std::string key = ReadFile(ca_dir + "/ca.key");

  CommandResult r = Slotctl({"tls", "ca", "--dir", ca_dir});
  EXPECT_EQ(r.exit_code, kTlsFailure) << r.err;
  EXPECT_TRUE(Has(r.err, ca_dir + "/ca.key exists already")) << r.err;
  EXPECT_TRUE(Has(r.err, "choose another --dir")) << r.err;
  EXPECT_EQ(ReadFile(ca_dir + "/ca.key"), key);

  r = Slotctl({"tls", "cert", "--ca-dir", ca_dir, "--client", "bob", "--role", "root"});
  EXPECT_EQ(r.exit_code, kTlsUsage) << r.err;
  EXPECT_TRUE(Has(r.err, "viewer,operator,admin")) << r.err;

  r = Slotctl({"tls", "cert", "--ca-dir", ca_dir});
  EXPECT_EQ(r.exit_code, kTlsUsage) << r.err;
  EXPECT_TRUE(Has(r.err, "--agent ID")) << r.err;

  r = Slotctl({"tls", "cert", "--ca-dir", ca_dir, "--agent", "agent1", "--ip", "127.0.0.300"});
  EXPECT_EQ(r.exit_code, kTlsUsage) << r.err;
  EXPECT_TRUE(Has(r.err, "\"127.0.0.300\" is not an IP address")) << r.err;

  r = Slotctl({"tls", "cert", "--ca-dir", ca_dir, "--agent", "ca"});
  EXPECT_EQ(r.exit_code, kTlsUsage) << r.err;
  EXPECT_EQ(ReadFile(ca_dir + "/ca.key"), key);

  r = Slotctl({"tls", "cert", "--ca-dir", dir.path() + "/none", "--agent", "agent1"});
  EXPECT_EQ(r.exit_code, kTlsFailure) << r.err;
  EXPECT_TRUE(Has(r.err, "slotctl tls ca --dir")) << r.err;

  r = Slotctl({"tls", "fingerprint", ca_dir + "/ca.key"});
  EXPECT_EQ(r.exit_code, kTlsFailure) << r.err;
  EXPECT_TRUE(Has(r.err, "not a PEM certificate")) << r.err;
}

}  // namespace
}  // namespace slotd::testing
