// Upgrades and downgrades of the Debian package on a node, with kernels
// running: the packages of packaging.upgrade_packages (tests/upgrade_packages.sh)
// are installed with dpkg into a throw-away root, and the agents run the
// binaries installed there against the real engine at $DOCKER_HOST.
#include <filesystem>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/kernel.h"
#include "common/version.h"
#include "integration/harness.h"

namespace slotd::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::string kPackages = SLOTD_UPGRADE_PACKAGES_DIR;

// A throw-away root that dpkg installs packages into, as on a node: its own
// dpkg database, and a static busybox as /bin/sh, because dpkg runs the
// maintainer scripts chrooted into the root. Nothing in it runs systemd, so
// the scripts do what they do on a node without it.
class PackageRoot {
 public:
  PackageRoot() {
    for (const char* dir : {"/var/lib/dpkg/info", "/var/lib/dpkg/updates", "/var/log", "/bin"})
      fs::create_directories(path() + dir);
    WriteFile(path() + "/var/lib/dpkg/status", "");
    fs::copy_file("/usr/bin/busybox", path() + "/bin/busybox");
    fs::create_symlink("busybox", path() + "/bin/sh");
  }
  const std::string& path() const { return dir_.path(); }

  // dpkg -i of `deb` (an upgrade or a downgrade over what is installed);
  // a failure carries dpkg's output. The root holds no libc package, hence
  // --force-depends.
  ::testing::AssertionResult Install(const std::string& deb) const { return Dpkg({"--force-depends", "-i", deb}); }
  // dpkg --purge slotd.
  ::testing::AssertionResult Purge() const { return Dpkg({"--purge", "slotd"}); }
  // The version dpkg records for slotd in this root.
  std::string InstalledVersion() const {
    return RunCommand({"dpkg-query", "--admindir=" + path() + "/var/lib/dpkg", "-W", "-f=${Version}", "slotd"}).out;
  }
  std::string Slotd() const { return path() + "/usr/bin/slotd"; }
  std::string Slotctl() const { return path() + "/usr/bin/slotctl"; }

 private:
  ::testing::AssertionResult Dpkg(std::vector<std::string> args) const {
    args.insert(args.begin(), {"dpkg", "--root=" + path(), "--log=" + path() + "/var/log/dpkg.log"});
    CommandResult result = RunCommand(args);
    if (result.exit_code == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "dpkg exited " << result.exit_code << ": " << result.out << result.err;
  }

  TempDir dir_;
};

// Agent i of a node: core i, mock devices, its own ports, the shared claims dir.
AgentOptions NodeAgent(const std::string& name, int index, const std::string& claims_dir, const std::string& binary) {
  AgentOptions o;
  o.id = "up-" + RunTag() + "-" + name;
  o.node = "upgrade-node";
  o.cores = std::to_string(index);
  o.memory = "512m";
  o.port_first = 32500 + 10 * index;
  o.port_last = o.port_first + 9;
  o.claims_dir = claims_dir;
  o.binary = binary;
  o.extra_toml = "[resource.mock]\ndevices = [{ id = \"u" + std::to_string(index) + "a\", memory = \"1g\" }, { id = \"u" +
                 std::to_string(index) + "b\", memory = \"1g\" }]\n";
  return o;
}

// What must not change about a kernel across a restart of its agent: the
// agent's record (state, allocation, exit code, ports) and the engine's
// (container id, start time, init pid, whether it runs).
struct KernelFacts {
  json record;
  std::string container_id;
  std::string started_at;
  int pid = 0;
  bool running = false;

  bool operator==(const KernelFacts&) const = default;
};

std::ostream& operator<<(std::ostream& out, const KernelFacts& f) {
  return out << f.record.dump() << " container " << f.container_id << " started " << f.started_at << " pid "
             << f.pid << (f.running ? " running" : " not running");
}

// Each kernel of `agent`, by id: the fields of its record that an adoption
// must keep, and its container as the engine reports it.
std::map<std::string, KernelFacts> Facts(const AgentProcess& agent) {
  std::map<std::string, KernelFacts> facts;
  json kernels = agent.CallJson("GET", "/v1/kernels", nullptr, 200)["kernels"];
  for (const json& k : kernels) {
    KernelFacts f;
    for (const char* field : {"kernel_id", "state", "allocations", "exit_code", "ports", "image", "container_id"})
      if (k.contains(field)) f.record[field] = k[field];
    f.container_id = k.value("container_id", "");
    auto info = Engine().Inspect(f.container_id);
    EXPECT_TRUE(info.ok()) << f.container_id << ": " << info.status().message();
    if (info.ok()) {
      f.started_at = info->started_at;
      EXPECT_FALSE(f.started_at.empty()) << f.container_id;
      f.pid = info->pid;
      f.running = info->running;
    }
    facts[k["kernel_id"].get<std::string>()] = f;
  }
  return facts;
}

// Two kernels: one that ran and exited 3 (TERMINATED, its resources free
// again), then one that runs, holding the agent's core, a mock device, 64m
// and a port.
void CreateKernels(const AgentProcess& agent) {
  agent.CreateKernel({{"kernel_id", "done"},
                      {"image", kTestImage},
                      {"command", {"sh", "-c", "exit 3"}},
                      {"resources", {{"cpu", 1}, {"mem", "32m"}}}});
  agent.WaitForState("done", "TERMINATED");
  json k = agent.CreateKernel({{"kernel_id", "run"},
                               {"image", kTestImage},
                               {"command", {"sleep", "3600"}},
                               {"ports", {8080}},
                               {"resources", {{"cpu", 1}, {"mem", "64m"}, {"mock.device", 1}}}});
  EXPECT_EQ(k["state"], "RUNNING") << k.dump();
}

std::string AgentVersion(const AgentProcess& agent) {
  return agent.CallJson("GET", "/v1/agent", nullptr, 200).value("version", "");
}

// "0.1.0" of "0.1.0-1", a package version.
std::string Release(const std::string& package_version) {
  return package_version.substr(0, package_version.find('-'));
}

// Stops `agent` as systemd does (SIGTERM), expecting a clean exit.
void StopCleanly(AgentProcess& agent) {
  agent.Kill(SIGTERM);
  EXPECT_EQ(agent.exit_code(), 0) << agent.log();
}

// Each test: the packages of packaging.upgrade_packages (skipped when it
// could not make them) and a fresh root to install them into.
class Upgrade : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(previous) || !fs::exists(current))
      GTEST_SKIP() << "no packages in " << kPackages << " (see packaging.upgrade_packages)";
  }

  const std::string previous = kPackages + "/previous.deb";  // the previous release's
  const std::string current = kPackages + "/current.deb";    // this build's
  PackageRoot root;
};

TEST_F(Upgrade, RollingRestartsAfterAPackageUpgradeAdoptEveryKernelExactly) {
  ASSERT_TRUE(root.Install(previous));
  const std::string old_version = Release(root.InstalledVersion());
  ASSERT_NE(old_version, std::string(kSlotdVersion)) << "the previous release must be another version";
  EXPECT_EQ(RunCommand({root.Slotd(), "--version"}).out.rfind("slotd " + old_version + " ", 0), 0u);
  // An agent's config in /etc/slotd, the operator's: the package never ships or changes one.
  const std::string operator_config = root.path() + "/etc/slotd/gpu1-a.toml";
  WriteFile(operator_config, "# an agent of this node, the operator's\n");

  TempDir claims;
  std::vector<std::unique_ptr<AgentProcess>> agents;
  for (int i = 0; i < 2; ++i) {
    agents.push_back(std::make_unique<AgentProcess>(NodeAgent(i == 0 ? "a" : "b", i, claims.path(), root.Slotd())));
    ASSERT_TRUE(agents.back()->Start()) << agents.back()->log();
    EXPECT_EQ(AgentVersion(*agents.back()), old_version);
    CreateKernels(*agents.back());
  }
  std::vector<std::map<std::string, KernelFacts>> before;
  for (const auto& agent : agents) {
    before.push_back(Facts(*agent));
    ASSERT_EQ(before.back().size(), 2u);
    EXPECT_TRUE(before.back()["run"].running);
    EXPECT_EQ(before.back()["done"].record["exit_code"], 3);
  }

  // The new package over the old one, as apt does; the agents keep running
  // the old binary until each is restarted.
  ASSERT_TRUE(root.Install(current));
  EXPECT_EQ(Release(root.InstalledVersion()), kSlotdVersion);
  EXPECT_EQ(RunCommand({root.Slotd(), "--version"}).out.rfind(std::string("slotd ") + kSlotdVersion + " ", 0), 0u);
  EXPECT_EQ(ReadFile(operator_config), "# an agent of this node, the operator's\n");
  for (const auto& agent : agents) EXPECT_EQ(AgentVersion(*agent), old_version);

  // One by one, as `systemctl restart slotd@a; systemctl restart slotd@b`.
  for (size_t i = 0; i < agents.size(); ++i) {
    AgentProcess& agent = *agents[i];
    StopCleanly(agent);
    ASSERT_TRUE(agent.Start()) << agent.log();
    EXPECT_EQ(AgentVersion(agent), kSlotdVersion);
    for (size_t j = 0; j < agents.size(); ++j)
      EXPECT_EQ(Facts(*agents[j]), before[j]) << "agent " << agents[j]->options().id << " after restarting "
                                              << agent.options().id << " under " << kSlotdVersion;
    // Mid-way the node runs both versions; the new slotctl sees both agents
    // through the claims directory they share.
    CommandResult node = RunCommand({root.Slotctl(), "--json", "node", "--claims-dir", claims.path()});
    EXPECT_EQ(node.exit_code, 0) << node.err;
    for (const auto& other : agents)
      EXPECT_NE(node.out.find("\"" + other->options().id + "\""), std::string::npos) << node.out;
  }
  EXPECT_NE(agents[0]->log().find("adopted kernel run (RUNNING)"), std::string::npos) << agents[0]->log();

  // The adopted kernels are whole: exec, delete, and their resources serve a new kernel.
  for (const auto& agent : agents) {
    json out = agent->CallJson("POST", "/v1/kernels/run/exec", {{"command", {"echo", "still-here"}}}, 200);
    EXPECT_EQ(out.value("stdout", ""), "still-here\n") << out.dump();
    agent->CallJson("DELETE", "/v1/kernels/run", nullptr, 200);
    json k = agent->CreateKernel({{"kernel_id", "after"},
                                  {"image", kTestImage},
                                  {"command", {"sleep", "3600"}},
                                  {"resources", {{"cpu", 1}, {"mem", "64m"}, {"mock.device", 2}}}});
    EXPECT_EQ(k["state"], "RUNNING") << k.dump();
  }

  // /etc/slotd/slotd.env is the package's conffile: an operator's edit
  // survives installing the package again; purging removes it, and never
  // touches the agents' configs.
  const std::string options_file = root.path() + "/etc/slotd/slotd.env";
  ASSERT_TRUE(fs::exists(options_file));
  WriteFile(options_file, "SLOTD_OPTIONS=\"--log-level debug\"\n");
  ASSERT_TRUE(root.Install(current));
  EXPECT_EQ(ReadFile(options_file), "SLOTD_OPTIONS=\"--log-level debug\"\n");
  EXPECT_TRUE(root.Purge());
  EXPECT_FALSE(fs::exists(root.Slotd()));
  EXPECT_FALSE(fs::exists(options_file));
  EXPECT_EQ(ReadFile(operator_config), "# an agent of this node, the operator's\n");
}

// Every container the agent `agent_id` owns, by name, as the engine reports
// it: what a refused start must leave as it was.
std::map<std::string, std::string> ContainersOf(const std::string& agent_id) {
  std::map<std::string, std::string> containers;
  auto listed = Engine().List({std::string(label::kOwner) + "=" + agent_id});
  EXPECT_TRUE(listed.ok()) << listed.status().message();
  if (!listed.ok()) return containers;
  for (const ContainerInfo& c : *listed) {
    auto info = Engine().Inspect(c.id);
    EXPECT_TRUE(info.ok()) << info.status().message();
    if (!info.ok()) continue;
    json labels(info->labels);
    containers[info->name] = info->id + " " + info->state + " started " + info->started_at + " pid " +
                             std::to_string(info->pid) + " labels " + labels.dump();
  }
  return containers;
}

// The agent's files (config, state, scratch) and the node's claims
// directory: each file with its size and modification time, each directory
// by name. Aside: the agent's log, and the lock and liveness files that any
// start takes before it reads anything (they hold its pid, and say that it
// runs only while it does).
std::string FilesOf(const AgentProcess& agent, const std::string& claims_dir) {
  return RunCommand({"find", agent.dir(), claims_dir, "(", "-name", "*.log", "-o", "-name", "*.lock", "-o", "-name",
                     "*.live", ")", "-prune", "-o", "-type", "f", "-printf", "%p %s %T@\n", "-o", "-type", "d",
                     "-printf", "%p/\n"})
      .out;
}

// The labels a later slotd would write: those of a real kernel of `agent`,
// under another kernel id, in a label format this version does not know.
Labels LabelsOfALaterFormat(const std::string& container_id, const std::string& kernel_id) {
  auto info = Engine().Inspect(container_id);
  EXPECT_TRUE(info.ok()) << info.status().message();
  Labels labels = info.ok() ? info->labels : Labels{};
  labels[label::kKernelId] = kernel_id;
  labels[label::kFormat] = std::to_string(label::kCurrentFormat + 1);
  return labels;
}

TEST_F(Upgrade, DowngradeKeepsKernelsOfItsFormatAndRefusesANewerFormatTouchingNothing) {
  ASSERT_TRUE(root.Install(current));
  TempDir claims;
  AgentProcess agent(NodeAgent("down", 0, claims.path(), root.Slotd()));
  ASSERT_TRUE(agent.Start()) << agent.log();
  CreateKernels(agent);
  const std::map<std::string, KernelFacts> before = Facts(agent);

  // The previous release reads this version's labels (the same format):
  // a downgrade keeps every kernel.
  StopCleanly(agent);
  ASSERT_TRUE(root.Install(previous));
  ASSERT_TRUE(agent.Start()) << agent.log();
  EXPECT_NE(AgentVersion(agent), kSlotdVersion);
  EXPECT_EQ(Facts(agent), before);

  // A container that a later slotd wrote, in a label format after this
  // one's: the older agent refuses to start, naming it, and touches nothing.
  StopCleanly(agent);
  ContainerSpec spec;
  spec.name = "slotd-" + agent.options().id + "-k-later";
  spec.image = kTestImage;
  spec.command = {"sleep", "3600"};
  spec.labels = LabelsOfALaterFormat(before.at("run").container_id, "later");
  auto later = Engine().Create(spec);
  ASSERT_TRUE(later.ok()) << later.status().message();
  ASSERT_TRUE(Engine().Start(*later).ok());
  const auto containers_before = ContainersOf(agent.options().id);
  ASSERT_EQ(containers_before.size(), 3u);
  const std::string files_before = FilesOf(agent, claims.path());

  EXPECT_FALSE(agent.Start());
  EXPECT_EQ(agent.exit_code(), 1);
  const std::string log = agent.log();
  EXPECT_NE(log.find("cannot start: container " + spec.name + " was written by a newer slotd (label format " +
                     std::to_string(label::kCurrentFormat + 1)),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("docker rm -f " + spec.name), std::string::npos) << log;
  EXPECT_EQ(ContainersOf(agent.options().id), containers_before);
  EXPECT_EQ(FilesOf(agent, claims.path()), files_before);

  // What the message says to do: without that container, every kernel is adopted.
  ASSERT_TRUE(Engine().Remove(*later, true).ok());
  ASSERT_TRUE(agent.Start()) << agent.log();
  EXPECT_EQ(Facts(agent), before);
}

}  // namespace
}  // namespace slotd::testing
