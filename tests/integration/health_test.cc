// /health tells the truth about the engine: an engine that hangs (its
// sockets open, no answer) is not healthy, and routes that would wait on it
// say so at once. The agent talks to the real
// engine through a proxy that the test can freeze, as SIGSTOP would freeze
// dockerd, without touching the engine other tests share.
#include <thread>

#include <gtest/gtest.h>

#include "integration/harness.h"
#include "testing/engine_proxy.h"

namespace slotd::testing {
namespace {

using nlohmann::json;

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
  EngineProxy proxy(DockerHost());
  AgentOptions o;
  o.id = "it-" + RunTag() + "-health";
  o.docker_host = proxy.docker_host();
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

// The finding: with the engine hung, `slotctl run` waited 60 s for a 504
// while /health already said engine_unreachable. Once the agent knows the
// engine does not answer, a route that would wait on it answers 503 at once,
// naming the engine; what needs no engine (the list, /health) still answers.
TEST(Health, RoutesThatWaitOnAHungEngineAre503AtOnceOnceHealthSaysUnreachable) {
  EngineProxy proxy(DockerHost());
  AgentOptions o = TwoCoreAgent("hung");
  o.docker_host = proxy.docker_host();
  AgentProcess agent(o);
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel(SleepKernel("k1", "64m"));

  proxy.Freeze(true);
  const HttpResponse health = WaitForHealth(agent, 503, std::chrono::seconds(30));
  ASSERT_EQ(json::parse(health.body, nullptr, false).value("status", ""), "engine_unreachable") << health.body;
  // Known down once nothing has answered for Agent::kEngineDownAfter (5 s):
  // the freeze began before /health said so.
  std::this_thread::sleep_for(std::chrono::seconds(6));
  // Each on a connection of its own, waited for at most 20 s: the engine
  // client's own timeout (60 s) is far past it.
  const std::vector<std::pair<std::string, std::string>> routes = {
      {"POST /v1/kernels", SleepKernel("k2", "64m").dump()},
      {"POST /v1/kernels/k1/exec", R"({"command":["true"]})"},
      {"GET /v1/kernels/k1/logs", ""},
      {"POST /v1/kernels/k1/restart", ""},
      {"DELETE /v1/kernels/k1", ""},
      {"GET /v1/images", ""},
  };
  for (const auto& [route, body] : routes) {
    const size_t space = route.find(' ');
    RawClient client(agent.socket_path());
    ASSERT_TRUE(client.Send(route.substr(0, space) + " " + route.substr(space + 1) +
                            " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\n\r\n" + body));
    const std::string answer = client.Read(std::chrono::seconds(20), nullptr, "}}");
    EXPECT_EQ(StatusOf(answer), 503) << route << " while the engine hangs: " << answer;
    EXPECT_NE(answer.find("does not answer"), std::string::npos) << answer;
    EXPECT_NE(answer.find(proxy.docker_host()), std::string::npos) << answer;
  }
  EXPECT_EQ(agent.CallJson("GET", "/v1/kernels", nullptr, 200)["kernels"].size(), 1u);

  proxy.Freeze(false);
  ASSERT_EQ(WaitForHealth(agent, 200, std::chrono::seconds(30)).status, 200);
  agent.CreateKernel(SleepKernel("k2", "64m"));
}

}  // namespace
}  // namespace slotd::testing
