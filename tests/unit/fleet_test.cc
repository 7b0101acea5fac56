// The fleet's pure parts: the registration document, placement, the
// Prometheus targets, etcd key ranges and the [etcd] options.

#include <gtest/gtest.h>

#include "fleet/agent_document.h"
#include "fleet/etcd_client.h"
#include "fleet/placement.h"
#include "fleet/prometheus_sd.h"
#include "testing/temp_tree.h"

namespace slotd {
namespace {

using nlohmann::json;

AgentDocument Agent(const std::string& id, int64_t free_cpu, int64_t free_mem_mib, int64_t free_gpus = 0,
                    int64_t gpus = 0) {
  AgentDocument doc;
  doc.id = id;
  doc.node = "node-" + id;
  doc.address = "127.0.0.1:6001";
  doc.scaling_group = "default";
  doc.slots["cpu"] = {8, 8 - free_cpu, free_cpu};
  doc.slots["mem"] = {16ll << 30, (16ll << 30) - (free_mem_mib << 20), free_mem_mib << 20};
  if (gpus > 0) doc.slots["cuda.device"] = {gpus, gpus - free_gpus, free_gpus};
  return doc;
}

PlacementRequest Request(int64_t cpu, int64_t mem_mib, int64_t gpus = 0) {
  PlacementRequest request;
  request.slots = {{"cpu", cpu}, {"mem", mem_mib << 20}};
  if (gpus > 0) request.slots["cuda.device"] = gpus;
  return request;
}

TEST(AgentDocumentTest, WhatIsWrittenIsReadBack) {
  AgentDocument doc = Agent("gpu1-a", 3, 1024, 1, 4);
  doc.version = "1.2.3";
  doc.draining = true;
  doc.kernels = 2;
  doc.warm = 1;
  doc.devices = {{"GPU-1", "cuda.device", "unhealthy", false, true}, {"GPU-2", "cuda.device", "healthy", true, false}};
  auto read = AgentDocument::FromJson(doc.ToJson().dump());
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(*read, doc);
}

TEST(AgentDocumentTest, TheAgentsResourcesBecomeSlotsAndDevices) {
  const json described = {
      {"cpu", {{"capacity", 4}, {"used", 1}, {"free", 3}, {"cores", "0-3"}}},
      {"mock.device",
       {{"capacity", 2}, {"used", 1}, {"free", 0}, {"unhealthy", 1}, {"drained", 0},
        {"devices", {{{"id", "m0"}, {"held_by", "k1"}, {"health", "healthy"}, {"drained", false}},
                     {{"id", "m1"}, {"held_by", nullptr}, {"health", "unhealthy"}, {"drained", false}}}}}}};
  AgentDocument doc;
  doc.SetResources(described);
  EXPECT_EQ(doc.slots["cpu"], (SlotUse{4, 1, 3}));
  EXPECT_EQ(doc.slots["mock.device"], (SlotUse{2, 1, 0}));
  ASSERT_EQ(doc.devices.size(), 2u);
  EXPECT_EQ(doc.devices[0], (RegisteredDevice{"m0", "mock.device", "healthy", false, true}));
  EXPECT_EQ(doc.devices[1], (RegisteredDevice{"m1", "mock.device", "unhealthy", false, false}));
}

TEST(AgentDocumentTest, WhatIsNotADocumentIsRefusedNamingTheField) {
  auto problem = [](const std::string& text) {
    auto doc = AgentDocument::FromJson(text);
    return doc.ok() ? std::string("accepted") : doc.status().message();
  };
  EXPECT_EQ(problem("not json \xff"), "not a JSON object");
  EXPECT_EQ(problem("[]"), "not a JSON object");
  EXPECT_EQ(problem(R"({"node": "n", "address": "a"})"), "id is missing");
  EXPECT_EQ(problem(R"({"id": "Bad Id", "node": "n", "address": "a"})"),
            "id \"Bad Id\" is not an agent id ([a-z0-9][a-z0-9._-]{0,63})");
  EXPECT_EQ(problem(R"({"id": "a", "node": 3, "address": "a"})"), "node is a number, expected a string");
  EXPECT_EQ(problem(R"({"id": "a", "node": ")" + std::string(1025, 'n') + R"(", "address": "a"})"),
            "node is longer than 1024 bytes");
  EXPECT_EQ(problem(R"({"id": "a", "node": "n", "address": "a", "draining": "yes"})"), "draining is a string, expected true or false");
  EXPECT_EQ(problem(R"({"id": "a", "node": "n", "address": "a", "slots": {"cpu": {"free": "3"}}})"),
            "slots.cpu.free is a string, expected a whole number");
  EXPECT_EQ(problem(R"({"id": "a", "node": "n", "address": "a", "devices": [{"id": "x"}]})"), "devices[0].slot is missing");
  // A newer agent's extra fields are no problem.
  EXPECT_EQ(problem(R"({"id": "a", "node": "n", "address": "a", "gpu_topology": {"x": 1}})"), "accepted");
  EXPECT_EQ(problem(R"({"id": "a", "node": "n", "address": "a", "scheme": "ftp"})"),
            "scheme is \"ftp\", expected \"http\" or \"https\"");
}

TEST(AgentDocumentTest, TheSchemeSaysHowToReachTheApiAndAnOlderAgentsIsHttp) {
  AgentDocument doc = Agent("a", 1, 1);
  doc.scheme = "https";
  EXPECT_EQ(doc.ToJson()["scheme"], "https");
  EXPECT_EQ(doc.Url(), "https://127.0.0.1:6001");
  EXPECT_EQ(AgentDocument::FromJson(doc.ToJson().dump()).value().scheme, "https");
  auto older = AgentDocument::FromJson(R"({"id": "a", "node": "n", "address": "127.0.0.1:6001"})");
  ASSERT_TRUE(older.ok()) << older.status().message();
  EXPECT_EQ(older->scheme, "http");
  EXPECT_EQ(older->Url(), "http://127.0.0.1:6001");
}

TEST(FleetPlacementTest, BestFitLeavesLargeSlicesWhole) {
  const std::vector<AgentDocument> agents = {Agent("big", 8, 16384), Agent("snug", 2, 4096), Agent("small", 1, 1024)};
  // Two cores fit "big" and "snug"; "snug" is left with the least.
  EXPECT_EQ(RankAgents(agents, Request(2, 1024)), (std::vector<size_t>{1, 0}));
  // One core fits all three; the tightest first.
  EXPECT_EQ(RankAgents(agents, Request(1, 512)), (std::vector<size_t>{2, 1, 0}));
  EXPECT_TRUE(RankAgents(agents, Request(9, 512)).empty());
}

TEST(FleetPlacementTest, DrainingAgentsOtherGroupsAndBusyDevicesAreSkipped) {
  std::vector<AgentDocument> agents = {Agent("a", 8, 16384, 0, 4), Agent("b", 8, 16384, 2, 4),
                                       Agent("c", 8, 16384, 4, 4)};
  agents[2].draining = true;
  EXPECT_EQ(RankAgents(agents, Request(1, 512, 1)), (std::vector<size_t>{1}));
  PlacementRequest grouped = Request(1, 512);
  grouped.scaling_group = "gpu";
  agents[0].scaling_group = "gpu";
  EXPECT_EQ(RankAgents(agents, grouped), (std::vector<size_t>{0}));
}

TEST(FleetPlacementTest, TiesGoToFewerKernelsThenTheSmallerId) {
  std::vector<AgentDocument> agents = {Agent("b", 4, 4096), Agent("a", 4, 4096), Agent("c", 4, 4096)};
  agents[1].kernels = 3;
  EXPECT_EQ(RankAgents(agents, Request(1, 256)), (std::vector<size_t>{0, 2, 1}));
}

TEST(FleetPlacementTest, WhenNothingFitsTheMessageNamesTheLargestFreeSlice) {
  std::vector<AgentDocument> agents = {Agent("a", 1, 2048, 0, 2), Agent("b", 6, 8192, 1, 2), Agent("c", 8, 16384, 2, 2)};
  agents[2].draining = true;
  EXPECT_EQ(NoPlacementMessage(agents, Request(4, 4096, 2)),
            "no agent can take cpu 4, cuda.device 2, mem 4g: the largest free slice is agent b on node node-b with "
            "cpu 6, cuda.device 1, mem 8g (3 agents; 1 draining)");
  PlacementRequest grouped = Request(1, 256);
  grouped.scaling_group = "gpu";
  EXPECT_EQ(NoPlacementMessage(agents, grouped),
            "no agent can take cpu 1, mem 256m in scaling group gpu: every agent is draining or in another scaling "
            "group (3 agents; 3 in other scaling groups)");
  EXPECT_EQ(NoPlacementMessage({}, Request(1, 256)), "no agent can take cpu 1, mem 256m: no agent is registered");
}

TEST(PrometheusTargetsTest, OneTargetPerAgentWithItsLabelsInIdOrder) {
  std::vector<AgentDocument> agents = {Agent("b", 1, 1), Agent("a", 1, 1)};
  agents[0].address = "127.0.0.2:6001";
  const json targets = json::parse(PrometheusTargets(agents));
  ASSERT_EQ(targets.size(), 2u);
  EXPECT_EQ(targets[0]["labels"]["agent_id"], "a");
  EXPECT_EQ(targets[1], (json{{"targets", {"127.0.0.2:6001"}},
                              {"labels", {{"node", "node-b"}, {"agent_id", "b"}, {"scaling_group", "default"}}}}));
  EXPECT_EQ(PrometheusTargets({}), "[]\n");
}

TEST(PrometheusTargetsTest, AnAgentThatSpeaksTlsIsScrapedOverHttps) {
  std::vector<AgentDocument> agents = {Agent("a", 1, 1), Agent("b", 1, 1)};
  agents[1].scheme = "https";
  const json targets = json::parse(PrometheusTargets(agents));
  EXPECT_FALSE(targets[0]["labels"].contains("__scheme__")) << targets.dump();
  EXPECT_EQ(targets[1]["labels"]["__scheme__"], "https") << targets.dump();
}

TEST(EtcdTest, APrefixRangeEndsPastEveryKeyWithThePrefix) {
  EXPECT_EQ(PrefixRangeEnd("/slotd/agents/"), "/slotd/agents0");
  EXPECT_EQ(PrefixRangeEnd(std::string("a\xff", 2)), "b");
  EXPECT_EQ(PrefixRangeEnd(std::string("\xff", 1)), std::string(1, '\0'));
  EXPECT_EQ(AgentKey("/slotd", "gpu1-a"), "/slotd/agents/gpu1-a");
}

TEST(EtcdTest, OptionsNeedAPasswordForAUserAndReadItFromItsFile) {
  EtcdConfig config;
  config.endpoints = {"http://127.0.0.1:2379"};
  EXPECT_TRUE(EtcdOptionsFor(config).ok());
  config.user = "agent";
  EXPECT_EQ(EtcdOptionsFor(config).status().message(),
            "etcd.user: user agent needs etcd.password or etcd.password-file");
  TempTree dir("fleet-test");
  dir.Write("password", "s3cret\nignored\n");
  config.password_file = dir.root() + "/password";
  auto options = EtcdOptionsFor(config);
  ASSERT_TRUE(options.ok()) << options.status().message();
  EXPECT_EQ(options->password, "s3cret");
  config.password = "other";
  EXPECT_NE(EtcdOptionsFor(config).status().message().find("not both"), std::string::npos);
  config.password.clear();
  config.password_file = dir.root() + "/absent";
  EXPECT_NE(EtcdOptionsFor(config).status().message().find("etcd.password-file: cannot read a password from"),
            std::string::npos);
  EtcdConfig stray;
  stray.password = "x";
  EXPECT_NE(EtcdOptionsFor(stray).status().message().find("needs etcd.user"), std::string::npos);
}

TEST(EtcdTest, OptionsCarryTheTlsFilesAndRefuseOnesThatCannotBeReadOrAKeyAlone) {
  TempTree dir("fleet-test");
  dir.Write("ca.crt", "a CA");
  dir.Write("client.crt", "a certificate");
  dir.Write("client.key", "a key");
  EtcdConfig config;
  config.endpoints = {"https://127.0.0.1:2379"};
  config.ca_file = dir.root() + "/ca.crt";
  config.cert_file = dir.root() + "/client.crt";
  config.key_file = dir.root() + "/client.key";
  auto options = EtcdOptionsFor(config);
  ASSERT_TRUE(options.ok()) << options.status().message();
  EXPECT_EQ(options->tls.ca_file, config.ca_file);
  EXPECT_EQ(options->tls.cert_file, config.cert_file);
  EXPECT_EQ(options->tls.key_file, config.key_file);
  EXPECT_EQ(options->tls.ca_setting, "[etcd] ca-file");

  config.key_file.clear();
  EXPECT_EQ(EtcdOptionsFor(config).status().message(),
            "etcd.cert-file: the client certificate needs its private key in etcd.key-file");
  config.key_file = dir.root() + "/absent.key";
  EXPECT_EQ(EtcdOptionsFor(config).status().message(),
            "etcd.key-file: cannot read " + dir.root() + "/absent.key: No such file or directory");
}

}  // namespace
}  // namespace slotd
