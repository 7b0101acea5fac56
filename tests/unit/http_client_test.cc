// HttpClient against a small keep-alive server on a unix socket that counts
// its connections: requests of one client go on a kept connection, and a
// connection the server closed is replaced.
#include "common/http_client.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "testing/canned_server.h"

namespace slotd {
namespace {

// Answers every request with `answer` ("200 ok" unless given), keeping the
// connection open, except that it closes a connection after the answer when
// `close_after_each` is set. Serves one connection at a time, which is all
// these tests need.
class CountingServer {
 public:
  explicit CountingServer(std::string answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
      : answer_(std::move(answer)) {
    char dir_template[] = "/tmp/slotd-http-client-XXXXXX";
    dir_ = ::mkdtemp(dir_template);
    path_ = dir_ + "/s.sock";
    listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    path_.copy(addr.sun_path, sizeof addr.sun_path - 1);
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(listener_, 8), 0);
    thread_ = std::thread([this] { Serve(); });
  }
  ~CountingServer() {
    ::shutdown(listener_, SHUT_RDWR);
    thread_.join();
    ::close(listener_);
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }

  const std::string& path() const { return path_; }
  int connections() const { return connections_; }
  std::atomic<bool> close_after_each{false};

 private:
  void Serve() {
    while (true) {
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      ++connections_;
      std::string pending;
      char buffer[4096];
      while (true) {
        const ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n <= 0) break;
        pending.append(buffer, static_cast<size_t>(n));
        size_t end;
        bool closed = false;
        while ((end = pending.find("\r\n\r\n")) != std::string::npos) {  // requests without a body
          pending.erase(0, end + 4);
          if (!WriteAll(fd, answer_)) closed = true;
          if (close_after_each) closed = true;
          if (closed) break;
        }
        if (closed) break;
      }
      ::close(fd);
    }
  }

  static bool WriteAll(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::write(fd, bytes.data(), bytes.size());
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  const std::string answer_;
  std::string dir_;
  std::string path_;
  int listener_ = -1;
  std::atomic<int> connections_{0};
  std::thread thread_;
};

TEST(HttpClient, RequestsOfOneClientAndItsCopiesGoOnOneKeptConnection) {
  CountingServer server;
  const HttpClient client = HttpClient::Unix(server.path());
  for (int i = 0; i < 5; ++i) {
    auto answer = client.Request("GET", "/x");
    ASSERT_TRUE(answer.ok()) << answer.status().message();
    EXPECT_EQ(answer->body, "ok");
  }
  const HttpClient copy = client;
  auto answer = copy.Request("GET", "/y");
  ASSERT_TRUE(answer.ok()) << answer.status().message();
  EXPECT_EQ(server.connections(), 1);
}

TEST(HttpClient, AConnectionTheServerClosedIsReplacedWithoutFailingTheCall) {
  CountingServer server;
  server.close_after_each = true;
  const HttpClient client = HttpClient::Unix(server.path());
  for (int i = 0; i < 3; ++i) {
    auto answer = client.Request("GET", "/x");
    ASSERT_TRUE(answer.ok()) << answer.status().message();
    EXPECT_EQ(answer->body, "ok");
  }
  EXPECT_EQ(server.connections(), 3);
}

TEST(HttpClient, ALargeBodyArrivesWholeAcrossManyReads) {
  std::string body(3 * 1024 * 1024 + 17, 'x');
  for (size_t i = 0; i < body.size(); i += 4096) body[i] = static_cast<char>('a' + (i / 4096) % 26);
  CountingServer server("HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  const HttpClient client = HttpClient::Unix(server.path());
  for (int i = 0; i < 2; ++i) {
    auto answer = client.Request("GET", "/big");
    ASSERT_TRUE(answer.ok()) << answer.status().message();
    EXPECT_EQ(answer->body, body);
  }
}

TEST(HttpClient, ABodyShorterThanTheLengthItDeclaresIsABrokenTransfer) {
  // A terabyte declared, two bytes sent, the connection closed: the call
  // fails as a broken transfer, without setting aside what was declared.
  CountingServer server("HTTP/1.1 200 OK\r\nContent-Length: 1099511627776\r\n\r\nok");
  server.close_after_each = true;
  const HttpClient client = HttpClient::Unix(server.path());
  auto answer = client.Request("GET", "/liar");
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.status().code(), Status::Code::kUnavailable) << answer.status().message();
}

// Upgrade reads the answer's head with Beast's parser: a 101 hands over the
// connection with its headers and the bytes after the head; an error keeps
// its status and body; a head that is not HTTP, or has bytes that are not
// ASCII, is an error and never a crash.
TEST(HttpClientUpgrade, ReadsAnUpgradeAnErrorAndAHeadThatIsNotHttp) {
  testing::CannedServer server;
  const HttpClient client = HttpClient::Tcp(server.url());
  server.AnswerRaw("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n"
                   "X-Slotd-Exec-Id: e1\r\nX-Odd: caf\xc3\xa9 \xff\r\n\r\nprompt$ ");
  Result<UpgradedConnection> upgraded = client.Upgrade("POST", "/exec", "{}", {}, std::chrono::seconds(5));
  ASSERT_TRUE(upgraded.ok()) << upgraded.status().message();
  EXPECT_EQ(upgraded->Header("x-slotd-exec-id"), "e1");
  EXPECT_EQ(upgraded->Header("X-Odd"), "caf\xc3\xa9 \xff");
  EXPECT_EQ(upgraded->early, "prompt$ ");
  ::close(upgraded->fd);

  server.AnswerRaw("HTTP/1.1 404 Not Found\r\nContent-Length: 20\r\n\r\n{\"error\": \"no exec\"}");
  Result<UpgradedConnection> refused = client.Upgrade("POST", "/exec", "{}", {}, std::chrono::seconds(5));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kNotFound);
  EXPECT_NE(refused.status().message().find("HTTP 404: {\"error\": \"no exec\"}"), std::string::npos)
      << refused.status().message();

  for (const char* garbage : {"SSH-2.0-OpenSSH_9.2\r\n\r\n", "HTTP/1.1 abc Nope\r\n\r\n",
                              "HTTP/1.1 101 Up\r\nNo colon here\r\n\r\n", "HTTP/1.1 101 Up\r\nX: \x01\r\n\r\n"}) {
    server.AnswerRaw(garbage);
    Result<UpgradedConnection> odd = client.Upgrade("POST", "/exec", "{}", {}, std::chrono::seconds(5));
    ASSERT_FALSE(odd.ok()) << garbage;
    EXPECT_EQ(odd.status().code(), Status::Code::kInternal) << odd.status().message();
    EXPECT_NE(odd.status().message().find("not HTTP"), std::string::npos) << odd.status().message();
  }
}

}  // namespace
}  // namespace slotd
