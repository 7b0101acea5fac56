// Agents of several nodes in one real etcd: registration and its document,
// ids unique in the cluster, departures (clean and by lease expiry), life
// without etcd, `slotctl cluster` (table, --json, --watch, --prometheus-sd)
// and `slotctl run --place`, docs/fleet.md's recipes (one credential for the
// fleet, Prometheus) as written, an etcd that wants client certificates. The
// "nodes" are agents with different node names and claims directories on
// this machine and its one engine.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <future>
#include <map>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "common/http_client.h"
#include "fleet/agent_document.h"
#include "fleet/etcd_client.h"
#include "integration/etcd.h"
#include "integration/harness.h"
#include "testing/eventually.h"
#include "testing/tls_fixtures.h"

extern char** environ;

namespace slotd::testing {
namespace {

using nlohmann::json;

constexpr char kNamespace[] = "/slotd-test";

// Agent `name` of node `node`, registered in `etcd` with a short lease.
AgentOptions FleetAgent(const TestEtcd& etcd, const std::string& name, const std::string& node, int index,
                        const std::string& cores = "0") {
  AgentOptions o;
  o.id = "it-" + RunTag() + "-" + name;
  o.node = node;
  o.cores = cores;
  o.memory = "512m";
  o.port_first = 33000 + index * 10;
  o.port_last = o.port_first + 9;
  o.token = "fleet-" + RunTag();  // one token for the fleet: what slotctl run --place and Prometheus send
  o.extra_toml = "[etcd]\nendpoints = [\"" + etcd.url() + "\"]\nnamespace = \"" + kNamespace +
                 "\"\nlease-ttl = \"2s\"\n";
  return o;
}

// The documents registered in `etcd`, by agent id.
std::map<std::string, AgentDocument> Registered(const TestEtcd& etcd) {
  EtcdClient client(EtcdOptions{{etcd.url()}, "", "", std::chrono::seconds(2), etcd.client_tls()});
  std::map<std::string, AgentDocument> docs;
  auto listing = client.GetPrefix(AgentsPrefix(kNamespace));
  if (!listing.ok()) return docs;
  for (const EtcdKeyValue& kv : listing->kvs)
    if (auto doc = AgentDocument::FromJson(kv.value); doc.ok()) docs[doc->id] = *doc;
  return docs;
}

// A command that runs in the background with its output in a file, until
// the test ends it (SIGTERM by pid).
class Background {
 public:
  explicit Background(std::vector<std::string> argv) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    const std::string out = dir_.path() + "/out";
    posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    posix_spawn_file_actions_addopen(&actions, 2, out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    std::vector<char*> args;
    for (std::string& arg : argv) args.push_back(arg.data());
    args.push_back(nullptr);
    if (posix_spawnp(&pid_, args[0], &actions, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
  }
  ~Background() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }
  std::string output() const { return ReadFile(dir_.path() + "/out"); }

 private:
  TempDir dir_;
  pid_t pid_ = -1;
};

std::string SlotctlPath() { return std::string(SLOTD_BIN_DIR) + "/slotctl"; }

TEST(Fleet, AgentsOfThreeNodesRegisterAndTheirFreeSlotsFollowTheirKernels) {
  TestEtcd etcd;
  ASSERT_TRUE(etcd.started());
  AgentProcess a(FleetAgent(etcd, "a", "node-1", 0)), b(FleetAgent(etcd, "b", "node-2", 1)),
      c(FleetAgent(etcd, "c", "node-3", 2));
  for (AgentProcess* agent : {&a, &b, &c}) ASSERT_TRUE(agent->Start()) << agent->log();

  // Each agent's document, as registered before it served.
  std::map<std::string, AgentDocument> docs = Registered(etcd);
  ASSERT_EQ(docs.size(), 3u);
  const AgentDocument& doc = docs[a.options().id];
  EXPECT_EQ(doc.node, "node-1");
  EXPECT_EQ(doc.address, "127.0.0.1:" + std::to_string(a.port()));
  EXPECT_EQ(doc.scaling_group, "default");
  EXPECT_FALSE(doc.version.empty());
  EXPECT_EQ(doc.slots.at("cpu").free, 1);
  EXPECT_EQ(doc.slots.at("mem").capacity, 512 << 20);
  json health = a.CallJson("GET", "/health", nullptr, 200);
  EXPECT_EQ(health["etcd"]["state"], "registered") << health.dump();
  EXPECT_NE(a.Call("GET", "/metrics").body.find("slotd_etcd_registered{agent_id=\"" + a.options().id + "\"} 1"),
            std::string::npos);

  CommandResult table = Slotctl({"cluster", "--etcd", etcd.url(), "--namespace", kNamespace});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  for (AgentProcess* agent : {&a, &b, &c}) EXPECT_NE(table.out.find(agent->options().id), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("node-3"), std::string::npos) << table.out;
  CommandResult listed = Slotctl({"cluster", "--etcd", etcd.url(), "--namespace", kNamespace, "--json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_EQ(json::parse(listed.out).size(), 3u) << listed.out;

  // A kernel takes b's only core: its document follows; its delete gives it back.
  b.CreateKernel(SleepKernel("k1", "64m"));
  EXPECT_TRUE(Eventually([&] {
    auto now = Registered(etcd);
    return now.count(b.options().id) && now[b.options().id].slots["cpu"].free == 0 &&
           now[b.options().id].kernels == 1;
  })) << Registered(etcd)[b.options().id].ToJson().dump();
  b.CallJson("DELETE", "/v1/kernels/k1", nullptr, 200);
  EXPECT_TRUE(Eventually([&] {
    auto now = Registered(etcd);
    return now.count(b.options().id) && now[b.options().id].slots["cpu"].free == 1 && now[b.options().id].kernels == 0;
  }));

  // A drain shows in etcd; a clean stop removes the key at once.
  ASSERT_EQ(Slotctl({"--socket", c.socket_path(), "drain"}).exit_code, 0);
  EXPECT_TRUE(Eventually([&] { return Registered(etcd)[c.options().id].draining; }));
  c.Kill(SIGTERM);
  EXPECT_EQ(Registered(etcd).count(c.options().id), 0u);
}

TEST(Fleet, AnIdRegisteredOnAnotherNodeIsRefusedNamingItsHolder) {
  TestEtcd etcd;
  ASSERT_TRUE(etcd.started());
  AgentProcess first(FleetAgent(etcd, "dup", "node-1", 0));
  ASSERT_TRUE(first.Start()) << first.log();
  AgentProcess second(FleetAgent(etcd, "dup", "node-2", 1));
  ASSERT_FALSE(second.Start());
  EXPECT_EQ(second.exit_code(), 1);
  const std::string log = second.log();
  EXPECT_NE(log.find("agent id " + first.options().id + " is already registered in etcd by node node-1 at 127.0.0.1:" +
                     std::to_string(first.port())),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("give this agent another [agent] id"), std::string::npos) << log;

  // Its own previous run is no holder: killed, it starts again at once and takes its key back.
  first.Kill(SIGKILL);
  ASSERT_TRUE(first.Start()) << first.log();
  EXPECT_EQ(first.CallJson("GET", "/health", nullptr, 200)["etcd"]["state"], "registered");
}

TEST(Fleet, AKilledAgentLeavesWithItsLeaseAndWatchReportsIt) {
  TestEtcd etcd;
  ASSERT_TRUE(etcd.started());
  AgentProcess a(FleetAgent(etcd, "stays", "node-1", 0)), b(FleetAgent(etcd, "dies", "node-2", 1));
  ASSERT_TRUE(a.Start()) << a.log();
  Background watch({SlotctlPath(), "cluster", "--etcd", etcd.url(), "--namespace", kNamespace, "--watch"});
  ASSERT_TRUE(Eventually([&] { return watch.output().find(a.options().id) != std::string::npos; }));
  ASSERT_TRUE(b.Start()) << b.log();
  EXPECT_TRUE(Eventually([&] {
    return watch.output().find("+ " + b.options().id + " (node node-2") != std::string::npos;
  })) << watch.output();
  ASSERT_EQ(Slotctl({"--socket", a.socket_path(), "drain"}).exit_code, 0);
  EXPECT_TRUE(Eventually([&] { return watch.output().find("~ " + a.options().id) != std::string::npos; }))
      << watch.output();

  b.Kill(SIGKILL);  // no clean stop: the key goes when its lease (2 s) runs out
  EXPECT_TRUE(Eventually([&] { return watch.output().find("- " + b.options().id + " (node node-2") != std::string::npos; },
                         std::chrono::seconds(20)))
      << watch.output();
  EXPECT_EQ(Registered(etcd).count(b.options().id), 0u);
  EXPECT_EQ(Registered(etcd).count(a.options().id), 1u);
}

TEST(Fleet, WithoutEtcdKernelsAndTheApiGoOnAndTheAgentRegistersAgain) {
  TestEtcd etcd;
  ASSERT_TRUE(etcd.started());
  AgentProcess a(FleetAgent(etcd, "keeps", "node-1", 0, "0-1"));
  ASSERT_TRUE(a.Start()) << a.log();
  a.CreateKernel(SleepKernel("before", "64m"));

  etcd.Stop();
  EXPECT_TRUE(Eventually([&] { return a.CallJson("GET", "/health", nullptr, 200)["etcd"]["state"] == "unreachable"; }))
      << a.CallJson("GET", "/health", nullptr, 200).dump();
  json health = a.CallJson("GET", "/health", nullptr, 200);
  EXPECT_EQ(health["status"], "ok");
  EXPECT_FALSE(health["etcd"]["detail"].get<std::string>().empty());
  EXPECT_EQ(a.CallJson("GET", "/v1/agent", nullptr, 200)["etcd"]["registered"], false);
  EXPECT_NE(a.Call("GET", "/metrics").body.find("slotd_etcd_registered{agent_id=\"" + a.options().id + "\"} 0"),
            std::string::npos);
  a.CreateKernel(SleepKernel("during", "64m"));  // the local API serves as before
  EXPECT_EQ(a.CallJson("GET", "/v1/kernels/before", nullptr, 200)["state"], "RUNNING");

  ASSERT_TRUE(etcd.Start()) << etcd.log();
  EXPECT_TRUE(Eventually([&] { return a.CallJson("GET", "/health", nullptr, 200)["etcd"]["state"] == "registered"; },
                         std::chrono::seconds(30)));
  // What changed meanwhile is written once etcd is back.
  EXPECT_TRUE(Eventually([&] { return Registered(etcd)[a.options().id].kernels == 2; }));
}

TEST(Fleet, AnIdTakenWhileTheAgentWasAwayIsNotTakenBack) {
  TestEtcd etcd;
  ASSERT_TRUE(etcd.started());
  AgentProcess a(FleetAgent(etcd, "away", "node-1", 0));
  ASSERT_TRUE(a.Start()) << a.log();
  a.CreateKernel(SleepKernel("k", "64m"));
  const std::string key = AgentKey(kNamespace, a.options().id);

  // The agent is cut off (stopped) past its lease; meanwhile an agent of
  // another node registers the same id, as it would from its own machine.
  ::kill(a.pid(), SIGSTOP);
  EtcdClient client(EtcdOptions{{etcd.url()}, "", "", std::chrono::seconds(2), etcd.client_tls()});
  ASSERT_TRUE(Eventually([&] { return Registered(etcd).count(a.options().id) == 0; }, std::chrono::seconds(20)));
  auto lease = client.GrantLease(std::chrono::seconds(60));
  ASSERT_TRUE(lease.ok()) << lease.status().message();
  AgentDocument other;
  other.id = a.options().id;
  other.node = "node-9";
  other.address = "127.0.0.9:6001";
  auto created = client.CreateIfAbsent(key, other.ToJson().dump(), *lease);
  ASSERT_TRUE(created.ok() && created->created);
  ::kill(a.pid(), SIGCONT);

  EXPECT_TRUE(Eventually([&] { return a.CallJson("GET", "/health", nullptr, 200)["etcd"]["state"] == "conflict"; },
                         std::chrono::seconds(20)));
  json health = a.CallJson("GET", "/health", nullptr, 200);
  EXPECT_NE(health["etcd"]["detail"].get<std::string>().find("by node node-9 at 127.0.0.9:6001"), std::string::npos)
      << health.dump();
  EXPECT_EQ(Registered(etcd)[a.options().id].node, "node-9");  // never overwritten
  EXPECT_EQ(a.CallJson("GET", "/v1/kernels/k", nullptr, 200)["state"], "RUNNING");

  // Once the other agent leaves, this one registers again.
  ASSERT_TRUE(client.RevokeLease(*lease).ok());
  EXPECT_TRUE(Eventually([&] { return a.CallJson("GET", "/health", nullptr, 200)["etcd"]["state"] == "registered"; },
                         std::chrono::seconds(30)));
  EXPECT_EQ(Registered(etcd)[a.options().id].node, "node-1");
}

TEST(Fleet, PlaceSpreadsABurstSkipsDrainedAgentsAndSaysWhenTheFleetIsFull) {
  TestEtcd etcd;
  ASSERT_TRUE(etcd.started());
  // Three agents of two cores each; agent c drained: room for four kernels of one core.
  AgentProcess a(FleetAgent(etcd, "pa", "node-1", 0, "0-1")), b(FleetAgent(etcd, "pb", "node-2", 1, "0-1")),
      c(FleetAgent(etcd, "pc", "node-3", 2, "0-1"));
  for (AgentProcess* agent : {&a, &b, &c}) ASSERT_TRUE(agent->Start()) << agent->log();
  ASSERT_EQ(Slotctl({"--socket", c.socket_path(), "drain"}).exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return Registered(etcd)[c.options().id].draining; }));

  // With --wait-ready, a kernel whose check passes only after two seconds.
  auto place = [&](const std::string& id, bool wait_ready = false) {
    std::vector<std::string> args = {"--token-file", a.dir() + "/token", "run", "--place", "--etcd", etcd.url(),
                                     "--namespace", kNamespace, "--id", id, "--cpu", "1", "--mem", "64m"};
    if (wait_ready) args.insert(args.end(), {"--wait-ready", "--health-cmd", "test -f /tmp/up"});
    args.insert(args.end(), {kTestImage, "--", "sh", "-c", "sleep 2 && touch /tmp/up && exec sleep 3600"});
    return Slotctl(args);
  };
  std::vector<std::future<CommandResult>> burst;
  for (int i = 0; i < 4; ++i)
    burst.push_back(std::async(std::launch::async, place, "burst" + std::to_string(i), i == 0));
  for (auto& placed : burst) {
    CommandResult result = placed.get();
    EXPECT_EQ(result.exit_code, 0) << result.err;  // no 422 reaches the user while there is room
    EXPECT_NE(result.err.find("placed on agent"), std::string::npos) << result.err;
  }
  const HttpResponse on_a = a.Call("GET", "/v1/kernels/burst0");
  const json waited = json::parse(on_a.status == 200 ? on_a.body : b.Call("GET", "/v1/kernels/burst0").body);
  EXPECT_EQ(waited["ready"], true) << "run --place --wait-ready returned before the kernel was ready: " << waited.dump();
  EXPECT_EQ(a.CallJson("GET", "/v1/kernels", nullptr, 200)["kernels"].size(), 2u);
  EXPECT_EQ(b.CallJson("GET", "/v1/kernels", nullptr, 200)["kernels"].size(), 2u);
  EXPECT_EQ(c.CallJson("GET", "/v1/kernels", nullptr, 200)["kernels"].size(), 0u);

  CommandResult full = place("one-too-many");
  EXPECT_EQ(full.exit_code, 6) << full.err;
  EXPECT_NE(full.err.find("no agent can take cpu 1, mem 64m"), std::string::npos) << full.err;
  EXPECT_NE(full.err.find("the largest free slice is agent"), std::string::npos) << full.err;
  EXPECT_NE(full.err.find("with cpu 0"), std::string::npos) << full.err;
  EXPECT_NE(full.err.find("(3 agents; 1 draining)"), std::string::npos) << full.err;

  CommandResult elsewhere = Slotctl({"run", "--place", "--etcd", etcd.url(), "--namespace", kNamespace,
                                     "--scaling-group", "gpu", kTestImage, "--", "true"});
  EXPECT_EQ(elsewhere.exit_code, 6);
  EXPECT_NE(elsewhere.err.find("in scaling group gpu"), std::string::npos) << elsewhere.err;
  EXPECT_NE(elsewhere.err.find("3 in other scaling groups"), std::string::npos) << elsewhere.err;
}

// The first ````lang` block after the line `heading` of `doc`, with every
// "/etc/slotd/" and "/etc/prometheus/" in it moved to `dir`/; "" when there
// is none.
std::string RecipeOf(const std::string& doc, const std::string& heading, const std::string& lang,
                     const std::string& dir) {
  const size_t section = doc.find("\n" + heading + "\n");
  if (section == std::string::npos) return "";
  const size_t open = doc.find("\n```" + lang + "\n", section);
  if (open == std::string::npos) return "";
  const size_t body = open + lang.size() + 5;
  const size_t close = doc.find("\n```\n", body);
  if (close == std::string::npos) return "";
  std::string recipe = doc.substr(body, close + 1 - body);
  for (const std::string from : {"/etc/slotd/", "/etc/prometheus/"})
    for (size_t at = recipe.find(from); at != std::string::npos; at = recipe.find(from, at))
      recipe.replace(at, from.size(), dir + "/");
  return recipe;
}

// docs/fleet.md's recipes, run as written (paths under a temporary directory
// instead of /etc): the fleet's tokens file on two agents, Prometheus
// scraping them with the viewer token through slotctl's discovery file, and
// placement with the operator token passing over an agent that lacks the
// file.
TEST(Fleet, TheRecipesOfFleetMdWorkAsWritten) {
  const std::string doc = ReadFile(std::string(SLOTD_SOURCE_DIR) + "/docs/fleet.md");
  TempDir dir;
  const std::string make_tokens = RecipeOf(doc, "## One credential for the fleet", "sh", dir.path());
  ASSERT_NE(make_tokens.find("openssl rand"), std::string::npos) << make_tokens;
  CommandResult made = RunCommand({"sh", "-ec", make_tokens});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const std::string agent_toml = RecipeOf(doc, "## One credential for the fleet", "toml", dir.path());
  ASSERT_EQ(agent_toml.rfind("[agent]\n", 0), 0u) << agent_toml;

  TestEtcd etcd;
  ASSERT_TRUE(etcd.started());
  // a and b have the fleet's file; c, the tightest fit for the kernel below, has not.
  AgentOptions with_file_a = FleetAgent(etcd, "ra", "node-1", 0), with_file_b = FleetAgent(etcd, "rb", "node-2", 1),
               without = FleetAgent(etcd, "rc", "node-3", 2);
  with_file_a.agent_toml = with_file_b.agent_toml = agent_toml.substr(std::string("[agent]\n").size());
  without.memory = "256m";
  AgentProcess a(with_file_a), b(with_file_b), c(without);
  for (AgentProcess* agent : {&a, &b, &c}) ASSERT_TRUE(agent->Start()) << agent->log();

  const std::string scrape = RecipeOf(doc, "## One Prometheus for the fleet", "yaml", dir.path());
  ASSERT_NE(scrape.find("credentials_file: " + dir.path() + "/slotd.token"), std::string::npos) << scrape;
  CommandResult written = Slotctl({"cluster", "--etcd", etcd.url(), "--namespace", kNamespace, "--prometheus-sd",
                                   dir.path() + "/slotd-targets.json"});
  ASSERT_EQ(written.exit_code, 0) << written.err;
  const json groups = json::parse(ReadFile(dir.path() + "/slotd-targets.json"));
  ASSERT_EQ(groups.size(), 3u) << groups.dump();
  EXPECT_EQ(groups[0]["labels"]["node"], "node-1");

  // A real Prometheus, on loopback, with the recipe's scrape config (and a
  // global interval of a second, so that the test need not wait a minute).
  const int port = FreeLoopbackPort();
  WriteFile(dir.path() + "/prometheus.yml", "global:\n  scrape_interval: 1s\n" + scrape);
  Background prometheus({"prometheus", "--config.file=" + dir.path() + "/prometheus.yml",
                         "--storage.tsdb.path=" + dir.path() + "/data",
                         "--web.listen-address=127.0.0.1:" + std::to_string(port)});
  const HttpClient api = HttpClient::Tcp("http://127.0.0.1:" + std::to_string(port));
  std::map<std::string, std::string> up;  // agent address -> "1" or "0"
  std::string last_answer;
  const bool scraped = Eventually(
      [&] {
        auto answer = api.Request("GET", "/api/v1/query?query=up", "", std::chrono::seconds(2));
        if (!answer.ok() || answer->status != 200) return false;
        last_answer = answer->body;
        up.clear();
        const json parsed = json::parse(answer->body, nullptr, false);
        if (!parsed.is_object() || !parsed.contains("data")) return false;
        for (const json& one : parsed["data"]["result"])
          up[one["metric"].value("instance", std::string())] = one["value"][1].get<std::string>();
        return up.size() == 3;
      },
      std::chrono::seconds(60));
  ASSERT_TRUE(scraped) << up.size() << " targets seen in " << last_answer << "; the config:\n" << ReadFile(dir.path() + "/prometheus.yml")
                       << prometheus.output();
  auto address = [](const AgentProcess& agent) { return "127.0.0.1:" + std::to_string(agent.port()); };
  EXPECT_EQ(up[address(a)], "1");
  EXPECT_EQ(up[address(b)], "1");
  EXPECT_EQ(up[address(c)], "0") << "an agent without the fleet's file refuses the viewer token";
  std::set<std::pair<std::string, std::string>> seen;
  Eventually([&] {
    auto answer = api.Request("GET", "/api/v1/query?query=slotd_agent_draining", "", std::chrono::seconds(2));
    if (!answer.ok() || answer->status != 200) return false;
    seen.clear();
    const json parsed = json::parse(answer->body, nullptr, false);
    if (!parsed.is_object() || !parsed.contains("data")) return false;
    for (const json& one : parsed["data"]["result"])
      seen.emplace(one["metric"].value("agent_id", std::string()), one["metric"].value("node", std::string()));
    return seen.size() == 2;
  });
  EXPECT_EQ(seen, (std::set<std::pair<std::string, std::string>>{{a.options().id, "node-1"},
                                                                  {b.options().id, "node-2"}}));

  // Placement with the operator's token: c fits best, refuses, and is named.
  auto place = [&](const std::string& token_file, const std::string& id) {
    return Slotctl({"--token-file", token_file, "run", "--place", "--etcd", etcd.url(), "--namespace", kNamespace,
                    "--id", id, "--cpu", "1", "--mem", "64m", kTestImage, "--", "sleep", "3600"});
  };
  CommandResult placed = place(dir.path() + "/ops.token", "fleet-recipe");
  EXPECT_EQ(placed.exit_code, 0) << placed.err;
  EXPECT_NE(placed.err.find("agent " + c.options().id + " (node node-3, " + address(c) + ") refused the credential"),
            std::string::npos)
      << placed.err;
  EXPECT_NE(placed.err.find("placed on agent"), std::string::npos) << placed.err;
  EXPECT_EQ(c.CallJson("GET", "/v1/kernels", nullptr, 200)["kernels"].size(), 0u);
  const size_t on_a = a.CallJson("GET", "/v1/kernels", nullptr, 200)["kernels"].size();
  EXPECT_EQ(on_a + b.CallJson("GET", "/v1/kernels", nullptr, 200)["kernels"].size(), 1u);

  // The viewer's token may read but not create: the two agents with a core
  // left refuse it (403 with the file, 401 without), and both are named.
  CommandResult viewer = place(dir.path() + "/slotd.token", "fleet-recipe-2");
  EXPECT_EQ(viewer.exit_code, 7) << viewer.err;
  EXPECT_NE(viewer.err.find("every agent with room for cpu 1, mem 64m refused the credential ("), std::string::npos)
      << viewer.err;
  for (const AgentProcess* agent : {on_a == 1 ? &b : &a, &c})
    EXPECT_NE(viewer.err.find(agent->options().id + ": "), std::string::npos) << viewer.err;
  EXPECT_NE(viewer.err.find("role viewer, and POST /v1/kernels needs role operator"), std::string::npos)
      << viewer.err;
}

TEST(Fleet, AnEtcdWithAuthenticationTakesTheAgentsCredentials) {
  TestEtcd etcd;
  ASSERT_TRUE(etcd.started());
  std::string error;
  ASSERT_TRUE(etcd.EnableAuth("s3cret", error)) << error;
  TempDir dir;
  WriteFile(dir.path() + "/password", "s3cret\n");
  WriteFile(dir.path() + "/wrong", "guess\n");
  AgentOptions o = FleetAgent(etcd, "auth", "node-1", 0);
  AgentProcess refused([&] {
    AgentOptions wrong = o;
    wrong.extra_toml += "user = \"root\"\npassword-file = \"" + dir.path() + "/wrong\"\n";
    return wrong;
  }());
  ASSERT_FALSE(refused.Start());
  EXPECT_NE(refused.log().find("refused user \"root\""), std::string::npos) << refused.log();
  EXPECT_NE(refused.log().find("check [etcd] user and password"), std::string::npos) << refused.log();

  o.extra_toml += "user = \"root\"\npassword-file = \"" + dir.path() + "/password\"\n";
  AgentProcess agent(o);
  ASSERT_TRUE(agent.Start()) << agent.log();
  EXPECT_EQ(agent.CallJson("GET", "/health", nullptr, 200)["etcd"]["state"], "registered");

  CommandResult anonymous = Slotctl({"cluster", "--etcd", etcd.url(), "--namespace", kNamespace});
  EXPECT_EQ(anonymous.exit_code, 7) << anonymous.err;
  EXPECT_NE(anonymous.err.find("requires authentication"), std::string::npos) << anonymous.err;
  CommandResult listed = Slotctl({"cluster", "--etcd", etcd.url(), "--namespace", kNamespace, "--etcd-user", "root",
                                  "--etcd-password-file", dir.path() + "/password"});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(listed.out.find(agent.options().id), std::string::npos) << listed.out;
  // --config reads the agent's [etcd]: endpoints, namespace and credentials.
  CommandResult from_config = Slotctl({"--config", agent.config_path(), "cluster"});
  EXPECT_EQ(from_config.exit_code, 0) << from_config.err;
  EXPECT_NE(from_config.out.find(agent.options().id), std::string::npos) << from_config.out;
}

TEST(Fleet, AnEtcdThatWantsClientCertificatesTakesTheAgentsAndSlotctls) {
  TestCertificates certs;
  TestEtcd etcd(certs);
  ASSERT_TRUE(etcd.started()) << etcd.log();
  const TlsClientOptions tls = etcd.client_tls();
  AgentOptions o = FleetAgent(etcd, "tls", "node-1", 0);
  o.extra_toml += "ca-file = \"" + tls.ca_file + "\"\ncert-file = \"" + tls.cert_file + "\"\nkey-file = \"" +
                  tls.key_file + "\"\n";
  AgentProcess agent(o);
  ASSERT_TRUE(agent.Start()) << agent.log();
  EXPECT_EQ(agent.CallJson("GET", "/health", nullptr, 200)["etcd"]["state"], "registered");
  EXPECT_EQ(Registered(etcd).count(agent.options().id), 1u);

  CommandResult listed = Slotctl({"cluster", "--etcd", etcd.url(), "--namespace", kNamespace, "--etcd-cacert",
                                  tls.ca_file, "--etcd-cert", tls.cert_file, "--etcd-key", tls.key_file});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(listed.out.find(agent.options().id), std::string::npos) << listed.out;
  // --config reads the agent's [etcd]: its endpoint and its TLS files.
  CommandResult from_config = Slotctl({"--config", agent.config_path(), "cluster"});
  EXPECT_EQ(from_config.exit_code, 0) << from_config.err;
  EXPECT_NE(from_config.out.find(agent.options().id), std::string::npos) << from_config.out;
}

TEST(Fleet, ClusterNeedsAnEtcdAndSaysWhenItCannotReachIt) {
  CommandResult none = Slotctl({"cluster"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("give --etcd URL"), std::string::npos) << none.err;
  CommandResult down = Slotctl({"cluster", "--etcd", "http://127.0.0.1:" + std::to_string(FreeLoopbackPort())});
  EXPECT_EQ(down.exit_code, 3) << down.err;
  EXPECT_NE(down.err.find("etcd cannot be reached"), std::string::npos) << down.err;
}

}  // namespace
}  // namespace slotd::testing
