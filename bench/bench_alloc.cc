// bench_alloc: allocation throughput and fairness of the agent core, with no
// engine and no process: the real Agent and plugins (MakePlugins) over the
// in-memory FakeEngine (tests/testing/fake_engine.h), on a made-up node of
// 64 cores on 2 NUMA nodes, 256 GiB and 8 mock accelerator devices.
//
// Two measurements of the same deterministic mix of requests (cpu 1..8,
// mem 256m..16g in steps of 256m, mock.device 0..2):
//  1. through the core: 1,000 cycles of Agent::CreateKernel until one request
//     is refused with kResourceExhausted, then Agent::DeleteKernel of a
//     random live kernel, so a working set of kernels is always live and
//     every allocation has to fit around it;
//  2. the allocator alone: the same loop straight through the plugins'
//     Allocate and Free, for kAllocatorRequests requests. Target: at least
//     10,000 allocate/free pairs per second.
// It checks what it can on the way: every allocation holds exactly what was
// asked, no core or device is held by two live kernels, every device gets
// used, and at the end, after deleting everything, nothing is held in any
// slot and the fake engine has no container. It exits 1 when a check fails
// or the allocator target is missed.
#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "model/label_codec.h"
#include "model/create_request.h"
#include "common.h"
#include "common/units.h"
#include "resources/mock/mock_kind.h"
#include "testing/fake_engine.h"

namespace slotd::bench {
namespace {

constexpr int kCores = 64;              // cores 0-31 on NUMA node 0, 32-63 on node 1
constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kMemory = 256 * kGiB;
constexpr int kDevices = 8;             // mock0-3 on NUMA node 0, mock4-7 on node 1
constexpr int kCycles = 1000;           // create-until-refused + one delete, through the core
constexpr int kAllocatorRequests = 100'000;  // requests straight through the plugins
constexpr double kAllocatorTarget = 10'000;  // allocate/free pairs per second, at least
constexpr uint32_t kSeed = 20261201;    // the mix and the victims are the same in every run

// The agent of the made-up node: all 64 cores, 256 GiB, the 8 mock devices.
Config BenchConfig() {
  Config config;
  config.agent.id = "bench-alloc";
  config.agent.node = "bench-node";
  for (int core = 0; core < kCores; ++core) config.resource.allowed_cores.push_back(core);
  config.resource.allowed_cores_explicit = true;
  config.resource.memory_size = kMemory;
  config.resource.memory_size_explicit = true;
  config.container.scratch_type = ScratchType::kTmpfs;  // the core's own cost: no scratch directories on the disk
  config.container.allow_root = true;       // the fake's images run as root
  config.container.auto_pull = PullPolicy::kNone;    // nor any image lookup: the core alone
  MockConfig mock;
  for (int i = 0; i < kDevices; ++i) {
    std::string id = "mock" + std::to_string(i);
    mock.devices.push_back({id, 16 * kGiB, 100, i < kDevices / 2 ? 0 : 1});
    mock.allowed_devices.push_back(id);
  }
  config.resource.devices.by_kind["mock"] = std::make_shared<MockConfig>(std::move(mock));
  config.container.stop_timeout = std::chrono::seconds(1);
  return config;
}

// The made-up node: two NUMA nodes of 32 cores.
HostFacts BenchHost() {
  HostFacts host;
  host.hostname = "bench-node";
  for (int core = 0; core < kCores; ++core) {
    host.cpuset.push_back(core);
    host.core_numa_node[core] = core < kCores / 2 ? 0 : 1;
  }
  host.memory_bytes = 2 * kMemory;
  return host;
}

// The deterministic sequence of requests, and of the live kernels to delete.
// std::mt19937's output is fixed by the standard, so every run sees the same mix.
class Mix {
 public:
  Mix() : requests_(kSeed), victims_(kSeed + 1) {}

  // The next create request, kernel id "k-<n>": cpu 1..8, mem 1..64 x 256m, mock.device 0..2.
  CreateRequest NextRequest() {
    int cpu = 1 + static_cast<int>(requests_() % 8);
    uint64_t mem_mib = 256 * (1 + requests_() % 64);
    int devices = static_cast<int>(requests_() % 3);
    nlohmann::json body = {{"kernel_id", "k-" + std::to_string(next_id_++)},
                           {"image", FakeEngine::kDefaultImage},
                           {"command", {"sleep", "3600"}},
                           {"resources", {{"cpu", cpu}, {"mem", std::to_string(mem_mib) + "m"}, {"mock.device", devices}}}};
    return Check(ParseCreateRequest(body), "the create request of the mix");
  }

  // An index in [0, n): which live kernel to delete.
  size_t NextVictim(size_t n) { return victims_() % n; }

 private:
  std::mt19937 requests_;
  std::mt19937 victims_;
  int next_id_ = 0;
};

// The size classes fairness is reported by: cpu 1-2 / 3-5 / 6-8, and the device count.
std::string CpuClass(int cpu) { return cpu <= 2 ? "cpu 1-2" : cpu <= 5 ? "cpu 3-5" : "cpu 6-8"; }
std::string DeviceClass(const ResourceRequest& r) {
  auto it = r.devices.find("mock.device");
  return "mock.device " + std::to_string(it == r.devices.end() ? 0 : it->second);
}

// Attempts and refusals of one size class.
struct ClassCount {
  int attempts = 0;
  int refused = 0;
};

// What the core run saw; every count is of that run alone.
struct CoreRun {
  int creates = 0;
  int refusals = 0;
  int deletes = 0;     // during the cycles
  int final_deletes = 0;  // the live kernels deleted at the end
  size_t max_live = 0;
  double op_seconds = 0;    // inside CreateKernel and DeleteKernel calls only
  double wall_seconds = 0;  // the whole run, checks included
  std::map<std::string, ClassCount> classes;  // by CpuClass and by DeviceClass
  std::map<std::string, int> device_uses;     // device id -> allocations that held it
  std::set<int> cores_used;
};

// Throws unless `described` (DescribeResources or a plugin's Describe) shows
// 0 used and free == capacity for every slot.
void CheckNothingHeld(const nlohmann::json& described, const std::string& where) {
  std::string leaks;
  for (const auto& [slot, figures] : described.items()) {
    auto used = figures.at("used").get<uint64_t>();
    auto free = figures.at("free").get<uint64_t>();
    auto capacity = figures.at("capacity").get<uint64_t>();
    if (used != 0 || free != capacity)
      leaks += " " + slot + " (used " + std::to_string(used) + ", free " + std::to_string(free) + " of " +
               std::to_string(capacity) + ")";
  }
  if (!leaks.empty()) throw BenchFailure(where + ": still held after everything was freed:" + leaks);
}

// Throws unless `kernel` holds exactly what it asked for and nothing that a
// kernel in `held_cores`/`held_devices` holds; then records its cores and devices there.
void CheckAllocation(const Kernel& kernel, std::map<int, std::string>& held_cores,
                     std::map<std::string, std::string>& held_devices) {
  const ResourceRequest& asked = kernel.request.resources;
  const Allocation& got = kernel.allocation;
  auto devices_asked = asked.devices.count("mock.device") ? asked.devices.at("mock.device") : 0;
  auto devices_got = got.devices.count("mock") ? got.devices.at("mock").size() : 0;
  if (static_cast<int>(got.cores.size()) != asked.cpu || got.mem_bytes != asked.mem_bytes ||
      static_cast<int>(devices_got) != devices_asked)
    throw BenchFailure("kernel " + kernel.id() + " asked for " + RequestLabel(kernel.request)["resources"].dump() +
                       " but holds " + got.ToJson().dump());
  for (int core : got.cores)
    if (auto [it, fresh] = held_cores.emplace(core, kernel.id()); !fresh)
      throw BenchFailure("core " + std::to_string(core) + " given to " + kernel.id() + " is held by " + it->second);
  if (got.devices.count("mock"))
    for (const auto& device : got.devices.at("mock"))
      if (auto [it, fresh] = held_devices.emplace(device, kernel.id()); !fresh)
        throw BenchFailure("device " + device + " given to " + kernel.id() + " is held by " + it->second);
}

// Forgets what `kernel` held in `held_cores`/`held_devices`.
void Release(const Kernel& kernel, std::map<int, std::string>& held_cores,
             std::map<std::string, std::string>& held_devices) {
  for (int core : kernel.allocation.cores) held_cores.erase(core);
  if (kernel.allocation.devices.count("mock"))
    for (const auto& device : kernel.allocation.devices.at("mock")) held_devices.erase(device);
}

// Measurement 1: kCycles cycles through Agent with the fake engine.
CoreRun RunCore() {
  FakeEngine engine;
  EventHub hub;
  Config config = BenchConfig();
  auto plugins = Check(MakePlugins(config, BenchHost()), "making the plugins");
  Agent agent(config, engine, std::move(plugins), hub);
  Mix mix;
  CoreRun run;
  std::vector<Kernel> live;
  std::map<int, std::string> held_cores;
  std::map<std::string, std::string> held_devices;

  auto timed = [&](auto&& call) {
    auto start = Clock::now();
    auto result = call();
    run.op_seconds += Millis(start, Clock::now()) / 1000;
    return result;
  };
  auto remove = [&](size_t index) {
    Kernel victim = live[index];
    live[index] = live.back();
    live.pop_back();
    Check(timed([&] { return agent.DeleteKernel(victim.id()); }), "deleting kernel " + victim.id());
    Release(victim, held_cores, held_devices);
  };

  const auto start = Clock::now();
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    while (true) {
      CreateRequest request = mix.NextRequest();
      ClassCount& by_cpu = run.classes[CpuClass(request.resources.cpu)];
      ClassCount& by_devices = run.classes[DeviceClass(request.resources)];
      ++by_cpu.attempts;
      ++by_devices.attempts;
      auto created = timed([&] { return agent.CreateKernel(request); });
      if (!created.ok() && created.status().code() == Status::Code::kResourceExhausted) {
        ++run.refusals;
        ++by_cpu.refused;
        ++by_devices.refused;
        break;
      }
      Kernel kernel = Check(std::move(created), "creating kernel " + request.kernel_id).kernel;
      CheckAllocation(kernel, held_cores, held_devices);
      ++run.creates;
      run.cores_used.insert(kernel.allocation.cores.begin(), kernel.allocation.cores.end());
      if (kernel.allocation.devices.count("mock"))
        for (const auto& device : kernel.allocation.devices.at("mock")) ++run.device_uses[device];
      live.push_back(std::move(kernel));
      run.max_live = std::max(run.max_live, live.size());
    }
    if (live.empty()) throw BenchFailure("a request was refused with no kernel live: the mix does not fit the node");
    remove(mix.NextVictim(live.size()));
    ++run.deletes;
  }
  run.final_deletes = static_cast<int>(live.size());
  while (!live.empty()) remove(live.size() - 1);
  run.wall_seconds = Millis(start, Clock::now()) / 1000;

  CheckNothingHeld(agent.DescribeResources(), "the agent's DescribeResources()");
  if (!agent.ListKernels().empty())
    throw BenchFailure("the agent still lists " + std::to_string(agent.ListKernels().size()) + " kernels");
  if (engine.ContainerCount() != 0)
    throw BenchFailure("the fake engine still has " + std::to_string(engine.ContainerCount()) + " containers");
  return run;
}

// What the allocator run saw.
struct AllocatorRun {
  int pairs = 0;     // successful allocations, each freed once
  int refusals = 0;
  double seconds = 0;
};

// Measurement 2: kAllocatorRequests requests of the same mix straight through
// the plugins, in the core's order (Allocate each; on a refusal Free the
// ones before, then free a random live kernel).
AllocatorRun RunAllocator() {
  auto plugins = Check(MakePlugins(BenchConfig(), BenchHost()), "making the plugins");
  Mix mix;
  std::vector<CreateRequest> requests;  // parsed before the timed part
  for (int i = 0; i < kAllocatorRequests; ++i) requests.push_back(mix.NextRequest());
  AllocatorRun run;
  std::vector<std::string> live;
  auto free_all_of = [&](const std::string& kernel_id) {
    for (auto& plugin : plugins) plugin->Free(kernel_id);
  };

  const auto start = Clock::now();
  for (const CreateRequest& request : requests) {
    Allocation allocation;
    Status refused = Status::Ok();
    for (size_t i = 0; i < plugins.size() && refused.ok(); ++i) {
      refused = plugins[i]->Allocate(request.kernel_id, request.resources, allocation);
      if (!refused.ok())
        for (size_t j = 0; j < i; ++j) plugins[j]->Free(request.kernel_id);
    }
    if (refused.ok()) {
      ++run.pairs;
      live.push_back(request.kernel_id);
      continue;
    }
    if (refused.code() != Status::Code::kResourceExhausted)
      throw BenchFailure("allocating for " + request.kernel_id + ": " + refused.message());
    ++run.refusals;
    if (live.empty()) throw BenchFailure("a request was refused with nothing allocated: the mix does not fit the node");
    size_t victim = mix.NextVictim(live.size());
    free_all_of(live[victim]);
    live[victim] = live.back();
    live.pop_back();
  }
  for (const auto& kernel_id : live) free_all_of(kernel_id);
  run.seconds = Millis(start, Clock::now()) / 1000;

  for (const auto& plugin : plugins) CheckNothingHeld(plugin->Describe(), "plugin " + plugin->Name());
  return run;
}

void PrintCore(const CoreRun& run) {
  int ops = run.creates + run.deletes + run.final_deletes;
  std::printf("  core (Agent + FakeEngine): %d cycles in %.1f ms wall\n", kCycles, run.wall_seconds * 1000);
  std::printf("    creates %d, refusals %d (kResourceExhausted), deletes %d + %d at the end; up to %zu kernels live\n",
              run.creates, run.refusals, run.deletes, run.final_deletes, run.max_live);
  std::printf("    create+delete ops/s %12.0f   (%d ops in %.1f ms inside the calls; refused creates' time included)\n",
              ops / run.op_seconds, ops, run.op_seconds * 1000);
  std::printf("    fairness, refusal rate by request size:\n");
  for (const auto& [name, count] : run.classes)
    std::printf("      %-16s %5d attempts %5d refused  %5.1f%%\n", name.c_str(), count.attempts, count.refused,
                100.0 * count.refused / count.attempts);
  std::string uses;
  for (const auto& [device, n] : run.device_uses) uses += " " + device + ":" + std::to_string(n);
  std::printf("    allocations per device:%s\n", uses.c_str());
  std::printf("    cores ever used: %zu of %d\n", run.cores_used.size(), kCores);
  std::fflush(stdout);
}

void Run() {
  std::printf("bench_alloc: agent core and plugins, fake engine; node of %d cores (2 NUMA nodes), %s, %d mock "
              "devices; mix cpu 1..8, mem 256m..16g, mock.device 0..2 (seed %u)\n",
              kCores, FormatSize(kMemory).c_str(), kDevices, kSeed);
  CoreRun core = RunCore();
  PrintCore(core);
  if (static_cast<int>(core.device_uses.size()) != kDevices)
    throw BenchFailure("only " + std::to_string(core.device_uses.size()) + " of the " + std::to_string(kDevices) +
                       " devices were ever allocated");

  AllocatorRun allocator = RunAllocator();
  double pairs_per_second = allocator.pairs / allocator.seconds;
  std::printf("  allocator alone (plugins' Allocate/Free): %d requests in %.1f ms: %d pairs, %d refusals\n",
              kAllocatorRequests, allocator.seconds * 1000, allocator.pairs, allocator.refusals);
  std::printf("    allocate/free pairs/s %10.0f   (target >= %.0f)\n", pairs_per_second, kAllocatorTarget);
  std::printf("  no leak: after deleting everything every slot shows used 0, free == capacity; the fake engine has "
              "0 containers\n");
  std::fflush(stdout);
  if (pairs_per_second < kAllocatorTarget)
    throw BenchFailure("the allocator made " + std::to_string(static_cast<long>(pairs_per_second)) +
                       " allocate/free pairs per second, below the target of " +
                       std::to_string(static_cast<long>(kAllocatorTarget)));
}

}  // namespace
}  // namespace slotd::bench

int main() { return slotd::bench::RunWithoutEngine("bench_alloc", slotd::bench::Run); }
