// The API's TLS listener and roles, driven from outside with the tools an
// operator would use (curl, openssl s_client) against a real slotd: a
// self-signed agent pinned by fingerprint; mutual TLS with Nomad's four
// cases (wrong host name, unknown CA, no client certificate, a valid one)
// before and after a certificate is replaced; roles by certificate; the
// handshake's rules (versions, ciphers, renegotiation, ALPN), also as
// sslscan finds them; clients that never finish a handshake or send no TLS
// at all; the audit trail.
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/tls_certs.h"
#include "harness.h"

namespace slotd::testing {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

// A CA of the test's own, and files of certificates it issues, in `dir`.
class TestPki {
 public:
  explicit TestPki(std::string dir, const std::string& name = "test CA") : dir_(std::move(dir)) {
    Result<PemPair> ca = MakeCertificateAuthority(name, std::chrono::hours(24));
    EXPECT_TRUE(ca.ok()) << ca.status().message();
    if (ca.ok()) ca_ = *ca;
    WriteFile(CaFile(), ca_.cert_pem);
  }
  std::string CaFile() const { return dir_ + "/" + Slug() + "-ca.crt"; }
  // Issues `name`.crt/.key for `use`, naming the DNS `hosts` and IPs `ips`.
  void Issue(const std::string& name, CertificateRequest::Use use, std::vector<std::string> hosts = {},
             std::vector<std::string> ips = {}) const {
    CertificateRequest request;
    request.common_name = name;
    request.dns_names = std::move(hosts);
    request.ip_addresses = std::move(ips);
    request.use = use;
    request.valid_for = std::chrono::hours(24);
    Result<PemPair> pair = IssueCertificate(ca_, request);
    ASSERT_TRUE(pair.ok()) << pair.status().message();
    ASSERT_TRUE(WritePemPair(*pair, Cert(name), Key(name)).ok());
  }
  std::string Cert(const std::string& name) const { return dir_ + "/" + name + ".crt"; }
  std::string Key(const std::string& name) const { return dir_ + "/" + name + ".key"; }

 private:
  std::string Slug() const { return std::to_string(reinterpret_cast<uintptr_t>(this)); }
  std::string dir_;
  PemPair ca_;
};

// What curl makes of one request: its HTTP status (0 when there was none)
// and what it said on stderr.
struct CurlResult {
  int status = 0;
  std::string body;
  std::string error;
};

// Runs curl for `url` with `args` (certificates, --resolve, -X ...).
CurlResult Curl(const std::string& url, std::vector<std::string> args) {
  std::vector<std::string> argv = {"curl", "-sS", "--max-time", "10", "-o", "-", "-w", "\n%{http_code}"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back(url);
  const CommandResult run = RunCommand(argv);
  CurlResult result;
  result.error = run.err;
  const size_t last = run.out.rfind('\n');
  if (last != std::string::npos) {
    result.body = run.out.substr(0, last);
    result.status = std::atoi(run.out.c_str() + last + 1);
  }
  return result;
}

// Runs `openssl s_client` against 127.0.0.1:`port` with `args`, stdin
// `input`; returns what it printed (both streams) and whether it exited 0.
CommandResult SClient(int port, const std::vector<std::string>& args, const std::string& input = "Q\n") {
  std::string command = "printf '" + input + "' | timeout 10 openssl s_client -connect 127.0.0.1:" +
                        std::to_string(port);
  for (const std::string& arg : args) command += " '" + arg + "'";
  return RunCommand({"sh", "-c", command + " 2>&1"});
}

std::string Base(const AgentProcess& agent) { return "https://127.0.0.1:" + std::to_string(agent.port()); }

TEST(Tls, ASelfSignedAgentKeepsItsCertificateAndClientsPinItsFingerprint) {
  AgentOptions options = TwoCoreAgent("tls-self");
  options.agent_toml = "tls-self-signed = true\n";
  AgentProcess agent(options);
  ASSERT_TRUE(agent.Start()) << agent.log();
  const json described = agent.CallJson("GET", "/v1/agent", nullptr, 200);
  EXPECT_EQ(described["api_scheme"], "https");
  const std::string fingerprint = described["tls"]["fingerprint_sha256"];
  ASSERT_EQ(fingerprint.size(), 95u) << described.dump();
  EXPECT_THAT(agent.log(), HasSubstr("SHA-256 fingerprint " + fingerprint));
  struct stat key {};
  ASSERT_EQ(::stat((agent.dir() + "/var/tls/agent.key").c_str(), &key), 0);
  EXPECT_EQ(key.st_mode & 0777, 0600u);

  // Plain HTTP on the TLS port is no request; the token is still asked for over TLS.
  EXPECT_EQ(Curl("http://127.0.0.1:" + std::to_string(agent.port()) + "/health", {}).status, 0);
  EXPECT_EQ(Curl(Base(agent) + "/v1/kernels", {"-k"}).status, 401);
  EXPECT_EQ(Curl(Base(agent) + "/v1/kernels", {"-k", "-H", "Authorization: Bearer " + agent.GeneratedToken()}).status,
            200);

  // slotctl pins it by fingerprint, and refuses another.
  const std::vector<std::string> target = {"--agent", Base(agent), "--token-file", agent.dir() + "/var/api.token"};
  std::vector<std::string> pinned = target;
  pinned.insert(pinned.end(), {"--fingerprint", fingerprint, "kernels"});
  CommandResult listed = Slotctl(pinned);
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  std::string other = fingerprint;
  other[0] = other[0] == 'A' ? 'B' : 'A';
  std::vector<std::string> wrong = target;
  wrong.insert(wrong.end(), {"--fingerprint", other, "kernels"});
  CommandResult refused = Slotctl(wrong);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.err, HasSubstr("fingerprint"));

  // The same certificate after a restart.
  agent.Kill(SIGTERM);
  ASSERT_TRUE(agent.Start()) << agent.log();
  EXPECT_EQ(agent.CallJson("GET", "/v1/agent", nullptr, 200)["tls"]["fingerprint_sha256"], fingerprint);
}

// An agent with mutual TLS: a CA's certificate for 127.0.0.1 and
// agent.test (not localhost), and three clients of that CA (mgr-1 an
// operator, prom a viewer, stranger unlisted) and one of another CA.
class MutualTls : public ::testing::Test {
 protected:
  void SetUp() override {
    pki_.Issue("agent", CertificateRequest::Use::kServer, {"agent.test"}, {"127.0.0.1"});
    pki_.Issue("mgr-1", CertificateRequest::Use::kClient);
    pki_.Issue("prom", CertificateRequest::Use::kClient);
    pki_.Issue("stranger", CertificateRequest::Use::kClient);
    other_.Issue("mgr-1-elsewhere", CertificateRequest::Use::kClient);
    AgentOptions options = TwoCoreAgent("tls-mutual");
    options.agent_toml = "tls-cert-file = \"" + pki_.Cert("agent") + "\"\ntls-key-file = \"" + pki_.Key("agent") +
                         "\"\ntls-client-ca-file = \"" + pki_.CaFile() +
                         "\"\nclient-roles = { \"mgr-1\" = \"operator\", \"prom\" = \"viewer\" }\n";
    agent_ = std::make_unique<AgentProcess>(options);
    ASSERT_TRUE(agent_->Start()) << agent_->log();
  }

  // curl's arguments that show client certificate `name` (of `pki`) and
  // trust the agent's CA.
  std::vector<std::string> As(const std::string& name, const TestPki* pki = nullptr) const {
    if (pki == nullptr) pki = &pki_;
    return {"--cacert", pki_.CaFile(), "--cert", pki->Cert(name), "--key", pki->Key(name)};
  }

  // Nomad's four cases, then a viewer and a stranger.
  void CheckTheFourCases() {
    const std::string url = Base(*agent_) + "/v1/kernels";
    // A valid certificate, by IP and by the host name it names (resolved to loopback).
    const std::string port = std::to_string(agent_->port());
    CurlResult valid = Curl(url, As("mgr-1"));
    EXPECT_EQ(valid.status, 200) << valid.error;
    EXPECT_EQ(Curl("https://agent.test:" + port + "/v1/kernels",
                   [&] {
                     auto a = As("mgr-1");
                     a.insert(a.end(), {"--resolve", "agent.test:" + port + ":127.0.0.1"});
                     return a;
                   }())
                  .status,
              200);
    // A host name the agent's certificate does not name.
    CurlResult mismatch = Curl("https://localhost:" + port + "/v1/kernels", As("mgr-1"));
    EXPECT_EQ(mismatch.status, 0);
    EXPECT_THAT(mismatch.error, HasSubstr("localhost"));
    // The agent's CA unknown to the client.
    CurlResult unknown = Curl(url, {"--cacert", other_.CaFile(), "--cert", pki_.Cert("mgr-1"), "--key", pki_.Key("mgr-1")});
    EXPECT_EQ(unknown.status, 0);
    EXPECT_THAT(unknown.error, HasSubstr("certificate"));
    // No client certificate, and one of another CA: refused in the handshake.
    EXPECT_EQ(Curl(url, {"--cacert", pki_.CaFile()}).status, 0);
    EXPECT_EQ(Curl(url, {"--cacert", pki_.CaFile(), "--cert", other_.Cert("mgr-1-elsewhere"), "--key",
                         other_.Key("mgr-1-elsewhere")})
                  .status,
              0);
    // Roles: a viewer reads and may not create, exec or read logs; a stranger is known to no role.
    EXPECT_EQ(Curl(url, As("prom")).status, 200);
    CurlResult create = Curl(url, [&] {
      auto a = As("prom");
      a.insert(a.end(), {"-X", "POST", "-H", "Content-Type: application/json", "-d", SleepKernel("tls-k").dump()});
      return a;
    }());
    EXPECT_EQ(create.status, 403);
    EXPECT_THAT(json::parse(create.body, nullptr, false).dump(),
                HasSubstr("\\\"prom\\\" with role viewer, and POST /v1/kernels needs role operator"));
    EXPECT_EQ(Curl(url + "/x/logs", As("prom")).status, 403);
    CurlResult stranger = Curl(url, As("stranger"));
    EXPECT_EQ(stranger.status, 403);
    EXPECT_THAT(stranger.body, HasSubstr("client-roles gives no role"));
    CheckSlotctl();
  }

  // The same cases for slotctl: each failure names what is wrong.
  void CheckSlotctl() {
    const std::string port = std::to_string(agent_->port());
    auto slotctl = [&](const std::string& host, std::vector<std::string> tls, std::vector<std::string> command) {
      std::vector<std::string> args = {"--agent", "https://" + host + ":" + port};
      args.insert(args.end(), tls.begin(), tls.end());
      args.insert(args.end(), command.begin(), command.end());
      return Slotctl(args);
    };
    const std::vector<std::string> mgr = {"--cacert", pki_.CaFile(), "--cert", pki_.Cert("mgr-1"), "--key",
                                          pki_.Key("mgr-1")};
    const CommandResult valid = slotctl("127.0.0.1", mgr, {"kernels"});
    EXPECT_EQ(valid.exit_code, 0) << valid.err;
    const CommandResult mismatch = slotctl("localhost", mgr, {"kernels"});
    EXPECT_NE(mismatch.exit_code, 0);
    EXPECT_THAT(mismatch.err, HasSubstr("localhost")) << mismatch.err;
    EXPECT_THAT(mismatch.err, HasSubstr("name mismatch")) << mismatch.err;
    const CommandResult unknown = slotctl(
        "127.0.0.1", {"--cacert", other_.CaFile(), "--cert", pki_.Cert("mgr-1"), "--key", pki_.Key("mgr-1")},
        {"kernels"});
    EXPECT_NE(unknown.exit_code, 0);
    EXPECT_THAT(unknown.err, HasSubstr("unknown CA")) << unknown.err;
    const CommandResult bare = slotctl("127.0.0.1", {"--cacert", pki_.CaFile()}, {"kernels"});
    EXPECT_NE(bare.exit_code, 0);
    EXPECT_THAT(bare.err, HasSubstr("client certificate")) << bare.err;
    const CommandResult viewer = slotctl(
        "127.0.0.1", {"--cacert", pki_.CaFile(), "--cert", pki_.Cert("prom"), "--key", pki_.Key("prom")},
        {"drain"});
    EXPECT_EQ(viewer.exit_code, 7) << viewer.err;  // refused: 401 or 403
    EXPECT_THAT(viewer.err, HasSubstr("needs role admin")) << viewer.err;
  }

  TempDir dir_;
  TestPki pki_{dir_.path()};
  TestPki other_{dir_.path(), "another CA"};
  std::unique_ptr<AgentProcess> agent_;
};

TEST_F(MutualTls, NomadsFourCasesBeforeAndAfterTheCertificateIsReplaced) {
  CheckTheFourCases();
  const std::string before = agent_->CallJson("GET", "/v1/agent", nullptr, 200)["tls"]["fingerprint_sha256"];
  EXPECT_TRUE(agent_->CallJson("GET", "/v1/agent", nullptr, 200)["tls"]["client_certificates"]);

  // A kept-alive connection opened before the replacement goes on after it.
  std::thread long_request([&] {
    CurlResult events = Curl(Base(*agent_) + "/v1/events", [&] {
      auto a = As("mgr-1");
      a.insert(a.end(), {"--max-time", "5", "-N"});
      return a;
    }());
    EXPECT_THAT(events.error, HasSubstr("timed out")) << "the stream ended early: " << events.error;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));

  // A new pair, written in place: picked up within seconds, without a signal.
  pki_.Issue("agent", CertificateRequest::Use::kServer, {"agent.test"}, {"127.0.0.1"});
  std::string after = before;
  for (int i = 0; i < 100 && after == before; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    after = agent_->CallJson("GET", "/v1/agent", nullptr, 200)["tls"]["fingerprint_sha256"];
  }
  EXPECT_NE(after, before) << agent_->log();
  CheckTheFourCases();
  long_request.join();

  // A pair that does not load is refused and the one before stays.
  WriteFile(pki_.Cert("agent"), "not a certificate\n");
  ::kill(agent_->pid(), SIGHUP);
  for (int i = 0; i < 50 && agent_->log().find("SIGHUP: TLS:") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_THAT(agent_->log(), HasSubstr("the certificate served before stays in use"));
  EXPECT_EQ(agent_->CallJson("GET", "/v1/agent", nullptr, 200)["tls"]["fingerprint_sha256"], after);
  EXPECT_EQ(Curl(Base(*agent_) + "/v1/kernels", As("mgr-1")).status, 200);
}

TEST_F(MutualTls, TheAuditTrailNamesWhoChangedWhatAndWhoWasRefused) {
  const std::string url = Base(*agent_) + "/v1/kernels";
  auto post = [&](const std::string& who, const json& body) {
    auto a = As(who);
    a.insert(a.end(), {"-X", "POST", "-H", "Content-Type: application/json", "-d", body.dump()});
    return Curl(url, a);
  };
  EXPECT_EQ(post("mgr-1", SleepKernel("audit-k1")).status, 201);
  EXPECT_EQ(post("prom", SleepKernel("audit-k2")).status, 403);
  EXPECT_EQ(Curl(url + "/audit-k1", [&] {
              auto a = As("mgr-1");
              a.insert(a.end(), {"-X", "DELETE"});
              return a;
            }()).status,
            200);
  EXPECT_EQ(Curl(url, {"-k", "-H", "Authorization: Bearer not-the-token-at-all"}).status, 0)
      << "no client certificate: refused in the handshake";

  std::vector<json> lines;
  std::ifstream audit(agent_->dir() + "/var/audit.log");
  for (std::string line; std::getline(audit, line);) lines.push_back(json::parse(line));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["caller"], "mgr-1");
  EXPECT_EQ(lines[0]["role"], "operator");
  EXPECT_EQ(lines[0]["via"], "certificate");
  EXPECT_EQ(lines[0]["method"], "POST");
  EXPECT_EQ(lines[0]["route"], "/v1/kernels");
  EXPECT_EQ(lines[0]["kernel_id"], "audit-k1");
  EXPECT_EQ(lines[0]["status"], 201);
  EXPECT_EQ(lines[0]["outcome"], "done");
  EXPECT_EQ(lines[1]["caller"], "prom");
  EXPECT_EQ(lines[1]["status"], 403);
  EXPECT_EQ(lines[1]["outcome"], "refused");
  EXPECT_TRUE(lines[1]["kernel_id"].is_null()) << "a refused request's body is never read";
  EXPECT_EQ(lines[2]["route"], "/v1/kernels/{id}");
  EXPECT_EQ(lines[2]["kernel_id"], "audit-k1");
  struct stat st {};
  ASSERT_EQ(::stat((agent_->dir() + "/var/audit.log").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(MutualTls, TheHandshakeRefusesOldVersionsWeakCiphersRenegotiationAndOtherProtocols) {
  const int port = agent_->port();
  const std::vector<std::string> client = {"-CAfile", pki_.CaFile(), "-cert", pki_.Cert("mgr-1"), "-key",
                                           pki_.Key("mgr-1")};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), client.begin(), client.end());
    return more;
  };
  const CommandResult modern = SClient(port, with({"-tls1_2", "-alpn", "http/1.1"}));
  EXPECT_THAT(modern.out, HasSubstr("ALPN protocol: http/1.1"));
  EXPECT_THAT(modern.out, HasSubstr("Cipher is ECDHE-ECDSA-AES256-GCM-SHA384"));
  EXPECT_THAT(modern.out, HasSubstr("Verify return code: 0 (ok)"));
  EXPECT_THAT(SClient(port, with({"-tls1_3"})).out, HasSubstr("TLSv1.3"));
  for (const char* old : {"-tls1", "-tls1_1"}) {
    const CommandResult refused = SClient(port, with({old, "-cipher", "DEFAULT@SECLEVEL=0"}));
    EXPECT_THAT(refused.out, HasSubstr("alert protocol version")) << old << refused.out;
    EXPECT_THAT(refused.out, HasSubstr("Cipher is (NONE)")) << old;
  }
  for (const char* weak : {"ECDHE-ECDSA-AES128-SHA", "AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-SHA384"}) {
    const CommandResult refused = SClient(port, with({"-tls1_2", "-cipher", weak}));
    EXPECT_THAT(refused.out, HasSubstr("alert handshake failure")) << weak << refused.out;
    EXPECT_THAT(refused.out, HasSubstr("Cipher is (NONE)")) << weak;
  }
  EXPECT_THAT(SClient(port, with({"-alpn", "h2"})).out, HasSubstr("alert no application protocol"));
  // A client asking to renegotiate is refused, and the agent goes on.
  const CommandResult renegotiate = SClient(port, with({"-tls1_2"}), "R\\n");
  EXPECT_THAT(renegotiate.out, HasSubstr("RENEGOTIATING"));
  EXPECT_THAT(renegotiate.out, HasSubstr("no renegotiation"));
  EXPECT_EQ(Curl(Base(*agent_) + "/v1/kernels", As("mgr-1")).status, 200);
}

// The attributes of each `<element ...>` line of sslscan's XML report, by
// element name in the report's order: {"protocol", {{"version","1.2"},...}}.
std::vector<std::pair<std::string, std::map<std::string, std::string>>> SslscanElements(const std::string& xml) {
  std::vector<std::pair<std::string, std::map<std::string, std::string>>> elements;
  static const std::regex element(R"(<([a-z]+)((?:\s+[a-z]+="[^"]*")+)\s*/?>)");
  static const std::regex attribute(R"re(([a-z]+)="([^"]*)")re");
  for (std::sregex_iterator it(xml.begin(), xml.end(), element), end; it != end; ++it) {
    std::map<std::string, std::string> attributes;
    const std::string text = (*it)[2];
    for (std::sregex_iterator a(text.begin(), text.end(), attribute); a != end; ++a) attributes[(*a)[1]] = (*a)[2];
    elements.emplace_back((*it)[1], std::move(attributes));
  }
  return elements;
}

// What a third-party scanner (sslscan, as an auditor would run it) finds:
// TLS 1.2 and 1.3 only, every accepted cipher forward-secret AEAD, no
// renegotiation, no compression where sslscan can tell, no Heartbleed.
TEST_F(MutualTls, SslscanFindsOnlyTls12And13WithForwardSecretAeadCiphers) {
  const CommandResult scan =
      RunCommand({"sslscan", "--no-colour", "--xml=-", "--timeout=5", "--certs=" + pki_.Cert("mgr-1"),
                  "--pk=" + pki_.Key("mgr-1"), "127.0.0.1:" + std::to_string(agent_->port())});
  ASSERT_EQ(scan.exit_code, 0) << scan.err;
  std::set<std::string> enabled;
  std::set<std::string> seen;
  int ciphers = 0;
  for (const auto& element : SslscanElements(scan.out)) {
    const std::string& name = element.first;
    const std::map<std::string, std::string>& attributes = element.second;
    seen.insert(name);
    auto value = [&attributes](const std::string& key) {
      auto it = attributes.find(key);
      return it == attributes.end() ? std::string("(missing)") : it->second;
    };
    if (name == "protocol" && value("enabled") == "1") enabled.insert(value("type") + value("version"));
    if (name == "renegotiation") EXPECT_EQ(value("supported"), "0") << "renegotiation is offered";
    if (name == "compression") EXPECT_EQ(value("supported"), "0") << "TLS compression is offered";
    if (name == "heartbleed") EXPECT_EQ(value("vulnerable"), "0") << value("sslversion");
    if (name == "cipher") {
      ++ciphers;
      const std::string cipher = value("cipher");
      EXPECT_THAT(value("sslversion"), ::testing::AnyOf("TLSv1.2", "TLSv1.3")) << cipher;
      // sslscan 2.0.7 calls TLS 1.3's suites "acceptable", never "strong".
      EXPECT_THAT(value("strength"), ::testing::AnyOf("strong", "acceptable")) << cipher;
      const bool aead = cipher.find("GCM") != std::string::npos || cipher.find("CHACHA20") != std::string::npos;
      const bool forward_secret = value("sslversion") == "TLSv1.3" || cipher.rfind("ECDHE-", 0) == 0;
      EXPECT_TRUE(aead && forward_secret) << cipher << " is accepted";
    }
  }
  EXPECT_EQ(enabled, (std::set<std::string>{"tls1.2", "tls1.3"})) << scan.out;
  EXPECT_GE(ciphers, 4) << scan.out;
  // (Debian's sslscan, built on OpenSSL 3, has no compression probe.)
  for (const char* checked : {"renegotiation", "heartbleed"})
    EXPECT_TRUE(seen.count(checked)) << "sslscan's report has no " << checked << ":\n" << scan.out;
  EXPECT_EQ(Curl(Base(*agent_) + "/v1/kernels", As("mgr-1")).status, 200) << "the scan left the agent serving";
}

TEST_F(MutualTls, ClientsThatNeverFinishAHandshakeOrSpeakNoTlsDoNotStallTheAgent) {
  const int port = agent_->port();
  // 500 connections that open and say nothing, then one that sends garbage.
  std::vector<std::unique_ptr<RawClient>> idle;
  for (int i = 0; i < 500; ++i) idle.push_back(std::make_unique<RawClient>(port));
  RawClient garbage(port);
  ASSERT_TRUE(garbage.Send(std::string("\x16\x03\x01\xff\xff garbage that is no ClientHello\r\n\r\n", 40)));
  bool closed = false;
  garbage.Read(std::chrono::seconds(5), &closed);
  EXPECT_TRUE(closed) << "the agent kept a connection that sent no TLS";
  CurlResult health = Curl(Base(*agent_) + "/health", {"--cacert", pki_.CaFile(), "--cert", pki_.Cert("mgr-1"),
                                                       "--key", pki_.Key("mgr-1")});
  EXPECT_EQ(health.status, 200) << health.error;
  EXPECT_EQ(agent_->Call("GET", "/health").status, 200);
}

TEST(Tls, AnAddressOtherHostsReachNeedsTls) {
  TempDir dir;
  WriteFile(dir.path() + "/agent.toml", "[agent]\nid = \"tls-plain\"\nrpc-listen-addr = \"0.0.0.0:6001\"\n");
  const CommandResult refused = Slotd({"--config", dir.path() + "/agent.toml"});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_THAT(refused.err, HasSubstr("is reachable from other hosts"));
  EXPECT_THAT(refused.err, HasSubstr("tls-self-signed = true"));
}

}  // namespace
}  // namespace slotd::testing
