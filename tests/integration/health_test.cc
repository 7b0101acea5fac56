// /health tells the truth about the engine: an engine that hangs (its
// sockets open, no answer) is not healthy. The agent talks to the real
// engine through a proxy that the test can freeze, as SIGSTOP would freeze
// dockerd, without touching the engine other tests share.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <list>
#include <thread>

#include <gtest/gtest.h>

#include "integration/harness.h"

namespace slotd::testing {
namespace {

using nlohmann::json;

int ConnectUnix(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// A unix-socket proxy in front of the engine's socket. While frozen it
// accepts and holds connections and bytes but forwards nothing.
class FreezableProxy {
 public:
  FreezableProxy(std::string listen_path, std::string engine_path)
      : listen_path_(std::move(listen_path)), engine_path_(std::move(engine_path)) {
    listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", listen_path_.c_str());
    ::unlink(listen_path_.c_str());
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(listener_, 64), 0);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~FreezableProxy() {
    stop_ = true;
    ::shutdown(listener_, SHUT_RDWR);
    acceptor_.join();
    for (auto& t : pumps_) t.join();
    ::close(listener_);
  }
  void Freeze(bool frozen) { frozen_ = frozen; }

 private:
  void Accept() {
    while (!stop_) {
      pollfd p{listener_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      int engine = ConnectUnix(engine_path_);
      if (engine < 0) {
        ::close(client);
        continue;
      }
      pumps_.emplace_back([this, client, engine] { Pump(client, engine); });
    }
  }
  // Copies bytes both ways until either side closes; holds them while frozen.
  void Pump(int a, int b) {
    char buf[65536];
    while (!stop_) {
      if (frozen_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      pollfd p[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
      if (::poll(p, 2, 50) <= 0) continue;
      bool closed = false;
      for (int i = 0; i < 2 && !closed; ++i) {
        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const ssize_t n = ::recv(p[i].fd, buf, sizeof buf, 0);
        if (n <= 0 || ::send(p[1 - i].fd, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) closed = true;
      }
      if (closed) break;
    }
    ::close(a);
    ::close(b);
  }

  const std::string listen_path_;
  const std::string engine_path_;
  int listener_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<bool> frozen_{false};
  std::thread acceptor_;
  std::list<std::thread> pumps_;  // the acceptor's only
};

// Polls GET /health until it answers `status`, up to `limit`; the last answer.
HttpResponse WaitForHealth(const AgentProcess& agent, long status, std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  HttpResponse res;
  while (std::chrono::steady_clock::now() < end) {
    res = agent.Call("GET", "/health");
    if (res.status == status) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return res;
}

TEST(Health, AHungEngineIsNotHealthyAndARecoveredOneIs) {
  const std::string engine = DockerHost();
  ASSERT_EQ(engine.rfind("unix://", 0), 0u) << "this test proxies a unix-socket engine; DOCKER_HOST=" << engine;
  TempDir dir;
  FreezableProxy proxy(dir.path() + "/engine.sock", engine.substr(7));
  AgentOptions o;
  o.id = "it-" + RunTag() + "-health";
  o.docker_host = "unix://" + dir.path() + "/engine.sock";
  AgentProcess agent(o);
  ASSERT_TRUE(agent.Start()) << agent.log();
  ASSERT_EQ(WaitForHealth(agent, 200, std::chrono::seconds(10)).status, 200);

  proxy.Freeze(true);
  HttpResponse res = WaitForHealth(agent, 503, std::chrono::seconds(30));
  ASSERT_EQ(res.status, 503) << res.body;
  const json body = json::parse(res.body);
  EXPECT_EQ(body["status"], "engine_unreachable");
  const std::string metrics = agent.Call("GET", "/metrics").body;
  EXPECT_NE(metrics.find("slotd_engine_reachable{agent_id=\"" + o.id + "\"} 0"), std::string::npos) << metrics;
  // The age of the last good relist only grows while the engine hangs.
  const double age = body["last_sync_age_s"];
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_GT(json::parse(agent.Call("GET", "/health").body)["last_sync_age_s"].get<double>(), age);

  proxy.Freeze(false);
  EXPECT_EQ(WaitForHealth(agent, 200, std::chrono::seconds(30)).status, 200);
}

}  // namespace
}  // namespace slotd::testing
