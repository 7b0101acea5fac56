// Warm pools through the real binaries and engine: the agent keeps its
// pool's kernels started (WARM: left out of the kernel list, counted in
// /v1/agent), gives a matching create one of them under the create's
// session and labels, refills the pool, adopts warm and given kernels
// exactly after a SIGKILL, never gives one kernel to two creates, and makes
// a kernel of its own for a create that does not match.
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "integration/harness.h"

namespace slotd::testing {
namespace {

using nlohmann::json;

// A two-core agent with one pool of `count` kernels of the test image
// sleeping on 100m and 16m.
AgentOptions PoolAgent(const std::string& name, int count) {
  AgentOptions o = TwoCoreAgent(name);
  o.extra_toml = std::string("[[pool]]\nname = \"small\"\nimage = \"") + kTestImage +
                 "\"\ncommand = [\"sleep\", \"3600\"]\ncpu = \"100m\"\nmem = \"16m\"\ncount = " +
                 std::to_string(count) + "\n";
  return o;
}

// A create the pool serves: its image, command and shape, no kernel id.
json Matching(const std::string& session) {
  return {{"image", kTestImage},
          {"command", {"sleep", "3600"}},
          {"resources", {{"cpu", "100m"}, {"mem", "16m"}}},
          {"session_id", session},
          {"labels", {{"team", session}}}};
}

// The pool "small" of /v1/agent once it has `warm` kernels ready (up to a minute).
json WaitForWarm(const AgentProcess& agent, int warm) {
  json pool;
  for (int i = 0; i < 600; ++i) {
    pool = agent.CallJson("GET", "/v1/agent", nullptr, 200)["warm"]["pools"][0];
    if (pool["warm"] == warm && pool["making"] == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(pool["warm"], warm) << pool.dump() << "\n" << agent.log();
  return pool;
}

// The ids of the kernels GET /v1/kernels (with ?warm=1: also the WARM ones) lists, by state.
std::map<std::string, std::string> Listed(const AgentProcess& agent, bool warm) {
  std::map<std::string, std::string> states;
  const json list = agent.CallJson("GET", warm ? "/v1/kernels?warm=1" : "/v1/kernels", nullptr, 200);
  for (const json& k : list["kernels"]) states[k["kernel_id"]] = k["state"];
  return states;
}

bool Exists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0;
}

TEST(WarmPool, AMatchingCreateIsGivenAWarmKernelThatARestartAdoptsAsGiven) {
  AgentProcess agent(PoolAgent("warm", 2));
  ASSERT_TRUE(agent.Start()) << agent.log();
  WaitForWarm(agent, 2);
  EXPECT_TRUE(Listed(agent, false).empty());
  const std::map<std::string, std::string> warm = Listed(agent, true);
  ASSERT_EQ(warm.size(), 2u);
  for (const auto& [id, state] : warm) {
    EXPECT_EQ(state, "WARM") << id;
    EXPECT_EQ(agent.CallJson("GET", "/v1/kernels/" + id, nullptr, 200)["warm_pool"], "small");
  }
  // Their resources are held: 2 x 100m of the shared pool.
  EXPECT_EQ(agent.CallJson("GET", "/v1/agent", nullptr, 200)["resources"]["cpu_shared"]["used"], 200);
  const CommandResult info = Slotctl({"--socket", agent.socket_path(), "info"});
  EXPECT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("small  " + std::string(kTestImage) + "  2/2   0"), std::string::npos) << info.out;

  const json given = agent.CreateKernel(Matching("s1"));
  EXPECT_EQ(given["state"], "RUNNING");
  EXPECT_TRUE(warm.count(given["kernel_id"])) << given.dump();
  EXPECT_EQ(given["session_id"], "s1");
  EXPECT_EQ(given["labels"], (json{{"team", "s1"}}));
  EXPECT_TRUE(given["warm_pool"].is_null());
  const std::string id = given["kernel_id"];
  EXPECT_TRUE(Exists(agent.dir() + "/var/warm-claims/" + id + ".json"));
  // It runs what the pool's kernels run.
  EXPECT_EQ(RunIn(agent, id, "echo ok"), "ok\n");

  // The pool refills; the kernel list shows the given kernel only.
  WaitForWarm(agent, 2);
  EXPECT_EQ(Listed(agent, false), (std::map<std::string, std::string>{{id, "RUNNING"}}));
  const std::map<std::string, std::string> before = Listed(agent, true);
  ASSERT_EQ(before.size(), 3u);

  // SIGKILLed and started again: the given kernel is the create's, the warm ones warm.
  agent.Kill(SIGKILL);
  ASSERT_TRUE(agent.Start()) << agent.log();
  EXPECT_EQ(Listed(agent, true), before);
  const json adopted = agent.CallJson("GET", "/v1/kernels/" + id, nullptr, 200);
  EXPECT_EQ(adopted["session_id"], "s1");
  EXPECT_EQ(adopted["labels"], (json{{"team", "s1"}}));
  EXPECT_EQ(adopted["created_at"], given["created_at"]);
  WaitForWarm(agent, 2);

  // A create that asks for more than the pool's kernels can be given makes its own.
  json with_env = Matching("s2");
  with_env["env"] = {{"A", "1"}};
  const json own = agent.CreateKernel(with_env);
  EXPECT_EQ(before.count(own["kernel_id"]), 0u) << own.dump();
  EXPECT_EQ(agent.CallJson("GET", "/v1/agent", nullptr, 200)["warm"]["pools"][0]["warm"], 2);

  // Deleted, a given kernel leaves no record behind.
  agent.CallJson("DELETE", "/v1/kernels/" + id, nullptr, 200);
  EXPECT_FALSE(Exists(agent.dir() + "/var/warm-claims/" + id + ".json"));
}

// Creates racing for a pool of two: each gets a kernel of its own, warm or
// made, and no warm kernel is given twice.
TEST(WarmPool, CreatesRacingForThePoolEachGetAKernelOfTheirOwn) {
  AgentProcess agent(PoolAgent("race", 2));
  ASSERT_TRUE(agent.Start()) << agent.log();
  WaitForWarm(agent, 2);
  const std::map<std::string, std::string> warm = Listed(agent, true);
  constexpr int kCreates = 6;
  std::vector<json> created(kCreates);
  std::vector<std::thread> threads;
  for (int i = 0; i < kCreates; ++i)
    threads.emplace_back([&, i] {
      const HttpResponse r = agent.Call("POST", "/v1/kernels", Matching("r" + std::to_string(i)).dump());
      created[i] = r.status == 201 ? json::parse(r.body) : json{{"status", r.status}, {"body", r.body}};
    });
  for (std::thread& t : threads) t.join();
  std::set<std::string> ids;
  for (int i = 0; i < kCreates; ++i) {
    ASSERT_TRUE(created[i].contains("kernel_id")) << created[i].dump();
    EXPECT_EQ(created[i]["session_id"], "r" + std::to_string(i));
    ids.insert(created[i]["kernel_id"]);
  }
  EXPECT_EQ(ids.size(), static_cast<size_t>(kCreates));
  // The pool's two were given (to two of them): the race was for them.
  int given = 0;
  for (const std::string& id : ids) given += static_cast<int>(warm.count(id));
  EXPECT_EQ(given, 2);
  const std::map<std::string, std::string> listed = Listed(agent, false);
  EXPECT_EQ(listed.size(), static_cast<size_t>(kCreates));
  for (const std::string& id : ids) EXPECT_EQ(listed.count(id), 1u) << id;
}

// A client that lists the warm kernels (or guesses an id) and creates with
// one's id and the pool's exact shape repeats nobody's create: 409, and the
// kernel is later given to a matching create, and only to it.
TEST(WarmPool, ACreateNamingAWarmKernelsIdIsRefusedAndTheKernelGoesToOneCreateOnly) {
  AgentProcess agent(PoolAgent("steal", 1));
  ASSERT_TRUE(agent.Start()) << agent.log();
  WaitForWarm(agent, 1);
  const std::map<std::string, std::string> warm = Listed(agent, true);
  ASSERT_EQ(warm.size(), 1u);
  const std::string id = warm.begin()->first;
  // The warm kernel's own request, as its labels hold it: its id, and the session the id gives.
  json stolen = {{"kernel_id", id},
                 {"image", kTestImage},
                 {"command", {"sleep", "3600"}},
                 {"resources", {{"cpu", "100m"}, {"mem", "16m"}}}};
  json with_session = stolen;
  with_session["session_id"] = id;
  json with_labels = Matching("x");
  with_labels["kernel_id"] = id;
  for (const json& body : {stolen, with_session, with_labels}) {
    const HttpResponse r = agent.Call("POST", "/v1/kernels", body.dump());
    EXPECT_EQ(r.status, 409) << body.dump() << "\n" << r.body;
    const json answer = json::parse(r.body, nullptr, false);
    const std::string message = answer.is_object() && answer.contains("error") ? answer["error"].value("message", "") : "";
    EXPECT_NE(message.find("kept by warm pool \"small\""), std::string::npos) << r.body;
  }
  EXPECT_TRUE(Listed(agent, false).empty());
  EXPECT_EQ(Listed(agent, true), warm);

  const json given = agent.CreateKernel(Matching("s1"));
  EXPECT_EQ(given["kernel_id"], id);
  EXPECT_EQ(given["session_id"], "s1");
  // Given, it is the create's: the stolen request is another kernel's, still refused.
  EXPECT_EQ(agent.Call("POST", "/v1/kernels", stolen.dump()).status, 409);
  // The next matching create is given the refilled pool's kernel or makes its own, never this one.
  const json next = agent.CreateKernel(Matching("s2"));
  EXPECT_NE(next["kernel_id"], id);
  EXPECT_EQ(agent.CallJson("GET", "/v1/kernels/" + id, nullptr, 200)["session_id"], "s1");
}

// The agent's config loses its pool and the agent starts again: the pool's
// kernels never given are removed, their containers gone and their cores
// free for an exclusive create; the given one stays its create's.
TEST(WarmPool, KernelsOfAPoolRemovedFromTheConfigAreRemovedAtTheNextStart) {
  AgentOptions options = TwoCoreAgent("gone");
  options.extra_toml = std::string("[[pool]]\nname = \"whole\"\nimage = \"") + kTestImage +
                       "\"\ncommand = [\"sleep\", \"3600\"]\ncpu = \"1\"\nmem = \"16m\"\ncount = 2\n";
  AgentProcess agent(options);
  ASSERT_TRUE(agent.Start()) << agent.log();
  WaitForWarm(agent, 2);
  const std::map<std::string, std::string> warm = Listed(agent, true);
  ASSERT_EQ(warm.size(), 2u);
  json matching = {{"image", kTestImage}, {"command", {"sleep", "3600"}}, {"resources", {{"cpu", 1}, {"mem", "16m"}}}};
  const std::string given = agent.CreateKernel(matching)["kernel_id"];
  ASSERT_TRUE(warm.count(given)) << given;

  agent.Kill(SIGKILL);
  agent.SetExtraToml("");
  ASSERT_TRUE(agent.Start()) << agent.log();
  const std::string owner = std::string("ai.backend.owner=") + options.id;
  Result<std::vector<ContainerInfo>> left = Engine().List({owner});
  ASSERT_TRUE(left.ok()) << left.status().message();
  std::set<std::string> kernels;
  for (const ContainerInfo& c : *left) kernels.insert(c.labels.at("ai.backend.kernel-id"));
  EXPECT_EQ(kernels, (std::set<std::string>{given})) << agent.log();
  EXPECT_EQ(Listed(agent, true), (std::map<std::string, std::string>{{given, "RUNNING"}}));
  EXPECT_TRUE(agent.CallJson("GET", "/v1/agent", nullptr, 200)["warm"]["pools"].empty());
  // The removed kernel's core is free: with the given kernel deleted, an exclusive create takes both.
  agent.CallJson("DELETE", "/v1/kernels/" + given, nullptr, 200);
  const json big = agent.CreateKernel({{"image", kTestImage},
                                       {"command", {"sleep", "3600"}},
                                       {"resources", {{"cpu", 2}, {"mem", "16m"}}}});
  EXPECT_EQ(big["state"], "RUNNING");
}

// A pool whose image the engine lacks takes no core: a shared kernel the
// agent adopts never has its cpuset moved (no `update` of its container)
// while the pool tries; /v1/agent, slotctl info and slotd check say why.
TEST(WarmPool, APoolWhoseImageIsMissingTakesNoCoreAndSaysWhy) {
  AgentProcess agent(TwoCoreAgent("noimage"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  const json shared = agent.CreateKernel({{"kernel_id", "shared-" + RunTag()},
                                          {"image", kTestImage},
                                          {"command", {"sleep", "3600"}},
                                          {"resources", {{"cpu", "100m"}, {"mem", "16m"}}}});
  const std::string container = shared["container_id"];
  agent.Kill(SIGKILL);

  // Every update of the shared kernel's container from here on.
  Result<std::unique_ptr<DockerEngine>> watcher = DockerEngine::FromHost(DockerHost());
  ASSERT_TRUE(watcher.ok()) << watcher.status().message();
  std::mutex mu;
  std::condition_variable cv;
  bool connected = false;
  int updates = 0;  // guarded by mu
  std::atomic<bool> stop{false};
  auto stream = std::async(std::launch::async, [&] {
    return (*watcher)->StreamEvents(
        {std::string("ai.backend.owner=") + agent.options().id}, {"update"},
        [&] {
          std::lock_guard<std::mutex> lock(mu);
          connected = true;
          cv.notify_all();
        },
        [&](const EngineEvent& e) {
          std::lock_guard<std::mutex> lock(mu);
          if (e.id == container) ++updates;
        },
        stop);
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return connected; }));
  }

  const std::string missing = "slotd-test/missing-" + RunTag() + ":1";
  agent.SetExtraToml("[[pool]]\nname = \"small\"\nimage = \"" + missing +
                     "\"\ncommand = [\"sleep\", \"3600\"]\ncpu = \"1\"\nmem = \"16m\"\ncount = 1\n");
  ASSERT_TRUE(agent.Start()) << agent.log();
  json pool;
  for (int i = 0; i < 300 && (pool.empty() || pool["error"].is_null()); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    pool = agent.CallJson("GET", "/v1/agent", nullptr, 200)["warm"]["pools"][0];
  }
  stop = true;
  EXPECT_EQ(stream.get().code(), Status::Code::kOk);
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(updates, 0) << "the shared kernel's cpuset moved while the pool tried";
  }
  ASSERT_TRUE(pool["error"].is_string()) << pool.dump() << "\n" << agent.log();
  EXPECT_NE(pool["error"].get<std::string>().find("image " + missing + " not found on this node's engine"),
            std::string::npos)
      << pool.dump();
  EXPECT_TRUE(pool["retry_at"].is_number_integer()) << pool.dump();
  EXPECT_EQ(pool["warm"], 0);
  EXPECT_EQ(pool["making"], 0);
  EXPECT_EQ(agent.CallJson("GET", "/v1/agent", nullptr, 200)["resources"]["cpu"]["used"], 0);
  EXPECT_EQ(Listed(agent, true).size(), 1u);

  const CommandResult info = Slotctl({"--socket", agent.socket_path(), "info"});
  EXPECT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("pool small: cannot make a kernel: image " + missing + " not found"), std::string::npos)
      << info.out;

  const CommandResult check = Slotd({"check", agent.config_path()});
  EXPECT_NE(check.out.find("warning: " + agent.config_path() + ": [[pool]] \"small\" names image " + missing +
                           ", which the engine at "),
            std::string::npos)
      << check.out << check.err;
}

}  // namespace
}  // namespace slotd::testing
