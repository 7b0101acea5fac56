// The agent under a service manager that speaks sd_notify(3), as systemd
// runs it (Type=notify, WatchdogSec=): the test binds the notify socket
// itself and reads what slotd says. An agent started before its engine waits
// for it (container.engine-wait), saying why; it says READY=1 once it
// serves, pings the watchdog while its API answers, and says STOPPING=1.
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/unique_fd.h"
#include "integration/harness.h"
#include "testing/eventually.h"

namespace slotd::testing {
namespace {

// A datagram socket where a service manager would listen, at `path`: keeps
// every message slotd sends.
class NotifySocket {
 public:
  explicit NotifySocket(std::string path) : path_(std::move(path)) {
    fd_ = UniqueFd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::snprintf(address.sun_path, sizeof(address.sun_path), "%s", path_.c_str());
    EXPECT_EQ(::bind(fd_.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0) << path_;
  }
  const std::string& path() const { return path_; }
  // Every message received so far, in order.
  const std::vector<std::string>& Messages() {
    char buffer[4096];
    for (ssize_t n; (n = ::recv(fd_.get(), buffer, sizeof(buffer), 0)) > 0;) messages_.emplace_back(buffer, n);
    return messages_;
  }
  // Whether a message so far has a line starting with `prefix`.
  bool Said(const std::string& prefix) {
    for (const std::string& message : Messages()) {
      std::istringstream lines(message);
      for (std::string line; std::getline(lines, line);)
        if (line.rfind(prefix, 0) == 0) return true;
    }
    return false;
  }
  int Count(const std::string& message) {
    int n = 0;
    for (const std::string& one : Messages()) n += one == message;
    return n;
  }

 private:
  std::string path_;
  UniqueFd fd_;
  std::vector<std::string> messages_;
};

// The engine's socket path, from DockerHost()'s unix:// URL.
std::string EngineSocketPath() {
  const std::string host = DockerHost();
  return host.rfind("unix://", 0) == 0 ? host.substr(7) : "";
}

TEST(ServiceManager, AnAgentStartedBeforeItsEngineWaitsForItAndTellsTheManagerWhyThenThatItIsReady) {
  const std::string engine = EngineSocketPath();
  if (engine.empty()) GTEST_SKIP() << "the engine is not on a unix socket: " << DockerHost();
  TempDir dir;
  NotifySocket manager(dir.path() + "/notify");
  const std::string late = dir.path() + "/late-engine.sock";  // the engine's socket appears here later
  AgentOptions o = TwoCoreAgent("late-engine", "engine-wait = \"60s\"\n");
  o.docker_host = "unix://" + late;
  o.env = {"NOTIFY_SOCKET=" + manager.path(), "WATCHDOG_USEC=2000000"};
  AgentProcess agent(o);
  bool started = false;
  std::thread starter([&] { started = agent.Start(); });
  const bool waiting = Eventually([&] { return manager.Said("STATUS=waiting for the engine at unix://" + late); },
                                  std::chrono::seconds(10));
  EXPECT_TRUE(waiting) << agent.log();
  EXPECT_NE(agent.log().find("waiting for the engine at unix://" + late + " (up to 60 s, container.engine-wait)"),
            std::string::npos)
      << agent.log();
  EXPECT_FALSE(manager.Said("READY=1")) << "ready before the engine answered";
  // The engine comes up (its socket appears where the agent looks).
  std::filesystem::create_symlink(engine, late);
  starter.join();
  ASSERT_TRUE(started) << agent.log();
  EXPECT_TRUE(Eventually([&] { return manager.Said("READY=1"); })) << agent.log();
  EXPECT_TRUE(manager.Said("STATUS=serving agent " + o.id)) << agent.log();
  // Pings every half of WATCHDOG_USEC while the API answers /health.
  EXPECT_TRUE(Eventually([&] { return manager.Count("WATCHDOG=1") >= 2; }, std::chrono::seconds(10)));
  agent.Kill(SIGTERM);
  EXPECT_EQ(agent.exit_code(), 0) << agent.log();
  EXPECT_TRUE(manager.Said("STOPPING=1"));
}

TEST(ServiceManager, AnEngineThatNeverComesUpFailsTheStartAfterEngineWaitSayingSo) {
  TempDir dir;
  NotifySocket manager(dir.path() + "/notify");
  AgentOptions o = TwoCoreAgent("no-engine", "engine-wait = \"2s\"\n");
  o.docker_host = "unix://" + dir.path() + "/never.sock";
  o.env = {"NOTIFY_SOCKET=" + manager.path()};
  AgentProcess agent(o);
  EXPECT_FALSE(agent.Start());
  EXPECT_EQ(agent.exit_code(), 1) << agent.log();
  EXPECT_NE(agent.log().find("cannot reach the engine at unix://" + dir.path() +
                             "/never.sock after waiting 2 s (container.engine-wait)"),
            std::string::npos)
      << agent.log();
  EXPECT_TRUE(manager.Said("STATUS=cannot start: cannot reach the engine")) << agent.log();
  EXPECT_FALSE(manager.Said("READY=1"));

  // A stop while waiting ends the wait cleanly.
  AgentOptions patient = TwoCoreAgent("stopped-waiting", "engine-wait = \"60s\"\n");
  patient.docker_host = o.docker_host;
  AgentProcess stopped(patient);
  std::thread starter([&] { stopped.Start(); });
  EXPECT_TRUE(Eventually([&] { return stopped.log().find("waiting for the engine") != std::string::npos; },
                         std::chrono::seconds(10)))
      << stopped.log();
  ::kill(stopped.pid(), SIGTERM);
  starter.join();
  EXPECT_EQ(stopped.exit_code(), 0) << stopped.log();
  EXPECT_NE(stopped.log().find("while waiting for the engine; exiting"), std::string::npos) << stopped.log();
}

}  // namespace
}  // namespace slotd::testing
