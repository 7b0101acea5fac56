// The fixture of the agent's unit tests (agent_test.cc and one file per
// owner: kernel_creator_test.cc, converger_test.cc, ...): an Agent over the
// in-memory FakeEngine, a config, requests and labels as the agent makes
// them. The fake is synchronous, so every test drives the core directly
// (OnEngineEvent, Relist) instead of waiting for threads. The tests live in
// namespace slotd::agent_testing, so that these names come before their
// namesakes in slotd (Request, say).
#pragma once

#include "agent/agent.h"

#include <gtest/gtest.h>

#include "model/label_codec.h"
#include "model/create_request.h"
#include "common/units.h"
#include "testing/collect_output.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "node/scratch_limits.h"
#include "resources/device_kinds.h"
#include "testing/fake_clock.h"
#include "testing/fake_engine.h"
#include "testing/temp_tree.h"

namespace slotd {
namespace agent_testing {

using nlohmann::json;
using Method = FakeEngine::Method;


// Agent "a1": cores 0-3, 1 GiB, host ports 30000-30009.
inline Config TestConfig() {
  Config config;
  config.agent.id = "a1";
  config.agent.node = "testnode";
  config.resource.allowed_cores = {0, 1, 2, 3};
  config.resource.allowed_cores_explicit = true;
  config.resource.memory_size = kGiB;
  config.resource.memory_size_explicit = true;
  config.container.port_range_start = 30000;
  config.container.port_range_end = 30009;
  config.container.stop_timeout = std::chrono::seconds(1);
  return config;
}

// A create request for kernel `id` running `sleep 3600`; `extra` adds or
// replaces top-level fields of the body.
inline CreateRequest Request(const std::string& id, json resources = {{"cpu", 1}}, json extra = json::object()) {
  json body = {{"kernel_id", id},
               {"image", FakeEngine::kDefaultImage},
               {"command", json::array({"sleep", "3600"})},
               {"resources", std::move(resources)}};
  body.update(extra);
  Result<CreateRequest> req = ParseCreateRequest(body);
  EXPECT_TRUE(req.ok()) << req.status().message();
  return *req;
}

// The labels `agent_id`'s agent would have put on kernel `id` holding `cores` and `mem`.
inline Labels OwnedLabels(const std::string& id, std::vector<int> cores, uint64_t mem = 256 * kMiB,
                   const std::string& agent_id = "a1") {
  Kernel kernel;
  kernel.request = Request(id, {{"cpu", static_cast<int>(cores.size())}, {"mem", mem}});
  kernel.agent_id = agent_id;
  kernel.allocation.cores = std::move(cores);
  kernel.allocation.mem_bytes = mem;
  return KernelLabels(kernel);
}

// Every event queued on `sub` now.
inline std::vector<json> Drain(EventHub::Subscription& sub) {
  std::vector<json> events;
  while (auto event = sub.Next(std::chrono::milliseconds(0))) events.push_back(std::move(event->body));
  return events;
}

// The "type" of each event.
inline std::vector<std::string> Types(const std::vector<json>& events) {
  std::vector<std::string> types;
  for (const json& e : events) types.push_back(e["type"]);
  return types;
}

class AgentTest : public ::testing::Test {
 protected:
  // A fresh agent over the same engine and hub, as after a restart of slotd.
  std::unique_ptr<Agent> NewAgent() {
    auto plugins = MakePlugins(config_, HostFacts{});
    EXPECT_TRUE(plugins.ok()) << plugins.status().message();
    return std::make_unique<Agent>(config_, engine_, std::move(*plugins), hub_);
  }

  // Creates kernel `request`, which must succeed.
  Kernel MustCreate(const CreateRequest& request, Agent* agent = nullptr) {
    auto out = (agent ? agent : agent_.get())->CreateKernel(request);
    EXPECT_TRUE(out.ok()) << request.kernel_id << ": " << out.status().message();
    return out.ok() ? out->kernel : Kernel{};
  }

  // What `agent` reports as used of `slot` ("cpu", "mem", "ports").
  static uint64_t Used(const Agent& agent, const std::string& slot) {
    return agent.DescribeResources()[slot]["used"].get<uint64_t>();
  }
  uint64_t Used(const std::string& slot) const { return Used(*agent_, slot); }

  // The whole output StreamLogs gives for the kernel.
  Result<std::string> Logs(const std::string& kernel_id, int tail) {
    return CollectOutput([&](const auto& on_output, const auto& stop) {
      return agent_->StreamLogs(kernel_id, tail, /*follow=*/false, [] {}, on_output, stop);
    });
  }

  // Asserts that nothing at all is allocated.
  void ExpectNothingHeld() const {
    EXPECT_EQ(Used("cpu"), 0u);
    EXPECT_EQ(Used("mem"), 0u);
    EXPECT_EQ(Used("ports"), 0u);
  }

  // The kernel's current state.
  KernelState StateOf(const std::string& kernel_id) const {
    auto k = agent_->GetKernel(kernel_id);
    EXPECT_TRUE(k.ok()) << k.status().message();
    return k.ok() ? k->state() : KernelState::kError;
  }

  // The config with its scratch root in `scratch_`.
  Config ConfigWithScratch() const {
    Config config = TestConfig();
    config.container.scratch_root = scratch_.root();
    config.container.allow_root = true;  // the fake's images run as root, as the test image does
    return config;
  }

  FakeEngine engine_;
  EventHub hub_;
  TempTree scratch_{"slotd-agent-scratch"};
  Config config_ = ConfigWithScratch();
  std::unique_ptr<Agent> agent_ = NewAgent();
};

}  // namespace agent_testing
}  // namespace slotd
