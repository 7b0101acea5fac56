// slotctl's TLS flags and their environment variables against `openssl
// s_server`, which asks for a client certificate: each failure says what to
// change and exits as docs/cli.md says; with the CA and a client certificate
// the handshake passes (and the server's HTML page is no answer slotctl
// reads). No agent and no engine: these tests take no engine
// (tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include "integration/harness.h"
#include "testing/tls_fixtures.h"

namespace slotd::testing {
namespace {

// slotctl with `environment` ("NAME=value") and `args`.
CommandResult SlotctlWith(const std::vector<std::string>& environment, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"env"};
  argv.insert(argv.end(), environment.begin(), environment.end());
  argv.push_back(std::string(SLOTD_BIN_DIR) + "/slotctl");
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv);
}

TEST(SlotctlTls, EachFailureSaysWhatToChangeAndTheRightFilesPassTheHandshake) {
  TestCertificates certs;
  ASSERT_TRUE(certs.MakeCa("other")) << certs.error();
  OpensslServer server({"-cert", certs.Cert("server"), "-key", certs.Key("server"), "-Verify", "1", "-CAfile",
                        certs.Cert("ca"), "-verify_return_error"});
  ASSERT_TRUE(server.started());

  CommandResult unknown = Slotctl({"--agent", server.url(), "--cacert", certs.Cert("other"), "info"});
  EXPECT_EQ(unknown.exit_code, 3) << unknown.err;
  EXPECT_NE(unknown.err.find("(unknown CA): give the CA that signed it with --cacert"), std::string::npos)
      << unknown.err;
  EXPECT_EQ(unknown.err.find("is slotd running there"), std::string::npos) << unknown.err;

  CommandResult no_cert = SlotctlWith({"SLOTCTL_CACERT=" + certs.Cert("ca")}, {"--agent", server.url(), "info"});
  EXPECT_EQ(no_cert.exit_code, 3) << no_cert.err;
  EXPECT_NE(no_cert.err.find("the server asked for a client certificate and none was given (give one with --cert and "
                             "--key)"),
            std::string::npos)
      << no_cert.err;

  CommandResult passed = SlotctlWith({"SLOTCTL_CACERT=" + certs.Cert("ca"), "SLOTCTL_CERT=" + certs.Cert("client"),
                                      "SLOTCTL_KEY=" + certs.Key("client")},
                                     {"--agent", server.url(), "info"});
  EXPECT_EQ(passed.exit_code, 9) << passed.err;  // through TLS, to an answer that is not the agent's
  EXPECT_NE(passed.err.find("with something slotctl cannot read"), std::string::npos) << passed.err;
}

TEST(SlotctlTls, FlagsThatDoNotGoTogetherOrFilesThatCannotBeReadAreRefusedFirst) {
  CommandResult bad = Slotctl({"--agent", "https://127.0.0.1:1", "--fingerprint", "AB:CD", "info"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("--fingerprint AB:CD: expected a SHA-256 fingerprint"), std::string::npos) << bad.err;

  TestCertificates certs;
  const std::string fingerprint = certs.Fingerprint("server");
  CommandResult both = Slotctl({"--agent", "https://127.0.0.1:1", "--fingerprint", fingerprint, "--cacert",
                                certs.Cert("ca"), "info"});
  EXPECT_EQ(both.exit_code, 2) << both.err;
  EXPECT_NE(both.err.find("--fingerprint and --cacert go apart"), std::string::npos) << both.err;

  CommandResult key_alone = Slotctl({"--agent", "https://127.0.0.1:1", "--key", certs.Key("client"), "info"});
  EXPECT_EQ(key_alone.exit_code, 2) << key_alone.err;
  EXPECT_NE(key_alone.err.find("--key needs --cert"), std::string::npos) << key_alone.err;

  CommandResult absent = Slotctl({"--agent", "https://127.0.0.1:1", "--cacert", certs.dir() + "/absent.crt", "info"});
  EXPECT_EQ(absent.exit_code, 1) << absent.err;
  EXPECT_NE(absent.err.find("--cacert " + certs.dir() + "/absent.crt: cannot read it: No such file or directory"),
            std::string::npos)
      << absent.err;
}

}  // namespace
}  // namespace slotd::testing
