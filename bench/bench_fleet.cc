// bench_fleet: 50 agents (real build/bin/slotd processes, small configs, 25
// "nodes" of two agents each) registered in a real etcd on loopback:
//  - `slotctl cluster --json` listing all 50 (a process, whose start alone
//    is timed too), against what a scheduler without the registry does:
//    GET /v1/agent of every agent, one after another, over TCP;
//  - one placement decision (read the fleet, rank it: fleet/placement.h),
//    in process, against polling every agent's /v1/agent and deciding on
//    the same documents;
//  - etcd writes per agent per minute while idle (keep-alives only, as
//    slotd_etcd_writes_total and slotd_etcd_keepalives_total count them)
//    and under create/delete churn, where writes are coalesced: document
//    writes per allocation change.
// Exits 1 when a step fails, or when an idle agent wrote a document.
#include <cstdio>
#include <regex>
#include <thread>

#include "common.h"
#include "fleet/agent_document.h"
#include "fleet/etcd_client.h"
#include "fleet/placement.h"
#include "integration/etcd.h"

namespace slotd::bench {
namespace {

using nlohmann::json;

constexpr int kAgents = 50;
constexpr int kRounds = 20;                          // listings and decisions timed
constexpr auto kIdleWindow = std::chrono::seconds(30);
constexpr auto kChurnWindow = std::chrono::seconds(30);
constexpr int kChurnAgents = 5;                      // agents with a create/delete loop during the churn
constexpr char kNamespace[] = "/bench-fleet";

testing::AgentOptions FleetAgent(const testing::TestEtcd& etcd, const std::string& tag, int i) {
  testing::AgentOptions o;
  o.id = "bf-" + tag + "-" + std::to_string(i);
  o.node = "node-" + std::to_string(i / 2);
  o.cores = "0";
  o.memory = "256m";
  o.port_first = 41000 + i * 4;
  o.port_last = o.port_first + 3;
  o.extra_toml = "[etcd]\nendpoints = [\"" + etcd.url() + "\"]\nnamespace = \"" + kNamespace + "\"\n";
  return o;
}

// The value of `family` (no labels but agent_id) in `agent`'s /metrics.
double Metric(const testing::AgentProcess& agent, const std::string& family) {
  const std::string text = agent.Call("GET", "/metrics").body;
  const std::regex line("\n" + family + "\\{[^}]*\\} ([0-9.e+]+)");
  std::smatch match;
  if (!std::regex_search(text, match, line)) throw BenchFailure(agent.options().id + ": no " + family + " in /metrics");
  return std::stod(match[1]);
}

struct Counts {
  double writes = 0;
  double keep_alives = 0;
};
Counts CountsOf(const std::vector<std::unique_ptr<testing::AgentProcess>>& agents, size_t first, size_t count) {
  Counts total;
  for (size_t i = first; i < first + count; ++i) {
    total.writes += Metric(*agents[i], "slotd_etcd_writes_total");
    total.keep_alives += Metric(*agents[i], "slotd_etcd_keepalives_total");
  }
  return total;
}

std::vector<AgentDocument> ReadFleet(const EtcdClient& etcd) {
  auto listing = Check(etcd.GetPrefix(AgentsPrefix(kNamespace)), "etcd range");
  std::vector<AgentDocument> docs;
  for (const EtcdKeyValue& kv : listing.kvs) docs.push_back(Check(AgentDocument::FromJson(kv.value), kv.key));
  return docs;
}

// What a scheduler without the registry does: ask every agent.
std::vector<json> PollAgents(const std::vector<std::unique_ptr<testing::AgentProcess>>& agents) {
  std::vector<json> answers;
  for (const auto& agent : agents) {
    auto res = HttpClient::Tcp("http://127.0.0.1:" + std::to_string(agent->port()))
                   .Request("GET", "/v1/agent", "", std::chrono::seconds(5));
    if (!res.ok() || res->status != 200) throw BenchFailure(agent->options().id + ": GET /v1/agent failed");
    answers.push_back(json::parse(res->body));
  }
  return answers;
}

void Run(const std::string& tag) {
  testing::TestEtcd etcd;
  if (!etcd.started()) throw BenchFailure("etcd does not start: " + etcd.log());
  std::printf("bench_fleet: %d agents on %d nodes, etcd at %s, engine %s\n", kAgents, kAgents / 2, etcd.url().c_str(),
              testing::DockerHost().c_str());
  std::vector<std::unique_ptr<testing::AgentProcess>> agents;
  const auto started = Clock::now();
  for (int i = 0; i < kAgents; ++i) {
    agents.push_back(std::make_unique<testing::AgentProcess>(FleetAgent(etcd, tag, i)));
    StartAgent(*agents.back());
  }
  std::printf("started and registered %d agents in %.1f s\n", kAgents, Millis(started, Clock::now()) / 1000);
  const EtcdClient client(EtcdOptions{{etcd.url()}, "", "", std::chrono::seconds(5)});
  PollUntil([&] { return ReadFleet(client).size() == static_cast<size_t>(kAgents); }, std::chrono::seconds(30),
            "all agents registered");

  // Listing: slotctl cluster, against asking each agent.
  Samples listed, polled, process_floor;
  for (int round = 0; round < kRounds; ++round) {
    ThrowIfInterrupted();
    auto t0 = Clock::now();
    if (testing::Slotctl({"--help"}).exit_code != 0) throw BenchFailure("slotctl --help failed");
    process_floor.Add(Millis(t0, Clock::now()));
    t0 = Clock::now();
    testing::CommandResult out = testing::Slotctl({"cluster", "--json", "--etcd", etcd.url(), "--namespace", kNamespace});
    auto t1 = Clock::now();
    if (out.exit_code != 0 || json::parse(out.out).size() != static_cast<size_t>(kAgents))
      throw BenchFailure("slotctl cluster: " + out.err);
    listed.Add(Millis(t0, t1));
    t0 = Clock::now();
    PollAgents(agents);
    polled.Add(Millis(t0, Clock::now()));
  }
  PrintSamples("slotctl cluster --json (50 agents, a process each)", listed);
  PrintSamples("  a slotctl process that does nothing (--help)", process_floor);
  PrintSamples("GET /v1/agent of each of the 50 agents", polled);
  PrintRatio("cluster listing / polling every agent", listed.Median() / polled.Median(), "< 1");

  // One placement decision: read the fleet and rank it, against polling and ranking.
  PlacementRequest request;
  request.slots = {{"cpu", 1}, {"mem", 64ll << 20}};
  Samples decided, decided_polling, ranked_only;
  for (int round = 0; round < kRounds; ++round) {
    auto t0 = Clock::now();
    std::vector<AgentDocument> docs = ReadFleet(client);
    if (RankAgents(docs, request).empty()) throw BenchFailure("no agent fits the placement");
    decided.Add(Millis(t0, Clock::now()));
    t0 = Clock::now();
    if (RankAgents(docs, request).empty()) throw BenchFailure("no agent fits the placement");
    ranked_only.Add(Millis(t0, Clock::now()));
    t0 = Clock::now();
    std::vector<AgentDocument> from_agents;
    for (const json& answer : PollAgents(agents)) {
      AgentDocument doc;
      doc.id = answer["id"];
      doc.node = answer["node"];
      doc.draining = answer["draining"];
      doc.SetResources(answer["resources"]);
      from_agents.push_back(std::move(doc));
    }
    if (RankAgents(from_agents, request).empty()) throw BenchFailure("no agent fits the placement");
    decided_polling.Add(Millis(t0, Clock::now()));
  }
  PrintSamples("placement decision: etcd range + rank 50", decided);
  PrintSamples("  of which ranking 50 documents", ranked_only);
  PrintSamples("placement decision: poll 50 agents + rank", decided_polling);
  PrintRatio("placement from etcd / placement by polling", decided.Median() / decided_polling.Median(), "< 1");

  // Idle: only keep-alives.
  const Counts idle_before = CountsOf(agents, 0, kAgents);
  std::this_thread::sleep_for(kIdleWindow);
  const Counts idle_after = CountsOf(agents, 0, kAgents);
  const double minutes = std::chrono::duration<double>(kIdleWindow).count() / 60;
  const double idle_writes = (idle_after.writes - idle_before.writes) / kAgents / minutes;
  const double idle_keep_alives = (idle_after.keep_alives - idle_before.keep_alives) / kAgents / minutes;
  std::printf("idle, per agent per minute: %.1f document writes, %.1f lease keep-alives (lease-ttl 10s)\n",
              idle_writes, idle_keep_alives);
  if (idle_after.writes != idle_before.writes) throw BenchFailure("an idle agent wrote its document");

  // Churn: create/delete loops on a few agents; writes against allocation changes.
  const Counts churn_before = CountsOf(agents, 0, kChurnAgents);
  std::atomic<int> changes{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> loops;
  for (int i = 0; i < kChurnAgents; ++i) {
    loops.emplace_back([&, i] {
      for (int n = 0; !stop; ++n) {
        const std::string id = "churn-" + std::to_string(n);
        if (agents[i]->Call("POST", "/v1/kernels", KernelRequestBody(id, "16m").dump()).status != 201) continue;
        ++changes;
        if (agents[i]->Call("DELETE", "/v1/kernels/" + id).status == 200) ++changes;
      }
    });
  }
  std::this_thread::sleep_for(kChurnWindow);
  stop = true;
  for (std::thread& loop : loops) loop.join();
  std::this_thread::sleep_for(std::chrono::seconds(1));  // the last change written
  const Counts churn_after = CountsOf(agents, 0, kChurnAgents);
  const double churn_minutes = std::chrono::duration<double>(kChurnWindow).count() / 60;
  const double writes = churn_after.writes - churn_before.writes;
  std::printf("churn on %d agents, per agent per minute: %.0f allocation changes, %.0f document writes, %.1f keep-alives\n",
              kChurnAgents, changes / kChurnAgents / churn_minutes, writes / kChurnAgents / churn_minutes,
              (churn_after.keep_alives - churn_before.keep_alives) / kChurnAgents / churn_minutes);
  PrintRatio("document writes / allocation changes under churn", writes / std::max(1, changes.load()), "<= 1");
}

}  // namespace
}  // namespace slotd::bench

int main() {
  using namespace slotd::bench;
  const std::string tag = slotd::testing::RunTag();
  std::vector<std::string> owners;
  for (int i = 0; i < kAgents; ++i) owners.push_back("bf-" + tag + "-" + std::to_string(i));
  return RunBenchmark("bench_fleet", owners, [&] { Run(tag); });
}
