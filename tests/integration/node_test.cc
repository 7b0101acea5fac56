// The node-wide commands through the real binaries: `slotd check` compares
// agent configs as a set that will share one node (files only), and
// `slotctl node` lists the live agents of a claims directory with their
// resources and running kernels, asking each one's API.
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include <gtest/gtest.h>

#include "common/units.h"
#include "config/config.h"
#include "integration/harness.h"

namespace slotd::testing {
namespace {

using nlohmann::json;

// Whether `text` has `line` as one whole line.
bool HasLine(const std::string& text, const std::string& line) {
  std::istringstream lines(text);
  for (std::string l; std::getline(lines, l);)
    if (l == line) return true;
  return false;
}

// One agent.toml for `slotd check`; Clean(dir, i) shares nothing with Clean(dir, j).
struct CheckAgent {
  std::string id;
  std::string listen = "127.0.0.1:0";
  std::string agent_toml;  // added to [agent] verbatim
  std::string ipc;
  std::string var;
  std::string claims_dir;
  int port_first = 0;
  int port_last = 0;
  std::string cores;
  std::string memory = "256m";
  std::string mock_allowed;  // TOML array of the allowed mock devices
  std::string container_toml;  // added to [container] verbatim
  std::string extra_toml;    // appended verbatim

  // Agent i of a clean set in `dir`: core i, mock device m<i>, its own id,
  // paths and port range, the set's one claims directory.
  static CheckAgent Clean(const std::string& dir, int i) {
    CheckAgent a;
    const std::string n = std::to_string(i);
    a.id = "chk-" + n;
    a.ipc = dir + "/ipc" + n;
    a.var = dir + "/var" + n;
    a.claims_dir = dir + "/claims";
    a.port_first = 40000 + 100 * i;
    a.port_last = a.port_first + 9;
    a.cores = n;
    a.mock_allowed = "[\"m" + n + "\"]";
    return a;
  }

  // Writes the config to `path` and returns `path`.
  std::string Write(const std::string& path) const {
    WriteFile(path, "[agent]\n"
                    "id = \"" + id + "\"\n"
                    "rpc-listen-addr = \"" + listen + "\"\n"
                    "ipc-base-path = \"" + ipc + "\"\n"
                    "var-base-path = \"" + var + "\"\n" + agent_toml +
                    "[node]\n"
                    "claims-dir = \"" + claims_dir + "\"\n"
                    "[container]\n"
                    "port-range = [" + std::to_string(port_first) + ", " + std::to_string(port_last) + "]\n" +
                    container_toml +
                    "[resource.cpu]\n"
                    "allowed-cores = \"" + cores + "\"\n"
                    "[resource.memory]\n"
                    "size = \"" + memory + "\"\n"
                    "[resource.mock]\n"
                    "devices = [{ id = \"m0\", memory = \"1g\" }, { id = \"m1\", memory = \"1g\" },\n"
                    "           { id = \"m2\", memory = \"1g\" }]\n"
                    "allowed-devices = " + mock_allowed + "\n" + extra_toml);
    return path;
  }
};

// Checks a clean pair (cores 0 and 1 of this machine) after `change` made
// them share one thing; `change` returns the clashing value as the line
// names it ("cpu core 0"). Expects exit 1, exactly the one line
// "clash: <a> and <b> both claim <value>" among the problems, and the summary.
void ExpectClash(const std::function<std::string(CheckAgent& a, CheckAgent& b)>& change) {
  TempDir dir;
  CheckAgent a = CheckAgent::Clean(dir.path(), 0), b = CheckAgent::Clean(dir.path(), 1);
  const std::string value = change(a, b);
  const std::string path_a = a.Write(dir.path() + "/a.toml"), path_b = b.Write(dir.path() + "/b.toml");
  CommandResult r = Slotd({"check", path_a, path_b});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const std::string line = "clash: " + path_a + " and " + path_b + " both claim " + value;
  EXPECT_TRUE(HasLine(r.out, line)) << "expected the line\n" << line << "\nin:\n" << r.out;
  EXPECT_NE(r.out.find("\nslotd check: 1 problem among 2 configs; give each agent"), std::string::npos) << r.out;
}

TEST(Check, AScratchRootHoldingTheAgentsOwnFilesIsRefusedByCheckAndAtStartAndNothingIsRemoved) {
  TempDir outer;
  AgentOptions o;
  o.id = "it-" + RunTag() + "-scratch-root";
  o.ipc_dir = outer.path() + "/ipc";
  o.claims_dir = outer.path() + "/claims";
  o.container_toml = "scratch-root = \"" + outer.path() + "\"\n";
  AgentProcess agent(o);
  std::filesystem::create_directories(o.claims_dir);
  WriteFile(o.claims_dir + "/other-agent.json", "{}");

  CommandResult r = Slotd({"check", agent.config_path()});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  for (const std::string& what : {"agent.ipc-base-path " + o.ipc_dir, "node.claims-dir " + o.claims_dir})
    EXPECT_NE(r.out.find("problem: " + agent.config_path() + ": container.scratch-root: " + outer.path() + " holds " +
                         what),
              std::string::npos)
        << what << "\n" << r.out;
  EXPECT_FALSE(agent.Start());
  EXPECT_NE(agent.log().find("container.scratch-root: " + outer.path() + " holds agent.ipc-base-path"),
            std::string::npos)
      << agent.log();
  EXPECT_TRUE(std::filesystem::exists(o.claims_dir + "/other-agent.json"));
}

TEST(Check, ItWarnsOfSecretsOthersMayReadAndOfUlimitsAboveTheAgentsOwnHardLimits) {
  TempDir dir;
  rlimit files{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &files), 0);
  if (files.rlim_max == RLIM_INFINITY) GTEST_SKIP() << "this process has no hard limit of open files to go above";
  AgentOptions o;
  o.id = "it-" + RunTag() + "-warn";
  o.token = "s3cret";
  o.container_toml = "registry-auth-file = \"" + dir.path() + "/auth.json\"\n"
                     "ulimits = { nofile = " + std::to_string(files.rlim_max + 1) + " }\n";
  AgentProcess agent(o);
  WriteFile(dir.path() + "/auth.json", R"({"auths": {}})");
  ASSERT_EQ(::chmod((dir.path() + "/auth.json").c_str(), 0640), 0);
  ASSERT_EQ(::chmod((agent.dir() + "/token").c_str(), 0644), 0);

  CommandResult r = Slotd({"check", agent.config_path()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;  // warnings do not stop an agent
  const std::string warning = "warning: " + agent.config_path() + ": ";
  for (const std::string& line :
       {warning + "agent.token-file: " + agent.dir() + "/token holds a secret but users other than its owner may read "
                  "or write it (mode 0644); chmod 600 " + agent.dir() + "/token",
        warning + "container.registry-auth-file: " + dir.path() + "/auth.json holds a secret but users other than its "
                  "owner may read or write it (mode 0640); chmod 600 " + dir.path() + "/auth.json"})
    EXPECT_TRUE(HasLine(r.out, line)) << line << "\n" << r.out;
  EXPECT_NE(r.out.find(warning + "container.ulimits: nofile = " + std::to_string(files.rlim_max + 1) +
                       " is above this process's own hard limit of " + std::to_string(files.rlim_max)),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("(mind the warnings"), std::string::npos) << r.out;

  ASSERT_EQ(::chmod((dir.path() + "/auth.json").c_str(), 0600), 0);
  ASSERT_EQ(::chmod((agent.dir() + "/token").c_str(), 0600), 0);
  r = Slotd({"check", agent.config_path()});
  EXPECT_EQ(r.out.find("holds a secret"), std::string::npos) << r.out;
}

TEST(Check, ItReportsWhatTheAgentWouldRefuseToStartOnAndTheAgentRefusesIt) {
  TempDir dir;
  CheckAgent a = CheckAgent::Clean(dir.path(), 0);
  WriteFile(dir.path() + "/var-is-a-file", "x");
  a.var = dir.path() + "/var-is-a-file";
  a.ipc = dir.path() + "/" + std::string(110, 'i');
  WriteFile(dir.path() + "/empty.token", "\n");
  a.extra_toml = "";
  std::string path = a.Write(dir.path() + "/a.toml");
  // token-file belongs to [agent]: put it right after the id.
  std::string text = ReadFile(path);
  text.insert(text.find("\n") + 1, "token-file = \"" + dir.path() + "/empty.token\"\n");
  WriteFile(path, text);
  WriteFile(dir.path() + "/claims", "not a directory");

  CommandResult r = Slotd({"check", path});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  for (const std::string& what : std::vector<std::string>{"agent.var-base-path: " + a.var + " exists and is not a directory",
                                  "node.claims-dir: " + dir.path() + "/claims exists and is not a directory",
                                  "agent.ipc-base-path: the API socket", "agent.token-file: token file " + dir.path() +
                                  "/empty.token has no token"})
    EXPECT_NE(r.out.find("problem: " + path + ": " + what), std::string::npos) << what << "\n" << r.out;

  r = Slotd({"--config", path});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("agent.var-base-path: " + a.var + " exists and is not a directory"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("agent.token-file"), std::string::npos) << r.err;

  // A token file that is a directory, and var-base-path under /proc.
  text.replace(text.find(dir.path() + "/empty.token"), (dir.path() + "/empty.token").size(), dir.path());
  text.replace(text.find(a.var), a.var.size(), "/proc/slotd");
  WriteFile(path, text);
  r = Slotd({"check", path});
  EXPECT_NE(r.out.find("is a directory; point token-file at a file"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("agent.var-base-path: /proc/slotd is on /proc"), std::string::npos) << r.out;
}

// The check before one agent's start (slotd@.service's ExecStartPre, the
// package's slotd-check-node CONFIG): that agent's own problems stop it;
// another agent's broken file, or a clash between two other agents, does not.
TEST(Check, OneAgentsStartIsStoppedByItsOwnProblemsOnlyNeverByAnothersFile) {
  TempDir dir;
  CheckAgent a = CheckAgent::Clean(dir.path(), 0), b = CheckAgent::Clean(dir.path(), 1),
             c = CheckAgent::Clean(dir.path(), 2);
  c.id = b.id;  // b and c clash with each other, not with a
  c.cores = b.cores;  // (and this machine may have two cores only)
  const std::string path_a = a.Write(dir.path() + "/a.toml"), path_b = b.Write(dir.path() + "/b.toml"),
                    path_c = c.Write(dir.path() + "/c.toml"), broken = dir.path() + "/broken.toml";
  WriteFile(broken, "[agent\nid = \"typo\"\n");
  auto check_node = [&](const std::string& config) {
    return RunCommand({"env", "SLOTD_CONFIG_DIR=" + dir.path(), std::string("SLOTD=") + SLOTD_BIN_DIR + "/slotd", "sh",
                       std::string(SLOTD_SOURCE_DIR) + "/packaging/systemd/slotd-check-node", config});
  };
  CommandResult mine = check_node(path_a);
  EXPECT_EQ(mine.exit_code, 0) << mine.out << mine.err;
  EXPECT_TRUE(HasLine(mine.out, "note: " + broken + " does not load, so " + path_a +
                                    " was checked without it (its own agent's start will say why)"))
      << mine.out;
  EXPECT_EQ(mine.out.find("clash:"), std::string::npos) << "b and c's clash is not a's: " << mine.out;

  CommandResult clashing = check_node(path_b);
  EXPECT_EQ(clashing.exit_code, 1) << clashing.out << clashing.err;
  EXPECT_TRUE(HasLine(clashing.out, "clash: " + path_b + " and " + path_c + " both claim agent id " + b.id))
      << clashing.out;
  CommandResult own_typo = check_node(broken);
  EXPECT_EQ(own_typo.exit_code, 2) << own_typo.out << own_typo.err;
  EXPECT_NE(own_typo.out.find("error: " + broken), std::string::npos) << own_typo.out;
  // Without a config, the whole set counts, as `slotd check` of every file.
  CommandResult all = RunCommand({"env", "SLOTD_CONFIG_DIR=" + dir.path(),
                                  std::string("SLOTD=") + SLOTD_BIN_DIR + "/slotd", "sh",
                                  std::string(SLOTD_SOURCE_DIR) + "/packaging/systemd/slotd-check-node"});
  EXPECT_EQ(all.exit_code, 2) << all.out << all.err;
  CommandResult outsider = Slotd({"check", "--for", dir.path() + "/elsewhere.toml", path_a, path_b});
  EXPECT_EQ(outsider.exit_code, 2) << outsider.out;
  EXPECT_NE(outsider.out.find("is not one of the files given"), std::string::npos) << outsider.out;
}

TEST(Check, ACleanSetOfThreeConfigsPassesWithExitZero) {
  TempDir dir;
  // This machine may have fewer than three cores: check for a node with three.
  std::vector<std::string> args = {"check", "--node-cores", "0-2", "--node-memory", "4g"};
  for (int i = 0; i < 3; ++i)
    args.push_back(CheckAgent::Clean(dir.path(), i).Write(dir.path() + "/agent" + std::to_string(i) + ".toml"));
  CommandResult r = Slotd(args);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "slotd check: 3 configs, no clashes: they can share one node\n");
}

TEST(Check, AgentsThatWouldCollectTheNodesImagesAtDifferentMarksAreWarned) {
  TempDir dir;
  CheckAgent a = CheckAgent::Clean(dir.path(), 0), b = CheckAgent::Clean(dir.path(), 1);
  a.container_toml = "image-gc-high = 85\nimage-gc-low = 80\n";
  const std::string path_a = a.Write(dir.path() + "/a.toml"), path_b = b.Write(dir.path() + "/b.toml");
  CommandResult r = Slotd({"check", "--node-cores", "0-1", "--node-memory", "4g", path_a, path_b});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;  // a warning, not a clash
  EXPECT_TRUE(HasLine(r.out, "warning: " + path_a + " and " + path_b +
                                 " collect the node's images at different marks (container.image-gc-high/low 85/80 "
                                 "and 0/80); give every agent of the node the same"))
      << r.out;
}

TEST(Check, ACleanPairPassesOnThisMachinesOwnCoresAndMemory) {
  TempDir dir;
  CommandResult r = Slotd({"check", CheckAgent::Clean(dir.path(), 0).Write(dir.path() + "/a.toml"),
                           CheckAgent::Clean(dir.path(), 1).Write(dir.path() + "/b.toml")});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "slotd check: 2 configs, no clashes: they can share one node\n");
}

TEST(Check, SameAgentIdIsAClash) {
  ExpectClash([](CheckAgent& a, CheckAgent& b) {
    b.id = a.id;
    return "agent id chk-0";
  });
}

TEST(Check, SameFixedApiPortIsAClash) {
  ExpectClash([](CheckAgent& a, CheckAgent& b) {
    a.listen = "127.0.0.1:46123";
    b.listen = "0.0.0.0:46123";
    b.agent_toml = "tls-self-signed = true\n";  // an address other hosts reach needs TLS
    return "API port (agent.rpc-listen-addr) 46123";
  });
}

TEST(Check, SameIpcPathIsAClash) {
  ExpectClash([](CheckAgent& a, CheckAgent& b) {
    b.ipc = a.ipc;
    return "agent.ipc-base-path " + a.ipc;
  });
}

TEST(Check, SameVarPathIsAClash) {
  ExpectClash([](CheckAgent& a, CheckAgent& b) {
    b.var = a.var;
    return "agent.var-base-path " + a.var;
  });
}

TEST(Check, OverlappingPortRangesAreAClashNamingTheOverlap) {
  ExpectClash([](CheckAgent& a, CheckAgent& b) {
    a.port_first = 40000, a.port_last = 40009;
    b.port_first = 40005, b.port_last = 40020;
    return "container.port-range 40005-40009";
  });
}

TEST(Check, AnOverlappingCoreIsAClash) {
  ExpectClash([](CheckAgent& a, CheckAgent& b) {
    b.cores = "0-1";
    return "cpu core 0";
  });
}

TEST(Check, AnOverlappingMockDeviceIsAClash) {
  ExpectClash([](CheckAgent& a, CheckAgent& b) {
    b.mock_allowed = "[\"m0\", \"m1\"]";
    return "mock device m0";
  });
}

TEST(Check, MemorySharesOverTheNodesTotalAreAProblemNamingEveryShare) {
  TempDir dir;
  const uint64_t node = HostFacts::Detect().memory_bytes;
  ASSERT_GT(node, 0u);
  // Each share fits on its own (LoadConfig accepts it); the two together do not.
  const uint64_t share = node / 1024 * 3 / 5 * 1024;
  CheckAgent a = CheckAgent::Clean(dir.path(), 0), b = CheckAgent::Clean(dir.path(), 1);
  a.memory = b.memory = FormatSize(share);
  const std::string path_a = a.Write(dir.path() + "/a.toml"), path_b = b.Write(dir.path() + "/b.toml");
  CommandResult r = Slotd({"check", path_a, path_b});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const std::string start = "clash: memory shares add up to " + FormatSize(2 * share);
  EXPECT_NE(r.out.find(start), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(", more than the node's " + FormatSize(node)), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(path_a + " " + FormatSize(share)), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(path_b + " " + FormatSize(share)), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("lower resource.memory.size"), std::string::npos) << r.out;
}

TEST(Check, DifferentClaimsDirectoriesAreAProblem) {
  TempDir dir;
  CheckAgent a = CheckAgent::Clean(dir.path(), 0), b = CheckAgent::Clean(dir.path(), 1);
  b.claims_dir = dir.path() + "/elsewhere";
  const std::string path_a = a.Write(dir.path() + "/a.toml"), path_b = b.Write(dir.path() + "/b.toml");
  CommandResult r = Slotd({"check", path_a, path_b});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(HasLine(r.out, "mismatch: " + path_a + " and " + path_b + " name different node.claims-dir (" +
                                 a.claims_dir + ", " + b.claims_dir +
                                 "), so their agents cannot see each other's claims"))
      << r.out;
}

TEST(Check, AnUnparseableFileExitsTwoNamingItsLineWhileTheOthersAreStillCompared) {
  TempDir dir;
  CheckAgent a = CheckAgent::Clean(dir.path(), 0), b = CheckAgent::Clean(dir.path(), 1);
  b.id = a.id;
  const std::string path_a = a.Write(dir.path() + "/a.toml"), path_b = b.Write(dir.path() + "/b.toml");
  const std::string bad = dir.path() + "/bad.toml";
  WriteFile(bad, "[agent]\nid = \"ok\"\nrpc-listen-addr = \n");
  CommandResult r = Slotd({"check", path_a, bad, path_b});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("error: " + bad + ":3"), std::string::npos) << r.out;
  EXPECT_TRUE(HasLine(r.out, "clash: " + path_a + " and " + path_b + " both claim agent id chk-0")) << r.out;
  EXPECT_NE(r.out.find("slotd check: 1 of 3 configs did not load; fix the errors above"), std::string::npos) << r.out;

  CommandResult missing = Slotd({"check", path_a, dir.path() + "/nope.toml"});
  EXPECT_EQ(missing.exit_code, 2) << missing.out;
  EXPECT_NE(missing.out.find("error: cannot read config file " + dir.path() + "/nope.toml"), std::string::npos)
      << missing.out;
}

TEST(Check, CudaAllowListsAreResolvedThroughNvmlAndAMissingGpuIsReported) {
  TempDir dir;
  const std::string nvml_file = dir.path() + "/nvml.json";
  WriteFile(nvml_file, json{{"gpus", {{{"uuid", "GPU-aaaa"}, {"name", "Fake H200"}, {"memory", "141g"},
                                       {"minor", 0}, {"pci_bus_id", "00000000:10:00.0"}, {"numa_node", 0}},
                                      {{"uuid", "GPU-bbbb"}, {"name", "Fake H200"}, {"memory", "141g"},
                                       {"minor", 1}, {"pci_bus_id", "00000000:11:00.0"}, {"numa_node", 0}}}}}
                           .dump());
  setenv("SLOTD_FAKE_NVML_FILE", nvml_file.c_str(), 1);
  // Agent i with [resource.cuda] on the fake NVML, written to <name>.toml.
  auto cuda = [&](int i, const std::string& name, const std::string& allowed) {
    CheckAgent c = CheckAgent::Clean(dir.path(), i);
    c.extra_toml = "[resource.cuda]\nnvml-library = \"" + std::string(SLOTD_FAKE_NVML_PATH) +
                   "\"\nallowed-devices = " + allowed + "\n";
    return c.Write(dir.path() + "/" + name + ".toml");
  };
  // GPU index 0 and its UUID are one GPU.
  const std::string by_index = cuda(0, "by-index", "[\"0\"]"), by_uuid = cuda(1, "by-uuid", "[\"GPU-aaaa\"]");
  CommandResult r = Slotd({"check", by_index, by_uuid});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(HasLine(r.out, "clash: " + by_index + " and " + by_uuid + " both claim cuda device GPU-aaaa")) << r.out;

  const std::string other = cuda(1, "other", "[\"1\"]");
  r = Slotd({"check", by_index, other});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;

  const std::string absent = cuda(1, "absent", "[\"7\"]");
  r = Slotd({"check", by_index, absent});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("missing: " + absent + ": resource.cuda.allowed-devices: \"7\" matches no GPU on this node"),
            std::string::npos)
      << r.out;
  unsetenv("SLOTD_FAKE_NVML_FILE");
}

TEST(Check, CudaEntriesAreComparedAsWrittenWithANoteWhenNvmlCannotLoad) {
  TempDir dir;
  // Agent i with [resource.cuda] on an NVML library that does not exist, written to <name>.toml.
  auto cuda = [&](int i, const std::string& name, const std::string& allowed) {
    CheckAgent c = CheckAgent::Clean(dir.path(), i);
    c.extra_toml = "[resource.cuda]\nnvml-library = \"" + dir.path() + "/no-libnvidia-ml.so.1\"\n" + allowed;
    return c.Write(dir.path() + "/" + name + ".toml");
  };
  const std::string a = cuda(0, "a", "allowed-devices = [\"0\", \"1\"]\n"),
                    b = cuda(1, "b", "allowed-devices = [\"1\"]\n");
  CommandResult r = Slotd({"check", a, b});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(HasLine(r.out, "clash: " + a + " and " + b + " both claim cuda device 1")) << r.out;
  EXPECT_NE(r.out.find("note: " + a + ": resource.cuda.allowed-devices compared as written, not checked against "
                       "this node's GPUs"),
            std::string::npos)
      << r.out;

  // Without an allow-list a config takes every GPU: that clashes with any GPU of another.
  const std::string every = cuda(1, "every", "");
  r = Slotd({"check", a, every});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(HasLine(r.out, "clash: " + a + " and " + every + " both claim cuda devices: " + every +
                                 " takes every one (no resource.cuda.allowed-devices)"))
      << r.out;
}

TEST(Check, CheckIsASubcommandAndRunningNeedsConfig) {
  CommandResult r = Slotd({});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--config FILE (to run an agent; or `slotd check FILE...` to compare configs, `slotd split` "
                       "to write them) is required"),
            std::string::npos)
      << r.err;
  TempDir dir;
  const std::string path = CheckAgent::Clean(dir.path(), 0).Write(dir.path() + "/a.toml");
  r = Slotd({"--config", path, "check", path});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("check excludes --config"), std::string::npos) << r.err;
  // `slotd --config FILE` still runs an agent: every Node test below starts its agents that way.
}

// --- slotctl node ---

// Agent i of a node sharing `claims_dir`: core i, mock device m<i>, its own port range.
AgentOptions NodeAgent(const std::string& claims_dir, int i) {
  AgentOptions o;
  o.id = "it-" + RunTag() + "-node" + std::to_string(i);
  o.cores = std::to_string(i);
  o.memory = "256m";
  o.claims_dir = claims_dir;
  o.port_first = 34000 + 100 * i;
  o.port_last = o.port_first + 9;
  o.extra_toml = "[resource.mock]\ndevices = [{ id = \"m" + std::to_string(i) + "\", memory = \"1g\" }]\n";
  return o;
}

// The whitespace-separated fields of the table row of `agent_id` in `out`; empty when absent.
std::vector<std::string> Row(const std::string& out, const std::string& agent_id) {
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::vector<std::string> row;
    for (std::string f; fields >> f;) row.push_back(f);
    if (!row.empty() && row[0] == agent_id) return row;
  }
  return {};
}

TEST(Node, ListsEveryLiveAgentWithPidCoresDevicesAndRunningKernelsUntilOneDies) {
  TempDir claims;
  AgentProcess first(NodeAgent(claims.path(), 0)), second(NodeAgent(claims.path(), 1));
  ASSERT_TRUE(first.Start()) << first.log();
  ASSERT_TRUE(second.Start()) << second.log();
  first.CreateKernel({{"kernel_id", "n1"},
                      {"image", kTestImage},
                      {"command", {"sleep", "3600"}},
                      {"resources", {{"cpu", 1}, {"mem", "16m"}, {"mock.device", 1}}}});
  first.WaitForState("n1", "RUNNING");

  CommandResult r = Slotctl({"node", "--claims-dir", claims.path()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.rfind("AGENT", 0), 0u) << r.out;
  for (const std::string column : {"PID", "API", "CORES", "MEMORY", "DEVICES", "KERNELS"})
    EXPECT_NE(r.out.find(column), std::string::npos) << r.out;
  const std::string api_first = "127.0.0.1:" + std::to_string(first.port());
  EXPECT_EQ(Row(r.out, first.options().id),
            (std::vector<std::string>{first.options().id, std::to_string(first.pid()), api_first, "0", "256m",
                                      "mock:m0", "1"}))
      << r.out;
  EXPECT_EQ(Row(r.out, second.options().id),
            (std::vector<std::string>{second.options().id, std::to_string(second.pid()),
                                      "127.0.0.1:" + std::to_string(second.port()), "1", "256m", "mock:m1", "0"}))
      << r.out;

  // --json (after the subcommand too), with the claims directory from an agent's config.
  r = Slotctl({"--config", second.config_path(), "node", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json agents = json::parse(r.out);
  ASSERT_EQ(agents.size(), 2u) << r.out;
  const json& a = agents[0];
  EXPECT_EQ(a["agent"], first.options().id);
  EXPECT_EQ(a["agent_id"], first.options().id);
  EXPECT_EQ(a["pid"], first.pid());
  EXPECT_EQ(a["api"], api_first);
  EXPECT_EQ(a["api_port"], first.port());
  EXPECT_EQ(a["cores"], json::array({0}));
  EXPECT_EQ(a["memory"], "256m");
  EXPECT_EQ(a["memory_bytes"], 256ull << 20);
  EXPECT_EQ(a["devices"], json({{"mock", {"m0"}}}));
  EXPECT_EQ(a["kernels"], 1);
  EXPECT_EQ(a["port_range"], json::array({34000, 34009}));
  EXPECT_EQ(a["config_path"], first.config_path());
  EXPECT_EQ(agents[1]["agent"], second.options().id);
  EXPECT_EQ(agents[1]["kernels"], 0);

  // A SIGKILLed agent's claim is void: only the live one is shown.
  second.Kill(SIGKILL);
  r = Slotctl({"node", "--claims-dir", claims.path()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_FALSE(Row(r.out, first.options().id).empty()) << r.out;
  EXPECT_TRUE(Row(r.out, second.options().id).empty()) << r.out;
  r = Slotctl({"--json", "node", "--claims-dir", claims.path()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(json::parse(r.out).size(), 1u) << r.out;
}

TEST(Node, AnAgentThatAnswersOnlyWithATokenShowsUnknownKernels) {
  TempDir claims;
  AgentOptions options = NodeAgent(claims.path(), 0);
  options.token = "s3cret";
  AgentProcess agent(options);
  ASSERT_TRUE(agent.Start()) << agent.log();
  // Without its socket, slotctl can only reach the agent over TCP, where it needs the token.
  ASSERT_EQ(::unlink(agent.socket_path().c_str()), 0);
  CommandResult r = Slotctl({"node", "--claims-dir", claims.path()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::vector<std::string> row = Row(r.out, options.id);
  ASSERT_EQ(row.size(), 7u) << r.out;
  EXPECT_EQ(row[6], "?") << r.out;
  EXPECT_NE(r.out.find("? " + options.id + ": http://127.0.0.1:" + std::to_string(agent.port()) +
                       " requires a token (HTTP 401)"),
            std::string::npos)
      << r.out;
  r = Slotctl({"node", "--json", "--claims-dir", claims.path()});
  json agents = json::parse(r.out);
  ASSERT_EQ(agents.size(), 1u) << r.out;
  EXPECT_TRUE(agents[0]["kernels"].is_null()) << r.out;
  EXPECT_NE(agents[0]["kernels_error"].get<std::string>().find("HTTP 401"), std::string::npos) << r.out;
}

TEST(Node, AnEmptyDirectoryHasNoAgentsAndAMissingOneIsAnErrorWithAdvice) {
  TempDir claims;
  CommandResult r = Slotctl({"node", "--claims-dir", claims.path()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "no agents: no live agent holds claims in " + claims.path() + "\n");
  r = Slotctl({"node", "--json", "--claims-dir", claims.path()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[]\n");

  const std::string missing = claims.path() + "/none";
  r = Slotctl({"node", "--claims-dir", missing});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("claims directory " + missing + " does not exist"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--claims-dir DIR"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace slotd::testing
