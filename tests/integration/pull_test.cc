// Kernels of images the node has never seen, pulled through the agent from a
// real registry (Debian's docker-registry on a loopback port, with htpasswd
// authentication): progress, the digest policy, credentials, a registry
// that is down or stalled, one pull for many creates; and the user kernels
// run as.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "integration/harness.h"
#include "integration/registry.h"

namespace slotd::testing {
namespace {

using nlohmann::json;

constexpr char kUser[] = "slotd";
constexpr char kPassword[] = "s3cret-pw";

// An agent that pulls with `policy`, sending the credentials of `auth_file`.
AgentOptions PullingAgent(const std::string& name, const std::string& policy, const std::string& auth_file,
                          const std::string& more_toml = "") {
  AgentOptions o;
  o.id = "it-" + RunTag() + "-" + name;
  o.cores = "0-1";
  o.auto_pull = policy;
  o.container_toml = (auth_file.empty() ? "" : "registry-auth-file = \"" + auth_file + "\"\n") + more_toml;
  return o;
}

json Kernel(const std::string& id, const std::string& image) {
  return {{"kernel_id", id}, {"image", image}, {"command", {"sleep", "3600"}}, {"resources", {{"cpu", 1}, {"mem", "64m"}}}};
}

// The id of the image the engine has under `image`; "" when it has none.
std::string ImageId(const std::string& image) {
  auto info = Engine().InspectImage(image);
  return info.ok() ? info->id : "";
}

// How many times `text` occurs in `haystack`.
size_t Occurrences(const std::string& haystack, const std::string& text) {
  size_t n = 0;
  for (size_t at = haystack.find(text); at != std::string::npos; at = haystack.find(text, at + 1)) ++n;
  return n;
}

// Sends the agent SIGHUP and waits until it has read its credentials again.
void ReadCredentialsAgain(const AgentProcess& agent) {
  const std::string done = "SIGHUP: read the registry credentials again";
  const size_t before = Occurrences(agent.log(), done);
  ::kill(agent.pid(), SIGHUP);
  for (int i = 0; i < 100 && Occurrences(agent.log(), done) == before; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_GT(Occurrences(agent.log(), done), before) << agent.log();
}

// Nothing of a refused create stays: no kernel, nothing used.
void ExpectNothingHeld(const AgentProcess& agent) {
  EXPECT_EQ(agent.CallJson("GET", "/v1/kernels", nullptr, 200)["kernels"].size(), 0u);
  const json resources = agent.CallJson("GET", "/v1/agent", nullptr, 200)["resources"];
  EXPECT_EQ(resources["cpu"]["used"], 0);
  EXPECT_EQ(resources["mem"]["used"], 0);
}

TEST(Pull, AKernelOfAnImageNeverSeenOnTheNodeIsPulledWithItsProgressShown) {
  TestRegistry registry(kUser, kPassword);
  ASSERT_TRUE(registry.started()) << registry.log();
  const std::string image = registry.host() + "/team/job:" + RunTag();
  ASSERT_FALSE(registry.PushNewImage("team/job:" + RunTag(), 4 << 20).empty());
  ASSERT_EQ(ImageId(image), "");
  TempDir dir;
  registry.WriteAuthFile(dir.path() + "/auth.json", kUser, kPassword);
  AgentProcess agent(PullingAgent("pull", "tag", dir.path() + "/auth.json"));
  ASSERT_TRUE(agent.Start()) << agent.log();

  const CommandResult run = Slotctl({"--socket", agent.socket_path(), "run", "--id", "job", "--cpu", "1", "--mem",
                                     "64m", image, "--", "sleep", "3600"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.err.find("pulling " + image + ": "), std::string::npos) << run.err;  // plain lines: no terminal
  EXPECT_NE(run.err.find("pulled " + image + ": "), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find(" 0 B"), std::string::npos) << run.err;  // no byte count an engine did not send
  EXPECT_EQ(agent.CallJson("GET", "/v1/kernels/job", nullptr, 200)["state"], "RUNNING");
  EXPECT_NE(ImageId(image), "");

  const CommandResult images = Slotctl({"--socket", agent.socket_path(), "--json", "images"});
  ASSERT_EQ(images.exit_code, 0) << images.err;
  const json listed = json::parse(images.out);
  auto it = std::find_if(listed.begin(), listed.end(), [&](const json& i) {
    return std::find(i["tags"].begin(), i["tags"].end(), image) != i["tags"].end();
  });
  ASSERT_NE(it, listed.end()) << images.out;
  EXPECT_EQ((*it)["kernels"], json::array({"job"}));
  EXPECT_GT((*it)["size"].get<int64_t>(), 4 << 20);
  EXPECT_TRUE((*it)["last_used"].is_number());
  agent.CallJson("DELETE", "/v1/kernels/job", nullptr, 200);
  (void)Engine().RemoveImage(ImageId(image));
}

TEST(Pull, SlotctlPullBringsAnImageAndDigestPullsATagPushedAgain) {
  TestRegistry registry;
  ASSERT_TRUE(registry.started()) << registry.log();
  const std::string name_tag = "team/moving:" + RunTag();
  const std::string image = registry.host() + "/" + name_tag;
  ASSERT_FALSE(registry.PushNewImage(name_tag, 1 << 20).empty());
  AgentProcess agent(PullingAgent("digest", "tag", ""));
  ASSERT_TRUE(agent.Start()) << agent.log();
  const CommandResult pulled = Slotctl({"--socket", agent.socket_path(), "pull", image});
  ASSERT_EQ(pulled.exit_code, 0) << pulled.err;
  EXPECT_NE(pulled.err.find("pulled " + image), std::string::npos) << pulled.err;
  const std::string first_id = ImageId(image);
  ASSERT_NE(first_id, "");

  // The tag now names other content in the registry; the node keeps the old.
  ASSERT_FALSE(registry.PushNewImage(name_tag, 1 << 20).empty());
  ASSERT_EQ(RunCommand({"docker", "tag", first_id, image}).exit_code, 0);
  agent.CreateKernel(Kernel("by-tag", image));  // tag: the node has it, no pull
  EXPECT_EQ(ImageId(image), first_id);
  const size_t pulls_before = Occurrences(agent.log(), "pulling image " + image);
  json by_digest = Kernel("by-digest", image);
  by_digest["pull"] = "digest";
  if (EngineIsPodman()) {
    // Podman cannot be asked which digest a tag names: said, nothing pulled or held.
    const HttpResponse cannot = agent.Call("POST", "/v1/kernels", by_digest.dump());
    EXPECT_EQ(cannot.status, 409) << cannot.body;
    EXPECT_NE(cannot.body.find("cannot ask a registry which digest a tag names"), std::string::npos) << cannot.body;
    EXPECT_NE(cannot.body.find("\\\"pull\\\": \\\"missing\\\""), std::string::npos) << cannot.body;
    EXPECT_EQ(Occurrences(agent.log(), "pulling image " + image), pulls_before);
    EXPECT_EQ(agent.CallJson("GET", "/v1/agent", nullptr, 200)["resources"]["cpu"]["used"], 1);  // by-tag's
    // The moved tag's content, by a pull Podman can do: an explicit one.
    const CommandResult pulled_again = Slotctl({"--socket", agent.socket_path(), "pull", image});
    EXPECT_EQ(pulled_again.exit_code, 0) << pulled_again.err;
    by_digest["pull"] = "tag";
  }
  agent.CreateKernel(by_digest);
  EXPECT_EQ(Occurrences(agent.log(), "pulling image " + image), pulls_before + 1);
  EXPECT_NE(ImageId(image), first_id);  // the content the tag names now

  // A request may not ask for a looser policy than the agent's.
  json looser = Kernel("looser", image);
  looser["pull"] = "none";
  const HttpResponse refused = agent.Call("POST", "/v1/kernels", looser.dump());
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_NE(refused.body.find("looser than this agent's [container] auto-pull"), std::string::npos) << refused.body;
  for (const char* id : {"by-tag", "by-digest"}) agent.CallJson("DELETE", std::string("/v1/kernels/") + id, nullptr, 200);
  (void)Engine().RemoveImage(ImageId(image));
  (void)Engine().RemoveImage(first_id);
}

TEST(Pull, MissingOrWrongCredentialsAndUnknownImagesAreRefusedNamingTheRegistry) {
  TestRegistry registry(kUser, kPassword);
  ASSERT_TRUE(registry.started()) << registry.log();
  const std::string image = registry.host() + "/team/private:" + RunTag();
  ASSERT_FALSE(registry.PushNewImage("team/private:" + RunTag(), 1 << 20).empty());
  TempDir dir;
  registry.WriteAuthFile(dir.path() + "/auth.json", kUser, "wrong-password");
  AgentProcess agent(PullingAgent("creds", "tag", dir.path() + "/auth.json"));
  ASSERT_TRUE(agent.Start()) << agent.log();

  HttpResponse wrong = agent.Call("POST", "/v1/kernels", Kernel("k", image).dump());
  EXPECT_EQ(wrong.status, 403) << wrong.body;
  EXPECT_NE(wrong.body.find("registry " + registry.host() + " refused the credentials"), std::string::npos)
      << wrong.body;
  ExpectNothingHeld(agent);

  // The right password, read again on SIGHUP.
  registry.WriteAuthFile(dir.path() + "/auth.json", kUser, kPassword);
  ReadCredentialsAgain(agent);
  HttpResponse right = agent.Call("POST", "/v1/kernels", Kernel("k", image).dump());
  EXPECT_EQ(right.status, 201) << right.body;
  agent.CallJson("DELETE", "/v1/kernels/k", nullptr, 200);

  HttpResponse unknown = agent.Call("POST", "/v1/kernels", Kernel("u", registry.host() + "/team/none:1").dump());
  EXPECT_EQ(unknown.status, 400) << unknown.body;
  EXPECT_NE(unknown.body.find("is not in registry " + registry.host()), std::string::npos) << unknown.body;

  WriteFile(dir.path() + "/auth.json", "{\"auths\": {}}");
  ReadCredentialsAgain(agent);
  ASSERT_TRUE(Engine().RemoveImage(ImageId(image)).ok());
  HttpResponse none = agent.Call("POST", "/v1/kernels", Kernel("n", image).dump());
  EXPECT_EQ(none.status, 403) << none.body;
  EXPECT_NE(none.body.find("registry-auth-file has none for it"), std::string::npos) << none.body;
  ExpectNothingHeld(agent);
}

TEST(Pull, ARegistryThatIsDownOrStalledFailsThePullClearly) {
  TestRegistry registry;
  ASSERT_TRUE(registry.started()) << registry.log();
  const std::string image = registry.host() + "/team/stall:" + RunTag();
  ASSERT_FALSE(registry.PushNewImage("team/stall:" + RunTag(), 1 << 20).empty());
  AgentProcess agent(PullingAgent("stall", "tag", "", "pull-stall-timeout = \"2s\"\n"));
  ASSERT_TRUE(agent.Start()) << agent.log();

  registry.Pause();
  const auto started = std::chrono::steady_clock::now();
  HttpResponse stalled = agent.Call("POST", "/v1/kernels", Kernel("s", image).dump());
  EXPECT_EQ(stalled.status, 504) << stalled.body;
  EXPECT_NE(stalled.body.find("made no progress for 2s ([container] pull-stall-timeout)"), std::string::npos)
      << stalled.body;
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30));
  ExpectNothingHeld(agent);
  registry.Resume();

  registry.Stop();
  HttpResponse down = agent.Call("POST", "/v1/kernels", Kernel("d", image).dump());
  if (EngineIsPodman()) {
    // Podman retries a registry it cannot connect to instead of failing:
    // the pull makes no progress, and the stall timeout ends it.
    EXPECT_EQ(down.status, 504) << down.body;
    EXPECT_NE(down.body.find("made no progress for 2s"), std::string::npos) << down.body;
  } else {
    EXPECT_EQ(down.status, 503) << down.body;
    EXPECT_NE(down.body.find("registry " + registry.host() + " cannot be reached"), std::string::npos) << down.body;
  }
  ExpectNothingHeld(agent);
}

// Ten concurrent asks for one missing image: creates of kernels (as many as
// the agent's two cores hold, each needing a core of its own) and pulls.
TEST(Pull, TenConcurrentAsksForOneMissingImageMakeOnePull) {
  TestRegistry registry;
  ASSERT_TRUE(registry.started()) << registry.log();
  const std::string image = registry.host() + "/team/shared:" + RunTag();
  ASSERT_FALSE(registry.PushNewImage("team/shared:" + RunTag(), 8 << 20).empty());
  AgentProcess agent(PullingAgent("ten", "tag", ""));
  ASSERT_TRUE(agent.Start()) << agent.log();
  constexpr int kCreates = 2;
  std::vector<std::thread> asks;
  std::vector<long> statuses(10);
  std::atomic<int> creates_answered{0};
  for (int i = 0; i < 10; ++i) {
    asks.emplace_back([&, i] {
      statuses[i] = i < kCreates
                        ? agent.Call("POST", "/v1/kernels", Kernel("k" + std::to_string(i), image).dump()).status
                        : agent.Call("POST", "/v1/images/pull", json{{"image", image}}.dump()).status;
      if (i < kCreates) ++creates_answered;
    });
  }
  // While the pull is under way the kernels are PULLING.
  bool saw_pulling = false;
  while (creates_answered < kCreates && !saw_pulling) {
    const json listed = agent.CallJson("GET", "/v1/kernels", nullptr, 200);
    for (const json& k : listed["kernels"]) saw_pulling = saw_pulling || k["state"] == "PULLING";
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (auto& t : asks) t.join();
  std::vector<long> expected(10, 200);
  std::fill(expected.begin(), expected.begin() + kCreates, 201);
  EXPECT_EQ(statuses, expected);
  EXPECT_TRUE(saw_pulling);
  EXPECT_EQ(Occurrences(agent.log(), "pulling image " + image), 1u) << agent.log();
  for (int i = 0; i < kCreates; ++i) agent.CallJson("DELETE", "/v1/kernels/k" + std::to_string(i), nullptr, 200);
  (void)Engine().RemoveImage(ImageId(image));
}

TEST(Users, KernelsRunAsKernelUidAndGidAndOwnTheirScratch) {
  AgentOptions options;
  options.id = "it-" + RunTag() + "-uid";
  options.cores = "0-1";
  options.allow_root = false;
  options.container_toml = "kernel-uid = 4321\nkernel-gid = 5432\n";
  AgentProcess agent(options);
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel(Kernel("u", kTestImage));
  const json out = agent.CallJson("POST", "/v1/kernels/u/exec",
                                  {{"command", {"sh", "-c", "id -u; id -g; touch /home/work/mine && echo ok"}}}, 200);
  EXPECT_EQ(out["stdout"], "4321\n5432\nok\n") << out;
  struct stat scratch {};
  ASSERT_EQ(::stat((agent.dir() + "/var/scratch/u").c_str(), &scratch), 0);
  EXPECT_EQ(scratch.st_uid, 4321u);
  EXPECT_EQ(scratch.st_gid, 5432u);
  agent.CallJson("DELETE", "/v1/kernels/u", nullptr, 200);
}

TEST(Users, AKernelThatWouldRunAsRootIsRefusedUnlessRootIsAllowed) {
  AgentOptions options;
  options.id = "it-" + RunTag() + "-root";
  options.cores = "0-1";
  options.allow_root = false;
  AgentProcess agent(options);
  ASSERT_TRUE(agent.Start()) << agent.log();
  HttpResponse refused = agent.Call("POST", "/v1/kernels", Kernel("r", kTestImage).dump());
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_NE(refused.body.find("runs as root (it names no user) and [container] allow-root is false"),
            std::string::npos)
      << refused.body;
  EXPECT_NE(refused.body.find("kernel-uid"), std::string::npos) << refused.body;
  ExpectNothingHeld(agent);
  EXPECT_FALSE(std::filesystem::exists(agent.dir() + "/var/scratch/r"));
}

}  // namespace
}  // namespace slotd::testing
