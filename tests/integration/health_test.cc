// /health tells the truth about the engine: an engine that hangs (its
// sockets open, no answer) is not healthy. The agent talks to the real
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

}  // namespace
}  // namespace slotd::testing
