// HttpClient over https, against `openssl s_server` with certificates the
// test makes: the CA given, an unknown CA, a certificate for another host,
// client certificates wanted, given and refused, a pinned fingerprint, each
// scheme against a server of the other; and an Upgrade over TLS, whose
// bridge carries bytes and half-closes both ways.
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "common/http_client.h"
#include "testing/tls_fixtures.h"

namespace slotd {
namespace {

using testing::OpensslServer;
using testing::TestCertificates;

// A client of `url` trusting `ca_file`.
HttpClient Client(const std::string& url, const std::string& ca_file) {
  HttpClient client = HttpClient::Tcp(url);
  TlsClientOptions tls;
  tls.ca_file = ca_file;
  client.SetTls(tls);
  return client;
}

// The message of a GET / that must fail with kUnavailable.
std::string Refusal(const HttpClient& client) {
  auto answer = client.Request("GET", "/", "", std::chrono::seconds(10));
  EXPECT_FALSE(answer.ok()) << "HTTP " << (answer.ok() ? answer->status : 0);
  if (answer.ok()) return "";
  EXPECT_EQ(answer.status().code(), Status::Code::kUnavailable) << answer.status().message();
  return answer.status().message();
}

// A loopback listener on a port of its own: the test's servers' socket.
int Listen(int* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof addr;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(::listen(fd, 4), 0);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &size);
  *port = ntohs(addr.sin_port);
  return fd;
}

// A plain server that answers whatever comes with an HTTP 400, as an HTTP
// server answers a TLS handshake.
class PlainServer {
 public:
  PlainServer() : listener_(Listen(&port_)) {
    thread_ = std::thread([this] {
      while (true) {
        const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) return;
        char buffer[4096];
        if (::read(fd, buffer, sizeof buffer) > 0) {
          const std::string answer = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
          (void)!::write(fd, answer.data(), answer.size());
        }
        ::close(fd);
      }
    });
  }
  ~PlainServer() {
    ::shutdown(listener_, SHUT_RDWR);
    thread_.join();
    ::close(listener_);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int port_ = 0;
  int listener_;
  std::thread thread_;
};

TEST(HttpsClient, AServerCertificateFromTheGivenCaIsAcceptedForRequestsAndStreams) {
  TestCertificates certs;
  OpensslServer server({"-cert", certs.Cert("server"), "-key", certs.Key("server")});
  ASSERT_TRUE(server.started());
  const HttpClient client = Client(server.url(), certs.Cert("ca"));
  auto answer = client.Request("GET", "/", "", std::chrono::seconds(10));
  ASSERT_TRUE(answer.ok()) << answer.status().message();
  EXPECT_EQ(answer->status, 200);
  EXPECT_NE(answer->body.find("TLSv1.3"), std::string::npos) << answer->body;

  std::string streamed;
  const std::atomic<bool> never{false};
  Status s = client.Stream("GET", "/", "", nullptr, [&](std::string_view chunk) { return streamed.append(chunk), true; },
                           never, /*end_is_ok=*/true);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_NE(streamed.find("TLSv1.3"), std::string::npos) << streamed;
}

TEST(HttpsClient, ACertificateFromAnotherCaIsRefusedAsAnUnknownCa) {
  TestCertificates certs;
  ASSERT_TRUE(certs.MakeCa("other")) << certs.error();
  OpensslServer server({"-cert", certs.Cert("server"), "-key", certs.Key("server")});
  ASSERT_TRUE(server.started());
  const std::string message = Refusal(Client(server.url(), certs.Cert("other")));
  EXPECT_NE(message.find("the server's certificate is signed by a CA not in " + certs.Cert("other") + " (unknown CA)"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find(server.url()), std::string::npos) << message;
}

TEST(HttpsClient, ACertificateThatDoesNotNameTheHostIsANameMismatch) {
  TestCertificates certs;
  ASSERT_TRUE(certs.Issue("elsewhere", "ca", "DNS:other.example")) << certs.error();
  OpensslServer server({"-cert", certs.Cert("elsewhere"), "-key", certs.Key("elsewhere")});
  ASSERT_TRUE(server.started());
  const std::string message = Refusal(Client(server.url(), certs.Cert("ca")));
  EXPECT_NE(message.find("the server's certificate does not name host 127.0.0.1 (name mismatch)"), std::string::npos)
      << message;
}

TEST(HttpsClient, AServerThatWantsAClientCertificateTakesTheGivenOneAndRefusalsSayWhy) {
  TestCertificates certs;
  ASSERT_TRUE(certs.MakeCa("other") && certs.Issue("stranger", "other", "DNS:stranger")) << certs.error();
  OpensslServer server({"-cert", certs.Cert("server"), "-key", certs.Key("server"), "-Verify", "1", "-CAfile",
                        certs.Cert("ca"), "-verify_return_error"});
  ASSERT_TRUE(server.started());

  TlsClientOptions tls;
  tls.ca_file = certs.Cert("ca");
  tls.cert_setting = "--cert and --key";
  HttpClient client = HttpClient::Tcp(server.url());
  client.SetTls(tls);
  std::string message = Refusal(client);
  EXPECT_NE(message.find("the server asked for a client certificate and none was given (give one with --cert and --key)"),
            std::string::npos)
      << message;

  tls.cert_file = certs.Cert("stranger");
  tls.key_file = certs.Key("stranger");
  client.SetTls(tls);
  message = Refusal(client);
  EXPECT_NE(message.find("the server refused the client certificate " + certs.Cert("stranger") + " (unknown ca)"),
            std::string::npos)
      << message;

  tls.cert_file = certs.Cert("client");
  tls.key_file = certs.Key("client");
  client.SetTls(tls);
  auto answer = client.Request("GET", "/", "", std::chrono::seconds(10));
  ASSERT_TRUE(answer.ok()) << answer.status().message() << "\n" << server.log();
  EXPECT_EQ(answer->status, 200);
}

TEST(HttpsClient, APinnedFingerprintStandsInForTheCaAndHostAndAnyOtherCertificateIsRefused) {
  TestCertificates certs;
  ASSERT_TRUE(certs.MakeCa("self")) << certs.error();  // self-signed, naming no host
  OpensslServer server({"-cert", certs.Cert("self"), "-key", certs.Key("self")});
  ASSERT_TRUE(server.started());
  const std::string fingerprint = certs.Fingerprint("self");
  ASSERT_EQ(fingerprint.size(), 95u) << fingerprint;

  TlsClientOptions tls;
  tls.fingerprint = fingerprint;
  HttpClient client = HttpClient::Tcp(server.url());
  client.SetTls(tls);
  auto answer = client.Request("GET", "/", "", std::chrono::seconds(10));
  ASSERT_TRUE(answer.ok()) << answer.status().message();
  EXPECT_EQ(answer->status, 200);

  // Colons and case are optional.
  std::string bare;
  for (char c : fingerprint)
    if (c != ':') bare += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  EXPECT_TRUE(IsSha256Fingerprint(bare));
  EXPECT_FALSE(IsSha256Fingerprint(bare.substr(2)));
  tls.fingerprint = bare;
  client.SetTls(tls);
  answer = client.Request("GET", "/", "", std::chrono::seconds(10));
  ASSERT_TRUE(answer.ok()) << answer.status().message();

  const std::string other = certs.Fingerprint("server");
  tls.fingerprint = other;
  client.SetTls(tls);
  const std::string message = Refusal(client);
  EXPECT_NE(message.find("the server's certificate fingerprint is " + fingerprint + ", not the pinned " + other),
            std::string::npos)
      << message;
}

// The message of an Upgrade that must fail with kUnavailable.
std::string UpgradeRefusal(const HttpClient& client) {
  auto upgraded = client.Upgrade("POST", "/exec", "{}", {}, std::chrono::seconds(10));
  EXPECT_FALSE(upgraded.ok());
  if (upgraded.ok()) {
    ::close(upgraded->fd);
    return "";
  }
  EXPECT_EQ(upgraded.status().code(), Status::Code::kUnavailable) << upgraded.status().message();
  return upgraded.status().message();
}

TEST(HttpsClient, EachSchemeAgainstAServerOfTheOtherSaysWhichToUse) {
  PlainServer plain;
  const HttpClient to_plain = HttpClient::Tcp("https://" + plain.address());
  for (const std::string& message : {Refusal(to_plain), UpgradeRefusal(to_plain)})
    EXPECT_NE(message.find("the server speaks plain HTTP: use http://"), std::string::npos) << message;

  TestCertificates certs;
  OpensslServer server({"-cert", certs.Cert("server"), "-key", certs.Key("server")});
  ASSERT_TRUE(server.started());
  const HttpClient to_tls = HttpClient::Tcp("http://127.0.0.1:" + std::to_string(server.port()));
  for (const std::string& message : {Refusal(to_tls), UpgradeRefusal(to_tls)})
    EXPECT_NE(message.find("the server speaks https: use https://"), std::string::npos) << message;
}

// A TLS server on 127.0.0.1 for one Upgrade: it answers the request's head
// with 101 and "early", then sends back what it gets in upper case until the
// client's close_notify, then "bye" and its own close_notify.
class TlsUpgradeServer {
 public:
  TlsUpgradeServer(const std::string& cert, const std::string& key)
      : ctx_(SSL_CTX_new(TLS_server_method())), listener_(Listen(&port_)) {
    EXPECT_EQ(SSL_CTX_use_certificate_chain_file(ctx_, cert.c_str()), 1);
    EXPECT_EQ(SSL_CTX_use_PrivateKey_file(ctx_, key.c_str(), SSL_FILETYPE_PEM), 1);
    thread_ = std::thread([this] { Serve(); });
  }
  ~TlsUpgradeServer() {
    ::shutdown(listener_, SHUT_RDWR);
    thread_.join();
    ::close(listener_);
    SSL_CTX_free(ctx_);
  }
  std::string url() const { return "https://127.0.0.1:" + std::to_string(port_); }
  // Whether the client's close_notify came (read after the client's end).
  bool saw_close_notify() const { return saw_close_notify_; }

 private:
  void Serve() {
    const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    SSL* ssl = SSL_new(ctx_);
    SSL_set_fd(ssl, fd);
    if (SSL_accept(ssl) == 1) {
      std::string head;
      char buffer[4096];
      int n = 0;
      while (head.find("\r\n\r\n") == std::string::npos && (n = SSL_read(ssl, buffer, sizeof buffer)) > 0)
        head.append(buffer, static_cast<size_t>(n));
      const std::string answer = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\nearly";
      SSL_write(ssl, answer.data(), static_cast<int>(answer.size()));
      while ((n = SSL_read(ssl, buffer, sizeof buffer)) > 0) {
        for (int i = 0; i < n; ++i) buffer[i] = static_cast<char>(std::toupper(static_cast<unsigned char>(buffer[i])));
        SSL_write(ssl, buffer, n);
      }
      if (SSL_get_error(ssl, n) == SSL_ERROR_ZERO_RETURN) {
        saw_close_notify_ = true;
        SSL_write(ssl, "bye", 3);
      }
      SSL_shutdown(ssl);
    }
    SSL_free(ssl);
    ::close(fd);
  }

  SSL_CTX* ctx_;
  int port_ = 0;
  int listener_;
  std::atomic<bool> saw_close_notify_{false};
  std::thread thread_;
};

// Reads `fd` until its end (or 10 s pass).
std::string ReadToEnd(int fd) {
  std::string text;
  char buffer[4096];
  while (true) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10'000) <= 0) return text + "<no end within 10 s>";
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) return text;
    text.append(buffer, static_cast<size_t>(n));
  }
}

TEST(HttpsClientUpgrade, TheConnectionIsBridgedBothWaysAndAHalfCloseReachesTheServer) {
  TestCertificates certs;
  TlsUpgradeServer server(certs.Cert("server"), certs.Key("server"));
  const HttpClient client = Client(server.url(), certs.Cert("ca"));
  auto upgraded = client.Upgrade("POST", "/exec", "{}", {}, std::chrono::seconds(10));
  ASSERT_TRUE(upgraded.ok()) << upgraded.status().message();
  std::string received = upgraded->early;
  const std::string sent = "hello, " + std::string(100'000, 'x');  // more than the bridge holds at once
  std::thread writer([&] {
    EXPECT_EQ(::write(upgraded->fd, sent.data(), sent.size()), static_cast<ssize_t>(sent.size()));
    ::shutdown(upgraded->fd, SHUT_WR);  // as slotctl passes on the end of its input
  });
  received += ReadToEnd(upgraded->fd);
  writer.join();
  ::close(upgraded->fd);
  std::string upper = sent;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(received.size(), upper.size() + 8);
  EXPECT_EQ(received, "early" + upper + "bye");
  EXPECT_TRUE(server.saw_close_notify());
}

TEST(HttpsClientUpgrade, AFailedHandshakeSaysWhyAsForARequest) {
  TestCertificates certs;
  ASSERT_TRUE(certs.MakeCa("other")) << certs.error();
  TlsUpgradeServer server(certs.Cert("server"), certs.Key("server"));
  auto upgraded = Client(server.url(), certs.Cert("other")).Upgrade("POST", "/exec", "{}", {}, std::chrono::seconds(10));
  ASSERT_FALSE(upgraded.ok());
  EXPECT_EQ(upgraded.status().code(), Status::Code::kUnavailable);
  EXPECT_NE(upgraded.status().message().find("POST /exec on " + server.url() + " failed: the server's certificate is "
                                              "signed by a CA not in " + certs.Cert("other") + " (unknown CA)"),
            std::string::npos)
      << upgraded.status().message();
}

}  // namespace
}  // namespace slotd
