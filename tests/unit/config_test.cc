// agent.toml parsing: every accepted key, the defaults derived from the host,
// and the exact messages an operator sees for each kind of mistake.
#include "common/units.h"
#include "config/config.h"
#include "resources/agent_config.h"
#include "resources/cuda/cuda_kind.h"
#include "resources/mock/mock_kind.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "testing/test_host.h"

namespace slotd {
namespace {

using std::chrono::milliseconds;

constexpr uint64_t kKiB = 1ull << 10;

std::vector<int> Range(int first, int last) {
  std::vector<int> cores;
  for (int core = first; core <= last; ++core) cores.push_back(core);
  return cores;
}

Result<Config> Parse(const std::string& text, const HostFacts& host = TestHost()) {
  return ParseConfig(text, "agent.toml", host);
}

// The error message for `text`, which must be refused as invalid.
std::string ErrorOf(const std::string& text, const HostFacts& host = TestHost()) {
  Result<Config> config = Parse(text, host);
  if (config.ok()) {
    ADD_FAILURE() << "accepted:\n" << text;
    return "";
  }
  EXPECT_EQ(config.status().code(), Status::Code::kInvalidArgument);
  return config.status().message();
}

const char* const kMinimal = "[agent]\nid = \"a1\"\n";

// ---------------------------------------------------------------- valid files

TEST(ConfigTest, MinimalFileResolvesEveryDefault) {
  Result<Config> config = Parse(kMinimal);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->path, "agent.toml");

  EXPECT_EQ(config->agent.id, "a1");
  EXPECT_EQ(config->agent.node, "testnode");
  EXPECT_EQ(config->agent.rpc_host, "127.0.0.1");
  EXPECT_EQ(config->agent.rpc_port, 6001);
  EXPECT_EQ(config->agent.ipc_base_path, "/run/slotd/a1");
  EXPECT_EQ(config->agent.var_base_path, "/var/lib/slotd/a1");
  EXPECT_FALSE(config->agent.token_file.has_value());
  EXPECT_EQ(config->agent.scaling_group, "default");

  EXPECT_EQ(config->node.claims_dir, "/run/slotd/node");

  EXPECT_EQ(config->container.docker_host, "unix:///var/run/docker.sock");
  EXPECT_EQ(config->container.port_range_start, 30000);
  EXPECT_EQ(config->container.port_range_end, 30999);
  EXPECT_EQ(config->container.network, "none");
  EXPECT_EQ(config->container.stats_type, StatsType::kCgroup);
  EXPECT_EQ(config->container.stats_interval, milliseconds(1'000));
  EXPECT_EQ(config->container.stop_timeout, milliseconds(10'000));
  EXPECT_EQ(config->container.pids_limit, 4096);
  EXPECT_EQ(config->container.log_max_size, 50 * kMiB);

  EXPECT_EQ(config->api.max_connections, 1024);
  EXPECT_EQ(config->api.request_timeout, milliseconds(10'000));
  EXPECT_EQ(config->api.max_body_size, 1 * kMiB);

  EXPECT_EQ(config->resource.reserved_cpu, 1);
  EXPECT_EQ(config->resource.reserved_mem, 1 * kGiB);
  EXPECT_EQ(config->resource.allowed_cores, Range(0, 14));  // the last core is kept for the OS
  EXPECT_FALSE(config->resource.allowed_cores_explicit);
  EXPECT_EQ(config->resource.memory_size, 63 * kGiB);
  EXPECT_FALSE(config->resource.memory_size_explicit);
  EXPECT_FALSE((config->resource.devices.Of<CudaConfig>("cuda") != nullptr));  // absent sections: the plugins are off
  EXPECT_FALSE((config->resource.devices.Of<MockConfig>("mock") != nullptr));
}

TEST(ConfigTest, FullExampleFromTheSpec) {
  const char* text = R"(
[agent]
id = "gpu1-a"                       # required
node = "gpu1"
rpc-listen-addr = "127.0.0.1:6001"
ipc-base-path = "/run/slotd/gpu1-a"
var-base-path = "/var/lib/slotd/gpu1-a"
token-file = "/etc/slotd/gpu1-a.token"
scaling-group = "default"

[node]
claims-dir = "/run/slotd/node"

[container]
docker-host = "unix:///var/run/docker.sock"
port-range = [30000, 30999]
network = "none"
stats-type = "cgroup"
stats-interval = "1s"
stop-timeout = "10s"

[resource]
reserved-cpu = 1
reserved-mem = "1g"

[resource.cpu]
allowed-cores = "0-7,15"

[resource.memory]
size = "32g"

[resource.cuda]
allowed-devices = ["GPU-6f3c1a2b-9d4e-4f5a-8b6c-7d8e9f0a1b2c", "1"] # UUIDs or indices
nvml-library = "libnvidia-ml.so.1"
attach = "device-requests"

[resource.mock]                     # config-defined accelerator for tests and demos
devices = [
  { id = "mock0", memory = "16g", processing-units = 108, numa-node = 0 },
  { id = "mock1", memory = "16g", processing-units = 108, numa-node = 1 },
]
allowed-devices = ["mock0"]         # default: all mock devices
)";
  Result<Config> config = Parse(text);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->agent.id, "gpu1-a");
  EXPECT_EQ(config->agent.node, "gpu1");
  EXPECT_EQ(config->agent.rpc_host, "127.0.0.1");
  EXPECT_EQ(config->agent.rpc_port, 6001);
  EXPECT_EQ(config->agent.ipc_base_path, "/run/slotd/gpu1-a");
  EXPECT_EQ(config->agent.var_base_path, "/var/lib/slotd/gpu1-a");
  EXPECT_EQ(config->agent.token_file, "/etc/slotd/gpu1-a.token");
  EXPECT_EQ(config->agent.scaling_group, "default");
  EXPECT_EQ(config->node.claims_dir, "/run/slotd/node");
  EXPECT_EQ(config->container.docker_host, "unix:///var/run/docker.sock");
  EXPECT_EQ(config->container.port_range_start, 30000);
  EXPECT_EQ(config->container.port_range_end, 30999);
  EXPECT_EQ(config->container.network, "none");
  EXPECT_EQ(config->container.stats_type, StatsType::kCgroup);
  EXPECT_EQ(config->container.stats_interval, milliseconds(1'000));
  EXPECT_EQ(config->container.stop_timeout, milliseconds(10'000));
  EXPECT_EQ(config->resource.reserved_cpu, 1);
  EXPECT_EQ(config->resource.reserved_mem, 1 * kGiB);
  std::vector<int> cores = Range(0, 7);
  cores.push_back(15);
  EXPECT_EQ(config->resource.allowed_cores, cores);
  EXPECT_TRUE(config->resource.allowed_cores_explicit);
  EXPECT_EQ(config->resource.memory_size, 32 * kGiB);
  EXPECT_TRUE(config->resource.memory_size_explicit);

  ASSERT_TRUE((config->resource.devices.Of<CudaConfig>("cuda") != nullptr));
  EXPECT_EQ(config->resource.devices.Of<CudaConfig>("cuda")->allowed_devices,
            (std::vector<std::string>{"GPU-6f3c1a2b-9d4e-4f5a-8b6c-7d8e9f0a1b2c", "1"}));
  EXPECT_TRUE(config->resource.devices.Of<CudaConfig>("cuda")->allowed_devices_explicit);
  EXPECT_EQ(config->resource.devices.Of<CudaConfig>("cuda")->nvml_library, "libnvidia-ml.so.1");
  EXPECT_EQ(config->resource.devices.Of<CudaConfig>("cuda")->attach, "device-requests");

  ASSERT_TRUE((config->resource.devices.Of<MockConfig>("mock") != nullptr));
  const std::vector<MockDevice>& devices = config->resource.devices.Of<MockConfig>("mock")->devices;
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].id, "mock0");
  EXPECT_EQ(devices[0].memory_bytes, 16 * kGiB);
  EXPECT_EQ(devices[0].processing_units, 108);
  EXPECT_EQ(devices[0].numa_node, 0);
  EXPECT_EQ(devices[1].id, "mock1");
  EXPECT_EQ(devices[1].memory_bytes, 16 * kGiB);
  EXPECT_EQ(devices[1].processing_units, 108);
  EXPECT_EQ(devices[1].numa_node, 1);
  EXPECT_EQ(config->resource.devices.Of<MockConfig>("mock")->allowed_devices, std::vector<std::string>{"mock0"});
  EXPECT_TRUE(config->resource.devices.Of<MockConfig>("mock")->allowed_devices_explicit);
}

TEST(ConfigTest, OtherValuesOfEachKey) {
  const char* text = R"(
[agent]
id = "0.team_b-2"
rpc-listen-addr = "localhost:0"
scaling-group = "gpu"
[container]
docker-host = "tcp://127.0.0.1:2375"
port-range = [40000, 40000]
network = "host"
stats-type = "docker"
stats-interval = "100ms"
stop-timeout = "250ms"
[resource]
reserved-mem = 2147483648
[resource.memory]
size = 1073741824
)";
  Result<Config> config = Parse(text);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->agent.id, "0.team_b-2");
  EXPECT_EQ(config->agent.rpc_host, "localhost");
  EXPECT_EQ(config->agent.rpc_port, 0);
  EXPECT_EQ(config->agent.scaling_group, "gpu");
  EXPECT_EQ(config->container.docker_host, "tcp://127.0.0.1:2375");
  EXPECT_EQ(config->container.port_range_start, 40000);
  EXPECT_EQ(config->container.port_range_end, 40000);
  EXPECT_EQ(config->container.network, "host");
  EXPECT_EQ(config->container.stats_type, StatsType::kDocker);
  EXPECT_EQ(config->container.stats_interval, milliseconds(100));
  EXPECT_EQ(config->container.stop_timeout, milliseconds(250));
  EXPECT_EQ(config->resource.reserved_mem, 2 * kGiB);
  EXPECT_EQ(config->resource.memory_size, 1 * kGiB);
}

TEST(ConfigTest, DottedKeysAndInlineTablesAreTheSameSections) {
  const char* text = R"(
agent = { id = "a1", node = "n1" }
resource.cpu.allowed-cores = "2-3"
resource.memory.size = "4g"
)";
  Result<Config> config = Parse(text);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->agent.id, "a1");
  EXPECT_EQ(config->agent.node, "n1");
  EXPECT_EQ(config->resource.allowed_cores, Range(2, 3));
  EXPECT_EQ(config->resource.memory_size, 4 * kGiB);
}

TEST(ConfigTest, LongestValidAgentIdIsAccepted) {
  const std::string id = "a" + std::string(63, '9');
  Result<Config> config = Parse("[agent]\nid = \"" + id + "\"\n");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->agent.id, id);
  EXPECT_EQ(config->agent.ipc_base_path, "/run/slotd/" + id);
}

// ------------------------------------------------------------ host defaults

TEST(ConfigTest, DockerHostDefaultsToTheEnvironment) {
  HostFacts host = TestHost();
  host.docker_host_env = "unix:///tmp/test/docker.sock";
  Result<Config> config = Parse(kMinimal, host);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->container.docker_host, "unix:///tmp/test/docker.sock");

  // The file wins over the environment.
  config = Parse(std::string(kMinimal) + "[container]\ndocker-host = \"tcp://127.0.0.1:2375\"\n", host);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->container.docker_host, "tcp://127.0.0.1:2375");
}

TEST(ConfigTest, BadDockerHostInTheEnvironmentIsReportedWithoutALine) {
  HostFacts host = TestHost();
  host.docker_host_env = "/var/run/docker.sock";
  EXPECT_EQ(ErrorOf(kMinimal, host),
            "agent.toml: container.docker-host: the default comes from $DOCKER_HOST, and \"/var/run/docker.sock\" "
            "must start with unix:// or tcp://, e.g. \"unix:///var/run/docker.sock\"; fix DOCKER_HOST or set "
            "[container] docker-host");
}

TEST(ConfigTest, ReservedCpuComesOffTheEndOfTheCpuset) {
  Result<Config> config = Parse(std::string(kMinimal) + "[resource]\nreserved-cpu = 4\n");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->resource.allowed_cores, Range(0, 11));

  config = Parse(std::string(kMinimal) + "[resource]\nreserved-cpu = 0\n");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->resource.allowed_cores, Range(0, 15));

  HostFacts host = TestHost();
  host.cpuset = {9, 3, 5, 1};  // unordered, as a caller might build it
  config = Parse(std::string(kMinimal) + "[resource]\nreserved-cpu = 2\n", host);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->resource.allowed_cores, (std::vector<int>{1, 3}));
}

TEST(ConfigTest, ReservingEveryCoreIsRefused) {
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource]\nreserved-cpu = 16\n"),
            "agent.toml:4: resource.reserved-cpu: reserving 16 of the 16 cores in this agent's cpuset (0-15) leaves "
            "none for kernels; lower reserved-cpu or set [resource.cpu] allowed-cores");
}

TEST(ConfigTest, DefaultReservationOnASingleCoreHostIsRefusedWithoutALine) {
  HostFacts host = TestHost();
  host.cpuset = {3};
  EXPECT_EQ(ErrorOf(kMinimal, host),
            "agent.toml: resource.reserved-cpu: reserving 1 of the 1 cores in this agent's cpuset (3) leaves none "
            "for kernels; lower reserved-cpu or set [resource.cpu] allowed-cores");
}

TEST(ConfigTest, AnAllowListMakesReservedCpuIrrelevant) {
  Result<Config> config =
      Parse(std::string(kMinimal) + "[resource]\nreserved-cpu = 16\n[resource.cpu]\nallowed-cores = \"0-15\"\n");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->resource.allowed_cores, Range(0, 15));
  EXPECT_TRUE(config->resource.allowed_cores_explicit);
}

TEST(ConfigTest, ReservedMemComesOffNodeMemory) {
  Result<Config> config = Parse(std::string(kMinimal) + "[resource]\nreserved-mem = \"4g\"\n");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->resource.memory_size, 60 * kGiB);
  EXPECT_FALSE(config->resource.memory_size_explicit);

  config = Parse(std::string(kMinimal) + "[resource]\nreserved-mem = 0\n");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->resource.memory_size, 64 * kGiB);
}

TEST(ConfigTest, ReservingAllMemoryIsRefused) {
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource]\nreserved-mem = \"64g\"\n"),
            "agent.toml:4: resource.reserved-mem: reserving 64g leaves none of this node's memory of 64g for "
            "kernels; lower reserved-mem or set [resource.memory] size");
}

TEST(ConfigTest, MemoryShareMayNotExceedTheNode) {
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource.memory]\nsize = \"128g\"\n"),
            "agent.toml:4: resource.memory.size: 128g is more than this node's memory of 64g; lower it");
  // Memory that is not a whole number of GiB is also given rounded.
  HostFacts host = TestHost();
  host.memory_bytes = 24684084ull * 1024;
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource.memory]\nsize = \"30g\"\n", host),
            "agent.toml:4: resource.memory.size: 30g is more than this node's memory of 24684084k (about 23.5g); "
            "lower it");
  // The whole node is allowed; reserved-mem does not apply to an explicit share.
  Result<Config> config = Parse(std::string(kMinimal) + "[resource.memory]\nsize = \"64g\"\n");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->resource.memory_size, 64 * kGiB);
}

TEST(ConfigTest, AllowListMustBeInsideTheCpuset) {
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource.cpu]\nallowed-cores = \"14-17,20\"\n"),
            "agent.toml:4: resource.cpu.allowed-cores: cores 16-17,20 are not in this agent's cpuset (0-15); list "
            "only cores from it");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource.cpu]\nallowed-cores = \"16\"\n"),
            "agent.toml:4: resource.cpu.allowed-cores: core 16 is not in this agent's cpuset (0-15); list only "
            "cores from it");
}

TEST(ConfigTest, NodeNameDefaultsToTheHostName) {
  HostFacts host = TestHost();
  host.hostname = "";
  EXPECT_EQ(ErrorOf(kMinimal, host),
            "agent.toml: agent.node: the host name is unknown, so there is no default; set [agent] node");
  Result<Config> config = Parse(std::string(kMinimal) + "node = \"n7\"\n", host);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->agent.node, "n7");
}

// ------------------------------------------------------ unknown sections/keys

TEST(ConfigTest, UnknownTopLevelAndNestedSections) {
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[agnet]\nid = \"x\"\n"),
            "agent.toml:3: agnet: unknown section; known sections: agent, api, node, container, resource, resource.cpu, "
            "resource.memory, etcd, pool, resource.cuda, resource.mock");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[agent.extra]\nx = 1\n"),
            "agent.toml:3: agent.extra: unknown section; known sections: agent, api, node, container, resource, "
            "resource.cpu, resource.memory, etcd, pool, resource.cuda, resource.mock");
}

TEST(ConfigTest, UnknownKeyListsTheKnownKeysOfItsSection) {
  EXPECT_EQ(ErrorOf("[agent]\nid = \"a1\"\n\n  idd = \"a1\"\n"),
            "agent.toml:4: agent.idd: unknown key; known keys of [agent]: id, node, rpc-listen-addr, ipc-base-path, "
            "var-base-path, token-file, tokens-file, scaling-group, tls-cert-file, tls-key-file, tls-self-signed, "
            "tls-min-version, tls-client-ca-file, client-roles, audit-log-max-size");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[node]\nclaims_dir = \"/x\"\n"),
            "agent.toml:4: node.claims_dir: unknown key; known keys of [node]: claims-dir");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[container]\nports = [1, 2]\n"),
            "agent.toml:4: container.ports: unknown key; known keys of [container]: docker-host, engine-wait, port-range, "
            "network, stats-type, stats-interval, stop-timeout, init, restart-max, restart-backoff-initial, restart-backoff-max, "
            "idle-for, idle-cpu-below, idle-gpu-below, health-interval, health-min-interval, health-timeout, "
            "pids-limit, log-max-size, max-lifetime, scratch-root, "
            "scratch-type, scratch-size, scratch-min-free, ulimits, mount-allow, kernel-uid, kernel-gid, allow-root, auto-pull, "
            "registry-auth-file, pull-timeout, pull-stall-timeout, image-gc-high, image-gc-low");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource]\nreserved-gpu = 1\n"),
            "agent.toml:4: resource.reserved-gpu: unknown key; known keys of [resource]: reserved-cpu, reserved-mem");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource.cpu]\ncores = \"0\"\n"),
            "agent.toml:4: resource.cpu.cores: unknown key; known keys of [resource.cpu]: allowed-cores, shared-overcommit");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource.memory]\nlimit = \"1g\"\n"),
            "agent.toml:4: resource.memory.limit: unknown key; known keys of [resource.memory]: size");
}

TEST(ConfigTest, KeysOutsideAnySectionAreUnknown) {
  EXPECT_EQ(ErrorOf("id = \"a1\"\n" + std::string(kMinimal)),
            "agent.toml:1: id: unknown key; keys belong in one of the sections agent, api, node, container, resource, "
            "resource.cpu, resource.memory, etcd, pool, resource.cuda, resource.mock");
}

TEST(ConfigTest, OddKeysAreQuotedInThePath) {
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "\"a.b\" = 1\n"),
            "agent.toml:3: agent.\"a.b\": unknown key; known keys of [agent]: id, node, rpc-listen-addr, "
            "ipc-base-path, var-base-path, token-file, tokens-file, scaling-group, tls-cert-file, tls-key-file, "
            "tls-self-signed, tls-min-version, tls-client-ca-file, client-roles, audit-log-max-size");
}

// ---------------------------------------------------------------- wrong types

TEST(ConfigTest, WrongTypesNameWhatWasExpectedAndFound) {
  EXPECT_EQ(ErrorOf("[agent]\n\nid = 3\n"), "agent.toml:3: agent.id: expected a string, found an integer");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "node = true\n"),
            "agent.toml:3: agent.node: expected a string, found a boolean");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "token-file = [\"/a\"]\n"),
            "agent.toml:3: agent.token-file: expected a string, found an array");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource]\nreserved-cpu = 1.5\n"),
            "agent.toml:4: resource.reserved-cpu: expected an integer, found a floating-point number");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource]\nreserved-mem = 1979-05-27\n"),
            "agent.toml:4: resource.reserved-mem: expected a size (a string like \"32g\" or an integer of bytes), "
            "found a date");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[container]\nstop-timeout = 10\n"),
            "agent.toml:4: container.stop-timeout: expected a duration string like \"10s\", found an integer");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource.cpu]\nallowed-cores = [0, 1]\n"),
            "agent.toml:4: resource.cpu.allowed-cores: expected a core list string like \"0-7,16\", found an array");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[agent.scaling-group]\nname = \"x\"\n"),
            "agent.toml:3: agent.scaling-group: expected a string, found a table");
}

TEST(ConfigTest, KnownSectionThatIsNotATable) {
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "container = \"docker\"\n"),
            "agent.toml:3: agent.container: unknown key; known keys of [agent]: id, node, rpc-listen-addr, "
            "ipc-base-path, var-base-path, token-file, tokens-file, scaling-group, tls-cert-file, tls-key-file, "
            "tls-self-signed, tls-min-version, tls-client-ca-file, client-roles, audit-log-max-size");
  EXPECT_EQ(ErrorOf("container = 1\n" + std::string(kMinimal)),
            "agent.toml:1: container: expected a table, found an integer");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource]\ncpu = 4\n"),
            "agent.toml:4: resource.cpu: expected a table, found an integer");
  // An [agent] that is not a table is one problem, not also a missing id.
  EXPECT_EQ(ErrorOf("agent = \"a1\"\n"), "agent.toml:1: agent: expected a table, found a string");
}

// ------------------------------------------------------------- [agent] values

TEST(ConfigTest, AgentIdIsRequired) {
  EXPECT_EQ(ErrorOf("[agent]\nnode = \"n1\"\n"),
            "agent.toml:1: agent.id: missing; every agent needs an id that is unique in the cluster, e.g. [agent] "
            "id = \"gpu1-a\"");
  EXPECT_EQ(ErrorOf(""),
            "agent.toml: agent.id: missing; every agent needs an id that is unique in the cluster, e.g. [agent] id = "
            "\"gpu1-a\"");
}

TEST(ConfigTest, AgentIdMustMatchThePattern) {
  const std::string advice =
      "\" is not a valid agent id; use 1 to 64 characters of a-z, 0-9, '.', '_' and '-', starting with a letter "
      "or digit";
  for (const std::string& id : std::vector<std::string>{"", "Gpu1", "-a", ".a", "_a", "a/b", "a b", "a\\u00e9",
                                                       std::string(65, 'a')}) {
    Result<Config> config = Parse("[agent]\nid = \"" + id + "\"\n");
    ASSERT_FALSE(config.ok()) << id;
    EXPECT_EQ(config.status().message().rfind("agent.toml:2: agent.id: \"", 0), 0) << config.status().message();
    EXPECT_NE(config.status().message().find(advice), std::string::npos) << config.status().message();
  }
  EXPECT_EQ(ErrorOf("[agent]\nid = \"Gpu1\"\n"), "agent.toml:2: agent.id: \"Gpu1" + advice);
}

TEST(ConfigTest, TlsKeysComeInPairsAndNeedWhatTheyName) {
  const std::string agent = "[agent]\nid = \"a1\"\n";
  struct Row {
    std::string keys;
    std::string problem;  // "" when the file is good
  };
  const std::vector<Row> rows = {
      {"tls-cert-file = \"/c.pem\"\ntls-key-file = \"/k.pem\"\n", ""},
      {"tls-self-signed = true\nrpc-listen-addr = \"0.0.0.0:6001\"\n", ""},
      {"tls-cert-file = \"/c.pem\"\n", "agent.tls-key-file: missing; tls-cert-file needs its private key"},
      {"tls-cert-file = \"/c.pem\"\ntls-key-file = \"/k.pem\"\ntls-self-signed = true\n",
       "agent.tls-self-signed: true beside tls-cert-file; choose one"},
      {"tls-client-ca-file = \"/ca.pem\"\n", "agent.tls-client-ca-file: client certificates need TLS"},
      {"tls-self-signed = true\ntls-client-ca-file = \"/ca.pem\"\nclient-roles = { \"mgr-1\" = \"operator\" }\n", ""},
      {"tls-self-signed = true\nclient-roles = { \"mgr-1\" = \"operator\" }\n",
       "agent.client-roles: names clients by certificate, and no certificate is asked for"},
      {"tls-self-signed = true\ntls-client-ca-file = \"/ca.pem\"\nclient-roles = { \"mgr-1\" = \"root\" }\n",
       "agent.client-roles.\"mgr-1\": expected a role, \"viewer\", \"operator\" or \"admin\""},
      {"tls-self-signed = true\ntls-min-version = \"1.1\"\n", "agent.tls-min-version: \"1.1\" is not one of 1.2, 1.3"},
      {"rpc-listen-addr = \"0.0.0.0:6001\"\n", "reachable from other hosts, and the API would send its tokens there "
                                               "in clear text; give the agent a certificate"},
      {"rpc-listen-addr = \"0.0.0.0:6001\"\ntls-self-signed = false\n", "agent.tls-self-signed: rpc-listen-addr"},
      {"rpc-listen-addr = \"localhost:6001\"\n", ""},
      {"rpc-listen-addr = \"127.0.0.2:6001\"\n", ""},
  };
  for (const Row& row : rows) {
    if (row.problem.empty()) {
      const Result<Config> config = Parse(agent + row.keys, TestHost());
      EXPECT_TRUE(config.ok()) << row.keys << config.status().message();
    } else {
      EXPECT_THAT(ErrorOf(agent + row.keys), ::testing::HasSubstr(row.problem)) << row.keys;
    }
  }
}

TEST(ConfigTest, RpcListenAddrIsIpv4OrLocalhostAndAPort) {
  auto error_of = [](const std::string& addr) {
    return ErrorOf(std::string(kMinimal) + "rpc-listen-addr = \"" + addr + "\"\n");
  };
  EXPECT_EQ(error_of("6001"),
            "agent.toml:3: agent.rpc-listen-addr: \"6001\" is not host:port; write it like \"127.0.0.1:6001\"");
  EXPECT_EQ(error_of("example.com:6001"),
            "agent.toml:3: agent.rpc-listen-addr: host \"example.com\" in \"example.com:6001\" is not an IPv4 "
            "address or \"localhost\"; write it like \"127.0.0.1:6001\"");
  EXPECT_EQ(error_of("[::1]:6001"),
            "agent.toml:3: agent.rpc-listen-addr: host \"[::1]\" in \"[::1]:6001\" is not an IPv4 address or "
            "\"localhost\"; write it like \"127.0.0.1:6001\"");
  EXPECT_EQ(error_of(":6001"),
            "agent.toml:3: agent.rpc-listen-addr: host \"\" in \":6001\" is not an IPv4 address or \"localhost\"; "
            "write it like \"127.0.0.1:6001\"");
  EXPECT_EQ(error_of("127.0.0.1:65536"),
            "agent.toml:3: agent.rpc-listen-addr: port \"65536\" in \"127.0.0.1:65536\" is not a number from 0 to "
            "65535 (0 picks a free port)");
  for (const std::string bad : {"127.0.0.1:", "127.0.0.1:-1", "127.0.0.1:+80", "127.0.0.1:1x", "127.0.0.1:999999",
                                "256.0.0.1:80", "127.1:80"}) {
    Result<Config> config = Parse(std::string(kMinimal) + "rpc-listen-addr = \"" + bad + "\"\n");
    EXPECT_FALSE(config.ok()) << bad;
  }

  Result<Config> config =
      Parse(std::string(kMinimal) + "rpc-listen-addr = \"0.0.0.0:65535\"\ntls-self-signed = true\n");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->agent.rpc_host, "0.0.0.0");
  EXPECT_EQ(config->agent.rpc_port, 65535);
}

TEST(ConfigTest, PathsMustBeAbsolute) {
  const char* text = R"([agent]
id = "a1"
ipc-base-path = "run/slotd/a1"
var-base-path = ""
token-file = "./token"
[node]
claims-dir = "claims"
)";
  EXPECT_EQ(ErrorOf(text),
            "agent.toml:3: agent.ipc-base-path: \"run/slotd/a1\" is not an absolute path; write the full path "
            "starting with /\n"
            "agent.toml:4: agent.var-base-path: \"\" is not an absolute path; write the full path starting with /\n"
            "agent.toml:5: agent.token-file: \"./token\" is not an absolute path; write the full path starting "
            "with /\n"
            "agent.toml:7: node.claims-dir: \"claims\" is not an absolute path; write the full path starting with /");
}

TEST(ConfigTest, NamesMayNotBeEmpty) {
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "node = \"\"\nscaling-group = \"\"\n"),
            "agent.toml:3: agent.node: must not be empty\n"
            "agent.toml:4: agent.scaling-group: must not be empty");
}

// --------------------------------------------------------- [container] values

TEST(ConfigTest, DockerHostNeedsAKnownScheme) {
  auto error_of = [](const std::string& host) {
    return ErrorOf(std::string(kMinimal) + "[container]\ndocker-host = \"" + host + "\"\n");
  };
  EXPECT_EQ(error_of("http://127.0.0.1:2375"),
            "agent.toml:4: container.docker-host: \"http://127.0.0.1:2375\" must start with unix:// or tcp://, e.g. "
            "\"unix:///var/run/docker.sock\"");
  EXPECT_EQ(error_of("unix://docker.sock"),
            "agent.toml:4: container.docker-host: \"unix://docker.sock\" needs an absolute socket path after "
            "unix://, e.g. \"unix:///var/run/docker.sock\"");
  EXPECT_EQ(error_of("tcp://"),
            "agent.toml:4: container.docker-host: \"tcp://\" needs host:port after tcp://, e.g. "
            "\"tcp://127.0.0.1:2375\"");
}

TEST(ConfigTest, PortRangeIsTwoOrderedPorts) {
  auto error_of = [](const std::string& range) {
    return ErrorOf(std::string(kMinimal) + "[container]\nport-range = " + range + "\n");
  };
  EXPECT_EQ(error_of("[31000, 30000]"), "agent.toml:4: container.port-range: start 31000 is above end 30000");
  EXPECT_EQ(error_of("[0, 100]"), "agent.toml:4: container.port-range: start port 0 is out of range; use 1 to 65535");
  EXPECT_EQ(error_of("[30000, 65536]"),
            "agent.toml:4: container.port-range: end port 65536 is out of range; use 1 to 65535");
  EXPECT_EQ(error_of("[1, 2, 3]"),
            "agent.toml:4: container.port-range: expected two integers [start, end], found 3 items");
  EXPECT_EQ(error_of("[]"),
            "agent.toml:4: container.port-range: expected two integers [start, end], found 0 items");
  EXPECT_EQ(error_of("[30000, \"30999\"]"),
            "agent.toml:4: container.port-range: end must be an integer, found a string");
  EXPECT_EQ(error_of("\"30000-30999\""),
            "agent.toml:4: container.port-range: expected an array of two integers [start, end], found a string");
}

TEST(ConfigTest, NetworkAndStatsTypeAreChoices) {
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[container]\nnetwork = \"overlay\"\nstats-type = \"nvml\"\n"),
            "agent.toml:4: container.network: \"overlay\" is not one of none, host, bridge\n"
            "agent.toml:5: container.stats-type: \"nvml\" is not one of cgroup, docker");
}

TEST(ConfigTest, StopTimeoutIsADuration) {
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[container]\nstop-timeout = \"10\"\n"),
            "agent.toml:4: container.stop-timeout: invalid duration \"10\": expected a number with ms, s, m or h "
            "(e.g. 10s)");
  Result<Config> config = Parse(std::string(kMinimal) + "[container]\nstop-timeout = \"2m\"\n");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->container.stop_timeout, milliseconds(120'000));
}

TEST(ConfigTest, KernelLimitsAndApiLimitsHaveSaneRanges) {
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[container]\npids-limit = 8\n"),
            "agent.toml:4: container.pids-limit: is too small for a kernel; use 0 (no limit) or 16 and up");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[container]\nlog-max-size = \"1k\"\n"),
            "agent.toml:4: container.log-max-size: is too small; use 0 (the engine's own logging) or 1m and up");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[container]\nstop-timeout = \"2h\"\n"),
            "agent.toml:4: container.stop-timeout: \"2h\" is out of range; use 0s to 1h");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[api]\nrequest-timeout = \"20m\"\n"),
            "agent.toml:4: api.request-timeout: \"20m\" is out of range; use 100ms to 10m");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[api]\nmax-body-size = \"2g\"\n"),
            "agent.toml:4: api.max-body-size: is out of range; use 1k to 1g");
  EXPECT_NE(ErrorOf(std::string(kMinimal) + "[api]\nmax-connections = 0\n").find("api.max-connections"),
            std::string::npos);
  Result<Config> config = Parse(std::string(kMinimal) +
                                "[api]\nmax-connections = 64\nrequest-timeout = \"2s\"\nmax-body-size = \"64k\"\n"
                                "[container]\npids-limit = 0\nlog-max-size = 0\n");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->api.max_connections, 64);
  EXPECT_EQ(config->api.request_timeout, milliseconds(2'000));
  EXPECT_EQ(config->api.max_body_size, 64 * kKiB);
  EXPECT_EQ(config->container.pids_limit, 0);
  EXPECT_EQ(config->container.log_max_size, 0u);
}

TEST(ConfigTest, MaxExecSessionsBoundsInteractiveExecsFrom1To4096AndIs64ByDefault) {
  Result<Config> plain = Parse(kMinimal);
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(plain->api.max_exec_sessions, 64);
  EXPECT_NE(ErrorOf(std::string(kMinimal) + "[api]\nmax-exec-sessions = 0\n").find("api.max-exec-sessions"),
            std::string::npos);
  EXPECT_NE(ErrorOf(std::string(kMinimal) + "[api]\nmax-exec-sessions = 5000\n").find("api.max-exec-sessions"),
            std::string::npos);
  Result<Config> set = Parse(std::string(kMinimal) + "[api]\nmax-exec-sessions = 8\n");
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_EQ(set->api.max_exec_sessions, 8);
}

TEST(ConfigTest, MaxOneshotExecsBoundsOneShotExecsFrom1To4096AndIs64ByDefault) {
  Result<Config> plain = Parse(kMinimal);
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(plain->api.max_oneshot_execs, 64);
  EXPECT_NE(ErrorOf(std::string(kMinimal) + "[api]\nmax-oneshot-execs = 0\n").find("api.max-oneshot-execs"),
            std::string::npos);
  EXPECT_NE(ErrorOf(std::string(kMinimal) + "[api]\nmax-oneshot-execs = 5000\n").find("api.max-oneshot-execs"),
            std::string::npos);
  Result<Config> set = Parse(std::string(kMinimal) + "[api]\nmax-oneshot-execs = 8\n");
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_EQ(set->api.max_oneshot_execs, 8);
}

TEST(ConfigTest, StatsIntervalIsADurationFrom100msTo1h) {
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[container]\nstats-interval = 5\n"),
            "agent.toml:4: container.stats-interval: expected a duration string like \"10s\", found an integer");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[container]\nstats-interval = \"99ms\"\n"),
            "agent.toml:4: container.stats-interval: \"99ms\" is out of range; use 100ms to 1h");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[container]\nstats-interval = \"61m\"\n"),
            "agent.toml:4: container.stats-interval: \"61m\" is out of range; use 100ms to 1h");
  Result<Config> config = Parse(std::string(kMinimal) + "[container]\nstats-interval = \"1h\"\n");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->container.stats_interval, milliseconds(3'600'000));
}

// ---------------------------------------------------------- [resource] values

TEST(ConfigTest, ReservedCpuIsANonNegativeCount) {
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource]\nreserved-cpu = -1\n"),
            "agent.toml:4: resource.reserved-cpu: -1 is out of range; use 0 to 4096");
}

TEST(ConfigTest, SizesAreStringsOrBytes) {
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource]\nreserved-mem = \"1 gig\"\n"),
            "agent.toml:4: resource.reserved-mem: invalid size \"1 gig\": expected a number of bytes with an "
            "optional suffix k, m, g or t (binary, e.g. 512m)");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource]\nreserved-mem = -5\n"),
            "agent.toml:4: resource.reserved-mem: size -5 is negative; give bytes or a size like \"32g\"");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource.memory]\nsize = \"0\"\n"),
            "agent.toml:4: resource.memory.size: must be above 0");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource.memory]\nsize = 1.5\n"),
            "agent.toml:4: resource.memory.size: expected a size (a string like \"32g\" or an integer of bytes), "
            "found a floating-point number");
}

TEST(ConfigTest, MalformedCoreListsQuoteTheParser) {
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource.cpu]\nallowed-cores = \"3-1\"\n"),
            "agent.toml:4: resource.cpu.allowed-cores: invalid core list \"3-1\": range \"3-1\" ends before it "
            "starts");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource.cpu]\nallowed-cores = \"\"\n"),
            "agent.toml:4: resource.cpu.allowed-cores: invalid core list \"\": it is empty; write cores like 0-3,8");
}

// ------------------------------------------------------ [resource.cuda] values

TEST(ConfigTest, EmptyCudaSectionTurnsThePluginOnWithDefaults) {
  for (const std::string section : {"[resource.cuda]\n", "[resource]\ncuda = {}\n"}) {
    Result<Config> config = Parse(std::string(kMinimal) + section);
    ASSERT_TRUE(config.ok()) << config.status().message();
    ASSERT_TRUE((config->resource.devices.Of<CudaConfig>("cuda") != nullptr)) << section;
    EXPECT_TRUE(config->resource.devices.Of<CudaConfig>("cuda")->allowed_devices.empty());  // every visible GPU
    EXPECT_FALSE(config->resource.devices.Of<CudaConfig>("cuda")->allowed_devices_explicit);
    EXPECT_EQ(config->resource.devices.Of<CudaConfig>("cuda")->nvml_library, "libnvidia-ml.so.1");
    EXPECT_EQ(config->resource.devices.Of<CudaConfig>("cuda")->attach, "device-requests");
    EXPECT_FALSE((config->resource.devices.Of<MockConfig>("mock") != nullptr));
  }
}

TEST(ConfigTest, CudaKeysTakeTheirValues) {
  Result<Config> config = Parse(std::string(kMinimal) + R"([resource.cuda]
allowed-devices = ["3", "GPU-ABCDEF01-2345", "0"]
nvml-library = "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"
attach = "cdi"
)");
  ASSERT_TRUE(config.ok()) << config.status().message();
  // Kept as written, in file order; the plugin resolves them against the GPUs it finds.
  EXPECT_EQ(config->resource.devices.Of<CudaConfig>("cuda")->allowed_devices, (std::vector<std::string>{"3", "GPU-ABCDEF01-2345", "0"}));
  EXPECT_TRUE(config->resource.devices.Of<CudaConfig>("cuda")->allowed_devices_explicit);
  EXPECT_EQ(config->resource.devices.Of<CudaConfig>("cuda")->nvml_library, "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1");
  EXPECT_EQ(config->resource.devices.Of<CudaConfig>("cuda")->attach, "cdi");

  config = Parse(std::string(kMinimal) + "[resource.cuda]\nnvml-library = \"libnvidia-ml.so\"\nattach = \"env\"\n");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->resource.devices.Of<CudaConfig>("cuda")->nvml_library, "libnvidia-ml.so");
  EXPECT_EQ(config->resource.devices.Of<CudaConfig>("cuda")->attach, "env");
}

TEST(ConfigTest, CudaAllowedDevicesAreQuotedIndicesOrUuids) {
  auto error_of = [](const std::string& list) {
    return ErrorOf(std::string(kMinimal) + "[resource.cuda]\nallowed-devices = " + list + "\n");
  };
  EXPECT_EQ(error_of("[0, \"1\", 2]"),
            "agent.toml:4: resource.cuda.allowed-devices[0]: expected a string, found the integer 0; quote GPU "
            "indices: \"0\"\n"
            "agent.toml:4: resource.cuda.allowed-devices[2]: expected a string, found the integer 2; quote GPU "
            "indices: \"2\"");
  EXPECT_EQ(error_of("[true]"), "agent.toml:4: resource.cuda.allowed-devices[0]: expected a string, found a boolean");
  const std::string advice =
      "\" is neither a GPU or MIG UUID like \"GPU-6f3c1a2b-...\" nor an index like \"1\"; copy them from "
      "nvidia-smi -L";
  EXPECT_EQ(error_of("[\"gpu0\"]"), "agent.toml:4: resource.cuda.allowed-devices[0]: \"gpu0" + advice);
  for (const std::string bad : {"", "01", "-1", "GPU-", "GPU-xyz", "MIG-", "MIG-xyz", "gpu-6f3c1a2b", " 1"}) {
    EXPECT_EQ(error_of("[\"" + bad + "\"]"), "agent.toml:4: resource.cuda.allowed-devices[0]: \"" + bad + advice);
  }
  EXPECT_EQ(error_of("[\"1\", \"GPU-6f3c\", \"1\", \"GPU-6f3c\"]"),
            "agent.toml:4: resource.cuda.allowed-devices[2]: \"1\" is already listed; list each GPU once\n"
            "agent.toml:4: resource.cuda.allowed-devices[3]: \"GPU-6f3c\" is already listed; list each GPU once");
  EXPECT_EQ(error_of("[]"),
            "agent.toml:4: resource.cuda.allowed-devices: is empty; list at least one GPU, or leave allowed-devices "
            "out to use every visible GPU");
  EXPECT_EQ(error_of("\"0\""),
            "agent.toml:4: resource.cuda.allowed-devices: expected an array of GPU UUIDs or indices like "
            "[\"GPU-6f3c1a2b-...\", \"1\"], found a string");
}

TEST(ConfigTest, CudaLibraryAndAttachMode) {
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + R"([resource.cuda]
nvml-library = ""
attach = "volume"
)"),
            "agent.toml:4: resource.cuda.nvml-library: must not be empty\n"
            "agent.toml:5: resource.cuda.attach: \"volume\" is not one of device-requests, env, cdi");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource.cuda]\nnvml-library = \"lib/libnvidia-ml.so.1\"\n"),
            "agent.toml:4: resource.cuda.nvml-library: \"lib/libnvidia-ml.so.1\" is a relative path; give a library "
            "name like \"libnvidia-ml.so.1\" or an absolute path");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource.cuda]\nnvml-library = 1\n"),
            "agent.toml:4: resource.cuda.nvml-library: expected a string, found an integer");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource.cuda]\ndevices = [\"0\"]\n"),
            "agent.toml:4: resource.cuda.devices: unknown key; known keys of [resource.cuda]: allowed-devices, "
            "nvml-library, attach, critical-xids, on-unhealthy");
}

// ------------------------------------------------------ [resource.mock] values

TEST(ConfigTest, MockDeviceDefaultsAndAllowList) {
  Result<Config> config = Parse(std::string(kMinimal) + R"([resource.mock]
devices = [{ id = "m0", memory = "1g" }, { id = "M.1_x-2", memory = 1048576, processing-units = 4, numa-node = 3 }]
)");
  ASSERT_TRUE(config.ok()) << config.status().message();
  ASSERT_TRUE((config->resource.devices.Of<MockConfig>("mock") != nullptr));
  EXPECT_FALSE((config->resource.devices.Of<CudaConfig>("cuda") != nullptr));
  const std::vector<MockDevice>& devices = config->resource.devices.Of<MockConfig>("mock")->devices;
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].id, "m0");
  EXPECT_EQ(devices[0].memory_bytes, 1 * kGiB);
  EXPECT_EQ(devices[0].processing_units, 1);
  EXPECT_EQ(devices[0].numa_node, 0);
  EXPECT_EQ(devices[1].id, "M.1_x-2");
  EXPECT_EQ(devices[1].memory_bytes, 1u << 20);
  EXPECT_EQ(devices[1].processing_units, 4);
  EXPECT_EQ(devices[1].numa_node, 3);
  // Without an allow-list the agent uses every declared device.
  EXPECT_EQ(config->resource.devices.Of<MockConfig>("mock")->allowed_devices, (std::vector<std::string>{"m0", "M.1_x-2"}));
  EXPECT_FALSE(config->resource.devices.Of<MockConfig>("mock")->allowed_devices_explicit);

  // An allow-list keeps its own order.
  config = Parse(std::string(kMinimal) + R"([resource.mock]
devices = [{ id = "m0", memory = "1g" }, { id = "m1", memory = "1g" }, { id = "m2", memory = "1g" }]
allowed-devices = ["m2", "m0"]
)");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->resource.devices.Of<MockConfig>("mock")->allowed_devices, (std::vector<std::string>{"m2", "m0"}));
  EXPECT_TRUE(config->resource.devices.Of<MockConfig>("mock")->allowed_devices_explicit);
}

TEST(ConfigTest, MockDevicesMayBeAnArrayOfTables) {
  Result<Config> config = Parse(std::string(kMinimal) + R"([[resource.mock.devices]]
id = "m0"
memory = "2g"
[[resource.mock.devices]]
id = "m1"
memory = "2g"
processing-units = 2147483647
numa-node = 1023
)");
  ASSERT_TRUE(config.ok()) << config.status().message();
  ASSERT_EQ(config->resource.devices.Of<MockConfig>("mock")->devices.size(), 2u);
  EXPECT_EQ(config->resource.devices.Of<MockConfig>("mock")->devices[1].id, "m1");
  EXPECT_EQ(config->resource.devices.Of<MockConfig>("mock")->devices[1].processing_units, 2147483647);
  EXPECT_EQ(config->resource.devices.Of<MockConfig>("mock")->devices[1].numa_node, 1023);
}

TEST(ConfigTest, MockSectionNeedsDevices) {
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource.mock]\n"),
            "agent.toml:3: resource.mock.devices: missing; declare the mock devices, e.g. devices = [{ id = "
            "\"mock0\", memory = \"16g\" }]");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource.mock]\ndevices = []\n"),
            "agent.toml:4: resource.mock.devices: is empty; declare at least one device, or remove [resource.mock] "
            "to turn the mock plugin off");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource.mock]\ndevices = \"mock0\"\n"),
            "agent.toml:4: resource.mock.devices: expected an array of device tables like [{ id = \"mock0\", memory "
            "= \"16g\" }], found a string");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource.mock]\ndevices = [\"mock0\"]\n"),
            "agent.toml:4: resource.mock.devices[0]: expected a table like { id = \"mock0\", memory = \"16g\" }, "
            "found a string");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource.mock]\ndevices = [{ id = \"m0\", memory = \"1g\" }]\n"
                                            "count = 2\n"),
            "agent.toml:5: resource.mock.count: unknown key; known keys of [resource.mock]: devices, "
            "allowed-devices");
}

TEST(ConfigTest, MockDeviceKeysAreChecked) {
  const char* text = R"([agent]
id = "a1"
[resource.mock]
devices = [
  { id = "mock0", memory = "16g" },
  { id = "mock1", memory = "16g", colour = "red" },
  { memory = "16g" },
  { id = "mock3" },
  { id = "mock 4", memory = "1 gig" },
  { id = "mock0", memory = "0", processing-units = 0, numa-node = -1 },
  { id = 6, memory = 1.5, processing-units = "8", numa-node = 1024 },
]
)";
  EXPECT_EQ(ErrorOf(text),
            "agent.toml:6: resource.mock.devices[1].colour: unknown key; known keys of a mock device: id, memory, "
            "processing-units, numa-node\n"
            "agent.toml:7: resource.mock.devices[2].id: missing; give every device an id, e.g. id = \"mock0\"\n"
            "agent.toml:8: resource.mock.devices[3].memory: missing; give every device its memory, e.g. memory = "
            "\"16g\"\n"
            "agent.toml:9: resource.mock.devices[4].id: \"mock 4\" is not a valid device id; use 1 to 64 characters "
            "of A-Z, a-z, 0-9, '.', '_' and '-', starting with a letter or digit\n"
            "agent.toml:9: resource.mock.devices[4].memory: invalid size \"1 gig\": expected a number of bytes with "
            "an optional suffix k, m, g or t (binary, e.g. 512m)\n"
            "agent.toml:10: resource.mock.devices[5].id: \"mock0\" is also the id of resource.mock.devices[0]; give "
            "each device its own id\n"
            "agent.toml:10: resource.mock.devices[5].memory: must be above 0\n"
            "agent.toml:10: resource.mock.devices[5].processing-units: 0 is out of range; use 1 to 2147483647\n"
            "agent.toml:10: resource.mock.devices[5].numa-node: -1 is out of range; use 0 to 1023\n"
            "agent.toml:11: resource.mock.devices[6].id: expected a string, found an integer\n"
            "agent.toml:11: resource.mock.devices[6].memory: expected a size (a string like \"32g\" or an integer of "
            "bytes), found a floating-point number\n"
            "agent.toml:11: resource.mock.devices[6].processing-units: expected an integer, found a string\n"
            "agent.toml:11: resource.mock.devices[6].numa-node: 1024 is out of range; use 0 to 1023");
}

TEST(ConfigTest, MockDeviceIdPattern) {
  auto error_of = [](const std::string& id) {
    return ErrorOf(std::string(kMinimal) + "[resource.mock]\ndevices = [{ id = \"" + id + "\", memory = \"1g\" }]\n");
  };
  const std::string advice =
      "\" is not a valid device id; use 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-', starting with a "
      "letter or digit";
  for (const std::string& id : std::vector<std::string>{"", "-m", ".m", "_m", "m/0", "m:0", std::string(65, 'm')}) {
    EXPECT_EQ(error_of(id), "agent.toml:4: resource.mock.devices[0].id: \"" + id + advice);
  }
  Result<Config> config =
      Parse(std::string(kMinimal) + "[resource.mock]\ndevices = [{ id = \"Z" + std::string(63, '9') +
            "\", memory = \"1g\" }]\n");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->resource.devices.Of<MockConfig>("mock")->devices[0].id, "Z" + std::string(63, '9'));
}

TEST(ConfigTest, MockAllowListNamesDeclaredDevicesOnce) {
  auto error_of = [](const std::string& list) {
    return ErrorOf(std::string(kMinimal) +
                   "[resource.mock]\ndevices = [{ id = \"mock0\", memory = \"1g\" }, { id = \"mock1\", memory = "
                   "\"1g\" }]\nallowed-devices = " +
                   list + "\n");
  };
  EXPECT_EQ(error_of("[\"mock0\", \"mock2\", \"mock0\"]"),
            "agent.toml:5: resource.mock.allowed-devices[1]: \"mock2\" is not a declared device; list ids from "
            "resource.mock.devices: mock0, mock1\n"
            "agent.toml:5: resource.mock.allowed-devices[2]: \"mock0\" is already listed; list each device once");
  EXPECT_EQ(error_of("[0]"), "agent.toml:5: resource.mock.allowed-devices[0]: expected a string, found an integer");
  EXPECT_EQ(error_of("[]"),
            "agent.toml:5: resource.mock.allowed-devices: is empty; list at least one device, or leave "
            "allowed-devices out to use every declared device");
  EXPECT_EQ(error_of("\"mock0\""),
            "agent.toml:5: resource.mock.allowed-devices: expected an array of device ids like [\"mock0\"], found a "
            "string");
}

TEST(ConfigTest, MockAllowListIsNotCheckedAgainstDevicesWithUnknownIds) {
  // A device without a usable id is one problem; the allow-list cannot be judged, so it adds none.
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + R"([resource.mock]
devices = [{ id = "mock0", memory = "1g" }, { memory = "1g" }]
allowed-devices = ["mock1"]
)"),
            "agent.toml:4: resource.mock.devices[1].id: missing; give every device an id, e.g. id = \"mock0\"");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource.mock]\ndevices = 3\nallowed-devices = [\"mock1\"]\n"),
            "agent.toml:4: resource.mock.devices: expected an array of device tables like [{ id = \"mock0\", memory "
            "= \"16g\" }], found an integer");
}

TEST(ConfigTest, UnknownResourceSectionListsThePluginSections) {
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource.rocm]\nallowed-devices = [\"0\"]\n"),
            "agent.toml:3: resource.rocm: unknown section; known sections: agent, api, node, container, resource, "
            "resource.cpu, resource.memory, etcd, pool, resource.cuda, resource.mock");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[resource]\ncuda = true\n"),
            "agent.toml:4: resource.cuda: expected a table, found a boolean");
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "[[resource.mock]]\nid = \"mock0\"\n"),
            "agent.toml:3: resource.mock: expected a table, found an array");
}

// ----------------------------------------------------- collection and syntax

TEST(ConfigTest, EveryProblemIsReportedInFileOrder) {
  const char* text = R"([resource.memory]
size = "1p"

[agent]
id = 7
frobnicate = true

[container]
port-range = [31000, 30000]
network = "nat"

[resource.cuda]
allowed-devices = [0]

[resource.gpu]
count = 1

[resource]
reserved-cpu = "two"
)";
  HostFacts host = TestHost();
  host.docker_host_env = "npipe:////./pipe/docker_engine";
  EXPECT_EQ(ErrorOf(text, host),
            "agent.toml:2: resource.memory.size: invalid size \"1p\": expected a number of bytes with an optional "
            "suffix k, m, g or t (binary, e.g. 512m)\n"
            "agent.toml:5: agent.id: expected a string, found an integer\n"
            "agent.toml:6: agent.frobnicate: unknown key; known keys of [agent]: id, node, rpc-listen-addr, "
            "ipc-base-path, var-base-path, token-file, tokens-file, scaling-group, tls-cert-file, tls-key-file, "
            "tls-self-signed, tls-min-version, tls-client-ca-file, client-roles, audit-log-max-size\n"
            "agent.toml:9: container.port-range: start 31000 is above end 30000\n"
            "agent.toml:10: container.network: \"nat\" is not one of none, host, bridge\n"
            "agent.toml:13: resource.cuda.allowed-devices[0]: expected a string, found the integer 0; quote GPU "
            "indices: \"0\"\n"
            "agent.toml:15: resource.gpu: unknown section; known sections: agent, api, node, container, resource, "
            "resource.cpu, resource.memory, etcd, pool, resource.cuda, resource.mock\n"
            "agent.toml:19: resource.reserved-cpu: expected an integer, found a string\n"
            "agent.toml: container.docker-host: the default comes from $DOCKER_HOST, and "
            "\"npipe:////./pipe/docker_engine\" must start with unix:// or tcp://, e.g. "
            "\"unix:///var/run/docker.sock\"; fix DOCKER_HOST or set [container] docker-host");
}

TEST(ConfigTest, TomlSyntaxErrorsGiveLineAndColumn) {
  EXPECT_EQ(ErrorOf("[agent]\nid = \"a1\"\nnode = \n"),
            "agent.toml:3:8: invalid TOML: Error while parsing key-value pair: expected value, saw '\\n'");
  EXPECT_EQ(ErrorOf("[agent]\nid = \"a1\"\nid = \"a2\"\n"),
            "agent.toml:3:6: invalid TOML: Error while parsing key-value pair: cannot redefine existing string "
            "'id'");
  const std::string unterminated = ErrorOf("[agent\nid = \"a1\"\n");
  EXPECT_EQ(unterminated.rfind("agent.toml:1:", 0), 0) << unterminated;
  EXPECT_NE(unterminated.find("invalid TOML: "), std::string::npos) << unterminated;
}

// Each problem stays on its line even when it quotes a key or a string that
// holds a line break or another control character: they are written escaped.
TEST(ConfigTest, AProblemQuotingALineBreakStaysOnOneLine) {
  const std::string error = ErrorOf("[agent]\nid = \"a\\nb\"\nnode = \"n1\"\n\"x\\ty\" = 1\n");
  EXPECT_EQ(error.find('\n', error.find('\n') + 1), std::string::npos) << error;  // two problems, two lines
  EXPECT_NE(error.find("agent.toml:2: agent.id: \"a\\nb\" is not a valid agent id"), std::string::npos) << error;
  EXPECT_NE(error.find("agent.toml:4: agent.\"x\\ty\": unknown key"), std::string::npos) << error;
}

// -------------------------------------------------------------- LoadConfig

class LoadConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/slotd-config-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    unlink((dir_ + "/agent.toml").c_str());
    rmdir(dir_.c_str());
  }

  // Writes `text` to <dir>/agent.toml and returns its path.
  std::string Write(const std::string& text) {
    const std::string path = dir_ + "/agent.toml";
    std::ofstream(path) << text;
    return path;
  }

  std::string dir_;
};

TEST_F(LoadConfigTest, ReadsTheFileAndNamesItInMessages) {
  const std::string path = Write(kMinimal);
  Result<Config> config = LoadConfig(path, TestHost());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->path, path);
  EXPECT_EQ(config->agent.id, "a1");

  Write("[agent]\nid = 1\n");
  config = LoadConfig(path, TestHost());
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(), path + ":2: agent.id: expected a string, found an integer");
}

TEST_F(LoadConfigTest, MissingOrUnreadableFile) {
  Result<Config> config = LoadConfig(dir_ + "/absent.toml", TestHost());
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(), "cannot read config file " + dir_ + "/absent.toml: No such file or directory");

  config = LoadConfig(dir_, TestHost());
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(), "cannot read config file " + dir_ + ": Is a directory");
}

// ----------------------------------------------------------- HostFacts::Detect

TEST(HostFactsTest, DetectReadsThisHost) {
  const char* saved = getenv("DOCKER_HOST");
  const std::string saved_value = saved ? saved : "";
  setenv("DOCKER_HOST", "unix:///tmp/detect-test.sock", 1);
  HostFacts host = HostFacts::Detect();
  if (saved) setenv("DOCKER_HOST", saved_value.c_str(), 1);
  else unsetenv("DOCKER_HOST");

  EXPECT_FALSE(host.hostname.empty());
  EXPECT_FALSE(host.cpuset.empty());
  EXPECT_TRUE(std::is_sorted(host.cpuset.begin(), host.cpuset.end()));
  EXPECT_GT(host.memory_bytes, 0u);
  EXPECT_EQ(host.memory_bytes % 1024, 0u);  // MemTotal is given in KiB
  EXPECT_EQ(host.docker_host_env, "unix:///tmp/detect-test.sock");
}

TEST(HostFactsTest, DetectMapsCoresToTheirNumaNodes) {
  HostFacts host = HostFacts::Detect();
  std::ifstream node0("/sys/devices/system/node/node0/cpulist");
  if (!node0) {
    EXPECT_TRUE(host.core_numa_node.empty());  // no NUMA directory: every core counts as node 0
    return;
  }
  // Every core this process may run on is online, so some node lists it.
  for (int core : host.cpuset) EXPECT_EQ(host.core_numa_node.count(core), 1u) << "core " << core;
  for (const auto& [core, node] : host.core_numa_node) {
    std::ifstream cpulist("/sys/devices/system/node/node" + std::to_string(node) + "/cpulist");
    EXPECT_TRUE(cpulist.good()) << "core " << core << " on node " << node;
  }
}

}  // namespace
}  // namespace slotd

namespace slotd {
namespace {

// ------------------------------------------------------- [container] ulimits

TEST(ConfigUlimits, WithoutTheKeyMemlockIsTheAgentsOwnHardLimit) {
  const std::string minimal = "[agent]\nid = \"a1\"\n";
  HostFacts host = TestHost();
  host.memlock_limit = -1;
  EXPECT_EQ(ParseConfig(minimal, "agent.toml", host)->container.ulimits, (std::map<std::string, int64_t>{{"memlock", -1}}));
  host.memlock_limit = 8 << 20;
  EXPECT_EQ(ParseConfig(minimal, "agent.toml", host)->container.ulimits,
            (std::map<std::string, int64_t>{{"memlock", 8 << 20}}));
}

TEST(ConfigUlimits, AGivenTableReplacesTheDefaultAndAnEmptyOneLeavesAllToTheEngine) {
  Result<Config> config =
      ParseConfig("[agent]\nid = \"a1\"\n[container]\nulimits = { nofile = 4096, stack = \"unlimited\" }\n",
                  "agent.toml", TestHost());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->container.ulimits, (std::map<std::string, int64_t>{{"nofile", 4096}, {"stack", -1}}));
  config = ParseConfig("[agent]\nid = \"a1\"\n[container]\nulimits = {}\n", "agent.toml", TestHost());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_TRUE(config->container.ulimits.empty());
}

TEST(ConfigUlimits, UnknownNamesAndValuesThatAreNoLimitAreNamed) {
  Result<Config> config = ParseConfig(
      "[agent]\nid = \"a1\"\n[container]\nulimits = { nofiles = 4096, nofile = -1, core = \"none\" }\n",
      "agent.toml", TestHost());
  ASSERT_FALSE(config.ok());
  const std::string& message = config.status().message();
  EXPECT_NE(message.find("container.ulimits.nofiles: unknown limit; known: core, cpu"), std::string::npos) << message;
  EXPECT_NE(message.find("container.ulimits.nofile: expected a whole number or \"unlimited\""), std::string::npos)
      << message;
  EXPECT_NE(message.find("container.ulimits.core: expected a whole number or \"unlimited\""), std::string::npos)
      << message;
  EXPECT_EQ(ParseConfig("[agent]\nid = \"a1\"\n[container]\nulimits = 5\n", "agent.toml", TestHost())
                .status()
                .message(),
            "agent.toml:4: container.ulimits: expected a table like { nofile = 1048576, memlock = \"unlimited\" }, "
            "found an integer");
}

}  // namespace
}  // namespace slotd
