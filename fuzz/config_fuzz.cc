// Fuzz target: agent.toml, through the public ParseConfig on a fixed fake
// host (that of the docs/config.md example: 16 cores, 8-15 on NUMA
// node 1, 64 GiB; no $DOCKER_HOST).
//
// Invariants: a refusal names the file on every line of its message; an
// accepted config keeps the documented promises (ranges, allow-lists within
// what the host has); and it round-trips: written back as TOML with every
// value explicit, it parses again to the same config.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "config/config.h"
#include "resources/agent_config.h"
#include "resources/cuda/cuda_kind.h"
#include "resources/mock/mock_kind.h"
#include "fuzz_check.h"

namespace {

using slotd::Config;

constexpr char kPath[] = "agent.toml";

const slotd::HostFacts& FakeHost() {
  static const slotd::HostFacts host = [] {
    slotd::HostFacts h;
    h.hostname = "fuzz-node";
    for (int core = 0; core < 16; ++core) {
      h.cpuset.push_back(core);
      if (core >= 8) h.core_numa_node[core] = 1;
    }
    h.memory_bytes = 64ull << 30;
    return h;
  }();
  return host;
}

std::string Millis(std::chrono::milliseconds d) { return std::to_string(d.count()) + "ms"; }
std::string Bytes(uint64_t n) { return std::to_string(n); }

toml::array Strings(const std::vector<std::string>& items) {
  toml::array out;
  for (const std::string& item : items) out.push_back(item);
  return out;
}

// `config` as agent.toml text, every value written out.
std::string Render(const Config& c) {
  toml::table agent{{"id", c.agent.id},
                    {"node", c.agent.node},
                    {"rpc-listen-addr", c.agent.rpc_host + ":" + std::to_string(c.agent.rpc_port)},
                    {"ipc-base-path", c.agent.ipc_base_path},
                    {"var-base-path", c.agent.var_base_path},
                    {"scaling-group", c.agent.scaling_group}};
  if (c.agent.token_file) agent.insert("token-file", *c.agent.token_file);
  toml::table api{{"max-connections", c.api.max_connections},
                  {"request-timeout", Millis(c.api.request_timeout)},
                  {"max-body-size", Bytes(c.api.max_body_size)}};
  toml::table node{{"claims-dir", c.node.claims_dir}};
  toml::table container{{"docker-host", c.container.docker_host},
                        {"port-range", toml::array{c.container.port_range_start, c.container.port_range_end}},
                        {"network", c.container.network},
                        {"stats-type", slotd::WordOf(slotd::StatsTypeWords(), c.container.stats_type)},
                        {"stats-interval", Millis(c.container.stats_interval)},
                        {"stop-timeout", Millis(c.container.stop_timeout)},
                        {"pids-limit", c.container.pids_limit},
                        {"log-max-size", Bytes(c.container.log_max_size)}};
  std::string cores;
  for (int core : c.resource.allowed_cores) cores += (cores.empty() ? "" : ",") + std::to_string(core);
  toml::table resource{{"reserved-cpu", c.resource.reserved_cpu},
                       {"reserved-mem", Bytes(c.resource.reserved_mem)},
                       {"cpu", toml::table{{"allowed-cores", cores}}},
                       {"memory", toml::table{{"size", Bytes(c.resource.memory_size)}}}};
  if (const auto* cuda_config = c.resource.devices.Of<slotd::CudaConfig>("cuda")) {
    toml::table cuda{{"nvml-library", cuda_config->nvml_library}, {"attach", cuda_config->attach}};
    if (!cuda_config->allowed_devices.empty()) cuda.insert("allowed-devices", Strings(cuda_config->allowed_devices));
    resource.insert("cuda", std::move(cuda));
  }
  if (const auto* mock = c.resource.devices.Of<slotd::MockConfig>("mock")) {
    toml::array devices;
    for (const slotd::MockDevice& d : mock->devices) {
      devices.push_back(toml::table{{"id", d.id},
                                    {"memory", Bytes(d.memory_bytes)},
                                    {"processing-units", d.processing_units},
                                    {"numa-node", d.numa_node}});
    }
    resource.insert("mock", toml::table{{"devices", std::move(devices)},
                                        {"allowed-devices", Strings(mock->allowed_devices)}});
  }
  const toml::table root{{"agent", std::move(agent)},         {"api", std::move(api)},
                         {"node", std::move(node)},           {"container", std::move(container)},
                         {"resource", std::move(resource)}};
  std::ostringstream out;
  out << root << "\n";
  return out.str();
}

bool IsSubset(const std::vector<int>& items, const std::vector<int>& of) {
  for (int item : items) {
    if (std::find(of.begin(), of.end(), item) == of.end()) return false;
  }
  return true;
}

void CheckPromises(const Config& c, const std::string& text) {
  const slotd::HostFacts& host = FakeHost();
  FUZZ_CHECK(!c.agent.id.empty() && c.agent.id.size() <= 64, "agent.id \"" + c.agent.id + "\"\n" + text);
  FUZZ_CHECK(c.agent.rpc_port >= 0 && c.agent.rpc_port <= 65535, "rpc port " + std::to_string(c.agent.rpc_port));
  FUZZ_CHECK(c.container.port_range_start >= 1 && c.container.port_range_start <= c.container.port_range_end &&
                 c.container.port_range_end <= 65535,
             "port range " + std::to_string(c.container.port_range_start) + "-" +
                 std::to_string(c.container.port_range_end));
  FUZZ_CHECK(c.container.stats_interval >= std::chrono::milliseconds(100) &&
                 c.container.stats_interval <= std::chrono::hours(1),
             "stats-interval " + Millis(c.container.stats_interval));
  FUZZ_CHECK(!c.resource.allowed_cores.empty() && IsSubset(c.resource.allowed_cores, host.cpuset),
             "allowed cores outside the host's cpuset\n" + text);
  FUZZ_CHECK(c.resource.memory_size > 0 && c.resource.memory_size <= host.memory_bytes,
             "memory size " + std::to_string(c.resource.memory_size) + "\n" + text);
  if (const auto* mock = c.resource.devices.Of<slotd::MockConfig>("mock")) {
    for (const std::string& id : mock->allowed_devices) {
      bool declared = false;
      for (const slotd::MockDevice& d : mock->devices) declared = declared || d.id == id;
      FUZZ_CHECK(declared, "mock allowed device " + id + " is not declared\n" + text);
    }
    FUZZ_CHECK(!mock->devices.empty(), "a mock section without devices\n" + text);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = slotd::ParseConfig(text, kPath, FakeHost());
  if (!config.ok()) {
    const std::string& message = config.status().message();
    FUZZ_CHECK(message.rfind(std::string(kPath) + ":", 0) == 0, "the error does not name the file: " + message);
    // Every line is a problem naming the file, even when it quotes a key or
    // string with a line break in it, or toml++'s description of a syntax
    // error (which can quote the input).
    std::istringstream lines(message);
    for (std::string line; std::getline(lines, line);)
      FUZZ_CHECK(line.rfind(std::string(kPath) + ":", 0) == 0, "an error line that does not name the file: " + line);
    return 0;
  }
  CheckPromises(*config, text);

  const std::string rendered = Render(*config);
  auto again = slotd::ParseConfig(rendered, kPath, FakeHost());
  FUZZ_CHECK(again.ok(), "the config, written out, is refused: " + again.status().message() + "\n--- input:\n" + text +
                             "\n--- written out:\n" + rendered);
  const std::string rerendered = Render(*again);
  FUZZ_CHECK(rerendered == rendered, "the config changes when written out and read again:\n--- input:\n" + text +
                                         "\n--- first:\n" + rendered + "\n--- then:\n" + rerendered);
  return 0;
}
