// bench_scale_engine: the agent at a large count of small shared-core kernels,
// with real containers on the real engine: --kernels N (default 1,000) of
// `sleep 3600`, each "cpu": "10m" (a quota from the shared pool) and "mem":
// "16m", created through the agent's API by 8 clients at once. Where the
// machine or the engine cannot hold N, the fill stops at the first create
// that fails, or when the machine's available memory falls under 1 GiB; it
// prints why and measures the rest at the count it reached.
//
// In the same run, each figure beside the target:
//  1. restart: SIGKILL the agent, spawn it again, until the first
//     GET /v1/kernels lists every kernel RUNNING (3 rounds, median; target
//     < 1 s at 1,000); baseline: the engine's owner-filtered container list;
//  2. GET /v1/kernels p50/p99 at N (target p99 < 20 ms), and GET
//     /v1/kernels/{id} at N against the same with one kernel, before the fill;
//     each GET of one kernel alternates with a GET /health, which reads no
//     kernel: what the two share at the same moment (the machine's load,
//     the engine's work on N containers) is not the count's;
//  3. the agent's stats sweep of N kernels (sweep_us of GET /v1/stats; target
//     < 50 ms), its resident memory (< 64 MiB) and CPU over 20 s at a 1 s
//     stats interval (< 5 % of one core), beside the same with no kernel;
//  4. create+delete cycles of one more shared kernel with N present against
//     the same cycles with none, before the fill (target ratio >= 0.90);
//     beside them the engine's own create+start+remove of the same container
//     at 0 and at N: how much of a slow-down is the engine's;
//  5. the engine: its create+start rate while filling (through the agent),
//     the resident memory of dockerd, of its containerd and of the containerd
//     shims of these kernels (one per container, found by walking /proc: a
//     shim's command line names its container; their Pss too, which counts
//     their shared pages once), before and after the fill.
// Times are printed, not asserted: it exits 1 only when a step fails (an HTTP
// error, a kernel not RUNNING, the clean-up). At the end it deletes every
// kernel through the agent (8 at a time) and stops the agent with SIGTERM.
//
// The shared pool is the agent's allowed cores (this machine's 2), and N x 10m
// of quota is more than 2 cores' worth, so the agent's [resource.cpu]
// shared-overcommit is set to what N needs (6 for 1,000 and the extra kernel
// on 2 cores), and its memory to N x 16m and 256m more (at most the node's).
// Every kernel has stop_signal SIGKILL: `sleep` as PID 1 ignores SIGTERM, and
// each delete would otherwise wait out the stop-timeout.
#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "model/label_codec.h"
#include "model/create_request.h"
#include "common.h"
#include "common/units.h"

namespace slotd::bench {
namespace {

constexpr int kDefaultKernels = 1000;  // the count
constexpr char kCpu[] = "10m";         // each kernel's share of the pool
constexpr uint64_t kKernelMemMiB = 16;  // each kernel's memory
constexpr int64_t kCpuQuotaUs = 1000;  // kCpu as the engine holds it: 1 ms of each 100 ms period
constexpr int64_t kCpuPeriodUs = 100000;
constexpr int64_t kPidsLimit = 4096;   // [container] pids-limit's default, which the agent gives a kernel
constexpr int kClients = 8;            // concurrent creates while filling, and deletes at the end
constexpr int kProgressEvery = 100;    // kernels between two progress lines on stderr
constexpr uint64_t kMinAvailableMiB = 1024;  // the fill stops when MemAvailable falls under this
constexpr int kGets = 2000;            // calls timed per GET route and count (p99: the 20th slowest)
constexpr int kCycles = 20;            // create+delete cycles timed per phase
constexpr int kRestarts = 3;           // measured restarts
constexpr int kSweeps = 10;            // stats sweeps sampled
constexpr auto kFootprintWindow = std::chrono::seconds(20);  // the agent's CPU is averaged over this
constexpr auto kRestartLimit = std::chrono::seconds(120);    // a restart slower than this fails the run

// The create request of shared kernel `kernel_id`: sleep, 10m of the pool,
// 16m, stopped with SIGKILL.
nlohmann::json SharedKernelBody(const std::string& kernel_id) {
  nlohmann::json body = KernelRequestBody(kernel_id, std::to_string(kKernelMemMiB) + "m");
  body["resources"]["cpu"] = kCpu;
  body["stop_signal"] = "SIGKILL";
  return body;
}

// The number at the start of the line "<field>:" of `file` (KiB in
// /proc/meminfo and /proc/<pid>/smaps_rollup); -1 when there is no such line.
long FieldKiB(const std::string& file, const std::string& field) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  return -1;
}

// The line "<field>:" of /proc/meminfo in MiB; throws BenchFailure when
// there is no such line.
uint64_t MeminfoMiB(const std::string& field) {
  const long kib = FieldKiB("/proc/meminfo", field);
  if (kib < 0) throw BenchFailure("no " + field + " in /proc/meminfo");
  return static_cast<uint64_t>(kib) / 1024;
}

// The tasks (threads) the machine runs now: the total of /proc/loadavg's
// "running/total" field.
long MachineTasks() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen, running_total;
  in >> one >> five >> fifteen >> running_total;
  const size_t slash = running_total.find('/');
  return slash == std::string::npos ? -1 : std::stol(running_total.substr(slash + 1));
}

// The arguments of process `pid` (/proc/<pid>/cmdline); empty when it is gone
// or is a kernel thread.
std::vector<std::string> CommandLine(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/cmdline");
  std::vector<std::string> args;
  std::string arg;
  while (std::getline(in, arg, '\0')) args.push_back(arg);
  return args;
}

// The resident memory of the engine's processes, in MiB.
struct EngineMemory {
  double dockerd_mib = -1;     // -1: SLOTD_DOCKERD_PID names no running process
  double containerd_mib = -1;  // -1: dockerd runs no containerd of its own
  int shims = 0;               // containerd shims of the containers asked about
  double shims_mib = 0;        // their resident memory, summed
  double shims_pss_mib = 0;    // their proportional share (Pss), summed: shared pages counted once
};

// Reads /proc (never changing anything): dockerd (SLOTD_DOCKERD_PID), the
// containerd it runs (a child named containerd), and every containerd shim
// whose "-id" is one of `container_ids` (its VmRSS, and its Pss from
// smaps_rollup).
EngineMemory MeasureEngineMemory(const std::set<std::string>& container_ids) {
  EngineMemory memory;
  const pid_t dockerd = DockerdPid();
  auto resident_mib = [](pid_t pid) { return static_cast<double>(testing::ProcStatusField(pid, "VmRSS")) / 1024; };
  if (dockerd > 0) memory.dockerd_mib = resident_mib(dockerd);
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::vector<std::string> args = CommandLine(name);
    if (args.empty()) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    const long resident_kib = testing::ProcStatusField(pid, "VmRSS");
    if (resident_kib < 0) continue;  // gone meanwhile
    if (args[0].find("containerd-shim") != std::string::npos) {
      auto id = std::find(args.begin(), args.end(), "-id");
      if (id != args.end() && id + 1 != args.end() && container_ids.count(*(id + 1))) {
        ++memory.shims;
        memory.shims_mib += static_cast<double>(resident_kib) / 1024;
        const long pss_kib = FieldKiB("/proc/" + name + "/smaps_rollup", "Pss");
        memory.shims_pss_mib += static_cast<double>(std::max(0L, pss_kib)) / 1024;
      }
    } else if (dockerd > 0 && std::filesystem::path(args[0]).filename() == "containerd" &&
               testing::ProcStatusField(pid, "PPid") == dockerd) {
      memory.containerd_mib = resident_mib(pid);
    }
  }
  return memory;
}

// The ids of the engine's containers of owner `owner`.
std::set<std::string> OwnedContainerIds(const std::string& owner) {
  std::set<std::string> ids;
  for (const auto& info :
       Check(testing::Engine().List({std::string(label::kOwner) + "=" + owner}), "listing the containers"))
    ids.insert(info.id);
  return ids;
}

// Prints one line of the engine's and the machine's memory, labelled `when`.
void PrintEngineMemory(const std::string& when, const EngineMemory& memory) {
  std::printf("  engine %-14s dockerd %7.1f MiB   containerd %6.1f MiB   %4d shims: resident %8.1f MiB, Pss %7.1f "
              "MiB (%.2f MiB each)   machine: MemAvailable %llu MiB, %ld tasks\n",
              when.c_str(), memory.dockerd_mib, memory.containerd_mib, memory.shims, memory.shims_mib,
              memory.shims_pss_mib, memory.shims ? memory.shims_pss_mib / memory.shims : 0.0,
              static_cast<unsigned long long>(MeminfoMiB("MemAvailable")), MachineTasks());
  std::fflush(stdout);
}

// Prints one line: the label, p50 and p99 in milliseconds, and the target.
void PrintP50P99(const std::string& label, const Samples& samples, const std::string& target) {
  std::printf("  %-52s p50 %8.2f ms   p99 %8.2f ms   %s\n", label.c_str(), samples.Median(), samples.Percentile(99),
              target.c_str());
  std::fflush(stdout);
}

// `calls` GETs of `path` and as many of `control`, one after the other, so
// that both meet the same moments; their times in milliseconds, in that order.
std::pair<Samples, Samples> TimeGetsAlternating(const HttpClient& api, const std::string& path,
                                                const std::string& control, int calls) {
  Samples timed, controls;
  for (int i = 0; i < calls; ++i) {
    timed.Add(TimeGet(api, path, 1).Median());
    controls.Add(TimeGet(api, control, 1).Median());
  }
  return {timed, controls};
}

// Runs `worker` on `clients` threads at once and waits for them all; a
// worker must not throw.
void RunClients(int clients, const std::function<void()>& worker) {
  std::vector<std::jthread> threads;
  for (int i = 0; i < clients; ++i) threads.emplace_back(worker);
}

// Creates and deletes one more shared kernel `kCycles` times through the
// agent (ids <prefix>-N); returns the cycles per second.
double AgentCycleRate(const testing::AgentProcess& agent, const std::string& prefix) {
  const auto start = Clock::now();
  for (int i = 0; i < kCycles; ++i) {
    ThrowIfInterrupted();
    const std::string id = prefix + "-" + std::to_string(i);
    CallAgent(agent, "POST", "/v1/kernels", SharedKernelBody(id), 201);
    CallAgent(agent, "DELETE", "/v1/kernels/" + id, nullptr, 200);
  }
  return kCycles / (Millis(start, Clock::now()) / 1000.0);
}

// Creates, starts and force-removes the container the agent would make for
// one shared kernel on the pool `cores` (its CPU quota, cpuset, init, pids
// limit and /dev/shm; no scratch mount), `kCycles` times, directly through
// the engine with owner `owner`; returns the cycles per second.
double EngineCycleRate(const std::string& owner, const std::string& cores, const std::string& prefix) {
  DockerEngine& engine = testing::Engine();
  const auto start = Clock::now();
  for (int i = 0; i < kCycles; ++i) {
    ThrowIfInterrupted();
    CreateRequest request =
        Check(ParseCreateRequest(SharedKernelBody(prefix + "-" + std::to_string(i))), "the create request");
    Allocation allocation;  // no exclusive core
    allocation.mem_bytes = request.resources.mem_bytes;
    ContainerSpec spec = KernelContainerSpec(owner, request, allocation);
    spec.cpuset_cpus = cores;
    spec.cpu_quota_us = kCpuQuotaUs;
    spec.cpu_period_us = kCpuPeriodUs;
    spec.init = true;
    spec.pids_limit = kPidsLimit;
    spec.shm_bytes = request.resources.mem_bytes;
    const std::string id = Check(engine.Create(spec), "creating container " + spec.name);
    Check(engine.Start(id), "starting container " + spec.name);
    Check(engine.Remove(id, /*force=*/true), "removing container " + spec.name);
  }
  return kCycles / (Millis(start, Clock::now()) / 1000.0);
}

// What filling the agent came to.
struct Fill {
  std::vector<std::string> kernel_ids;  // the kernels created, RUNNING when their create answered
  Samples create_ms;                    // each create's round trip
  double seconds = 0;                   // the fill's wall time
  std::string stopped_by;               // why it stopped short of the target; empty when it did not
};

// Creates kernels <kernel_id(i)> for i in [first, target) through the agent,
// kClients at a time, until all are made or one create fails or the
// machine's available memory falls under kMinAvailableMiB.
Fill FillKernels(const testing::AgentProcess& agent, int first, int target,
                 const std::function<std::string(int)>& kernel_id) {
  Fill fill;
  std::mutex mutex;  // guards fill
  std::atomic<int> next{first};
  std::atomic<bool> stop{false};
  auto stop_because = [&](const std::string& why) {
    std::lock_guard lock(mutex);
    if (fill.stopped_by.empty()) fill.stopped_by = why;
    stop = true;
  };
  const auto start = Clock::now();
  RunClients(kClients, [&] {
    try {
      for (int i = next++; i < target && !stop; i = next++) {
        ThrowIfInterrupted();
        const uint64_t available = MeminfoMiB("MemAvailable");
        if (available < kMinAvailableMiB) {
          stop_because("the machine's available memory (MemAvailable) is down to " + std::to_string(available) +
                       " MiB, under the " + std::to_string(kMinAvailableMiB) + " MiB this benchmark leaves free");
          return;
        }
        const std::string id = kernel_id(i);
        const auto sent = Clock::now();
        const HttpResponse res = agent.Call("POST", "/v1/kernels", SharedKernelBody(id).dump());
        const double ms = Millis(sent, Clock::now());
        if (res.status != 201) {
          stop_because("POST /v1/kernels of " + id + ": HTTP " + std::to_string(res.status) + ": " +
                       res.body.substr(0, 400));
          return;
        }
        std::lock_guard lock(mutex);
        fill.kernel_ids.push_back(id);
        fill.create_ms.Add(ms);
        const size_t made = fill.kernel_ids.size();
        if (made % kProgressEvery == 0)
          std::fprintf(stderr, "bench_scale_engine: %zu kernels created (%.1f a second)\n", made + first,
                       static_cast<double>(made) / (Millis(start, Clock::now()) / 1000.0));
      }
    } catch (const std::exception& e) {
      stop_because(e.what());
    }
  });
  fill.seconds = Millis(start, Clock::now()) / 1000.0;
  return fill;
}

// Deletes `kernel_ids` through the agent, kClients at a time; throws
// BenchFailure naming the first delete that failed. Returns the seconds taken.
double DeleteKernels(const testing::AgentProcess& agent, const std::vector<std::string>& kernel_ids) {
  std::atomic<size_t> next{0};
  std::mutex mutex;  // guards failure
  std::string failure;
  const auto start = Clock::now();
  RunClients(kClients, [&] {
    for (size_t i = next++; i < kernel_ids.size(); i = next++) {
      const HttpResponse res = agent.Call("DELETE", "/v1/kernels/" + kernel_ids[i]);
      if (res.status != 200) {
        std::lock_guard lock(mutex);
        if (failure.empty())
          failure = "DELETE /v1/kernels/" + kernel_ids[i] + ": HTTP " + std::to_string(res.status) + ": " + res.body;
      }
    }
  });
  if (!failure.empty()) throw BenchFailure(failure);
  return Millis(start, Clock::now()) / 1000.0;
}

// The shared-overcommit that lets the pool of `cores` cores give `kernels`
// kernels of kCpu each: ceil(kernels x 10 / (cores x 1000)), 1 to 64.
int SharedOvercommitFor(int kernels, int cores) {
  const int64_t millicores = int64_t{kernels} * 10;
  return static_cast<int>(std::clamp<int64_t>((millicores + cores * 1000 - 1) / (cores * 1000), 1, 64));
}

// Adds "shared-overcommit = <overcommit>" to the [resource.cpu] table of the
// agent's config (the harness writes none, and a table may not be given twice).
void SetSharedOvercommit(const testing::AgentProcess& agent, int overcommit) {
  std::string config = testing::ReadFile(agent.config_path());
  const std::string table = "[resource.cpu]\n";
  const size_t at = config.find(table);
  if (at == std::string::npos) throw BenchFailure("no " + table + " in " + agent.config_path());
  config.insert(at + table.size(), "shared-overcommit = " + std::to_string(overcommit) + "\n");
  testing::WriteFile(agent.config_path(), config);
}

void Run(const std::string& agent_id, int target) {
  testing::AgentOptions options = BenchAgentOptions(agent_id);
  options.container_toml = "stats-interval = \"1s\"\n";
  const uint64_t memory_mib = std::min((uint64_t(target) + 1) * kKernelMemMiB + 256, MeminfoMiB("MemTotal"));
  options.memory = std::to_string(memory_mib) + "m";
  const int cores = static_cast<int>(Check(ParseCoreList(options.cores), "the allowed cores").size());
  const int overcommit = SharedOvercommitFor(target + 1, cores);
  testing::AgentProcess agent(options);
  SetSharedOvercommit(agent, overcommit);
  PrintHeader("bench_scale_engine", options);
  std::printf("  target %d kernels of sleep, cpu %s (shared pool of %d cores, shared-overcommit %d), mem %llum, "
              "stop_signal SIGKILL; agent memory %s, stats-interval 1s; %d clients filling\n",
              target, kCpu, cores, overcommit, static_cast<unsigned long long>(kKernelMemMiB), options.memory.c_str(),
              kClients);
  std::fflush(stdout);
  StartAgent(agent);
  const HttpClient api = HttpClient::Unix(agent.socket_path());

  // Before the fill: the engine, the idle agent, the cycles with no kernel,
  // and the GETs with one.
  PrintEngineMemory("before", MeasureEngineMemory({}));
  const Usage idle = MeasureUsage(agent.pid(), "0 kernels", kFootprintWindow);
  const double agent_rate_empty = AgentCycleRate(agent, "empty");
  const double engine_rate_empty = EngineCycleRate(DirectOwner(agent_id), options.cores, "empty");
  const int width = std::max(4, static_cast<int>(std::to_string(target).size()));
  auto kernel_id = [width](int i) {
    char id[32];
    std::snprintf(id, sizeof id, "k%0*d", width, i);
    return std::string(id);
  };
  const std::string first_id = kernel_id(0);
  CallAgent(agent, "POST", "/v1/kernels", SharedKernelBody(first_id), 201);
  const auto [get_one_alone, health_alone] = TimeGetsAlternating(api, "/v1/kernels/" + first_id, "/health", kGets);
  const Samples list_alone = TimeGet(api, "/v1/kernels", kGets);

  // The fill.
  std::printf("  filling to %d kernels...\n", target);
  std::fflush(stdout);
  const Fill fill = FillKernels(agent, 1, target, kernel_id);
  const int count = static_cast<int>(fill.kernel_ids.size()) + 1;
  if (fill.stopped_by.empty()) {
    std::printf("  filled: %d kernels in %.1f s\n", count, fill.seconds);
  } else {
    ThrowIfInterrupted();
    std::printf("  STOPPED at %d of %d kernels after %.1f s: %s\n", count, target, fill.seconds,
                fill.stopped_by.c_str());
  }
  std::printf("  engine create+start through the agent while filling: %.1f kernels a second with %d clients; "
              "one create p50 %.0f ms, p90 %.0f ms\n",
              (count - 1) / fill.seconds, kClients, fill.create_ms.Median(), fill.create_ms.Percentile(90));
  PollUntil([&] { return ListsAllRunning(agent.socket_path(), count); }, std::chrono::seconds(60),
            "the agent listing all " + std::to_string(count) + " kernels RUNNING");
  const EngineMemory engine_full = MeasureEngineMemory(OwnedContainerIds(agent_id));
  PrintEngineMemory("at " + std::to_string(count), engine_full);
  if (engine_full.shims != count)
    std::printf("  (found %d shims for %d containers: the engine groups them, or runs another runtime)\n",
                engine_full.shims, count);

  // At N: the GETs, the stats, the footprint, the cycles.
  const std::string n = std::to_string(count);
  const Samples list_full = TimeGet(api, "/v1/kernels", kGets);
  const auto [get_one_full, health_full] = TimeGetsAlternating(api, "/v1/kernels/" + first_id, "/health", kGets);
  const Samples sweeps = AgentSweeps(agent, count, kSweeps);
  const Usage busy = MeasureUsage(agent.pid(), n + " kernels", kFootprintWindow);
  const double agent_rate_full = AgentCycleRate(agent, "full");
  const double engine_rate_full = EngineCycleRate(DirectOwner(agent_id), options.cores, "full");

  // Restarts.
  std::printf("  restarts: SIGKILL, spawn, until GET /v1/kernels lists all %d RUNNING (%d rounds)...\n", count,
              kRestarts);
  std::fflush(stdout);
  Samples restart_ms, owner_list_ms;
  for (int round = 0; round < kRestarts; ++round) {
    ThrowIfInterrupted();
    agent.Kill(SIGKILL);
    restart_ms.Add(TimeSpawnUntilReady(agent, [&] { return ListsAllRunning(agent.socket_path(), count); },
                                       kRestartLimit, "the restarted agent listing all " + n + " kernels"));
    owner_list_ms.Add(TimeOwnerList(agent_id, count));
  }

  std::printf("results at %d kernels%s:\n", count, count == target ? "" : " (short of the target: see above)");
  PrintSamples("1. restart: spawn -> GET /v1/kernels lists all " + n, restart_ms);
  PrintSamples("   baseline: the engine's owner-filtered list", owner_list_ms);
  std::printf("     restart median %.1f ms (target < 1000 ms); %.1f x the engine's list\n", restart_ms.Median(),
              restart_ms.Median() / owner_list_ms.Median());
  PrintP50P99("2. GET /v1/kernels at " + n, list_full, "(target p99 < 20 ms)");
  PrintP50P99("   GET /v1/kernels at 1", list_alone, "");
  PrintP50P99("   GET /v1/kernels/{id} at " + n, get_one_full, "(unaffected by the count)");
  PrintP50P99("   GET /v1/kernels/{id} at 1", get_one_alone, "");
  PrintP50P99("   GET /health at " + n + ", alternating with it", health_full, "(reads no kernel)");
  PrintP50P99("   GET /health at 1, alternating with it", health_alone, "");
  std::printf("     GET /v1/kernels/{id} p99 at %s / at 1: %.2f; against GET /health at the same moments: %.2f at %s, "
              "%.2f at 1\n",
              n.c_str(), get_one_full.Percentile(99) / get_one_alone.Percentile(99),
              get_one_full.Percentile(99) / health_full.Percentile(99), n.c_str(),
              get_one_alone.Percentile(99) / health_alone.Percentile(99));
  PrintSamples("3. stats sweep of " + n + " kernels (sweep_us)", sweeps);
  std::printf("     sweep median %.2f ms (target < 50 ms)\n", sweeps.Median());
  std::printf("     agent with %s kernels: %.1f MiB resident (target < 64), %.2f %% of one core (target < 5); "
              "with 0: %.1f MiB, %.2f %%\n",
              n.c_str(), busy.resident_mib, busy.core_percent, idle.resident_mib, idle.core_percent);
  std::printf("  4. create+delete of one more shared kernel through the agent: %.2f cycles/s at %s, %.2f at 0: "
              "ratio %.2f (target >= 0.90)\n",
              agent_rate_full, n.c_str(), agent_rate_empty, agent_rate_full / agent_rate_empty);
  std::printf("     the engine alone (create+start+remove of the same container): %.2f cycles/s at %s, %.2f at 0: "
              "ratio %.2f\n",
              engine_rate_full, n.c_str(), engine_rate_empty, engine_rate_full / engine_rate_empty);
  std::printf("  5. engine: %.1f create+start a second while filling; at %s dockerd %.1f MiB, containerd %.1f MiB, "
              "%d shims %.1f MiB resident (Pss %.1f MiB)\n",
              (count - 1) / fill.seconds, n.c_str(), engine_full.dockerd_mib, engine_full.containerd_mib,
              engine_full.shims, engine_full.shims_mib, engine_full.shims_pss_mib);
  std::fflush(stdout);

  // Clean-up: every kernel through the agent, then the agent.
  std::vector<std::string> all = fill.kernel_ids;
  all.push_back(first_id);
  const double delete_s = DeleteKernels(agent, all);
  std::printf("  clean-up: deleted %zu kernels through the agent in %.1f s (%.1f a second, %d clients)\n", all.size(),
              delete_s, static_cast<double>(all.size()) / delete_s, kClients);
  if (!ListsAllRunning(agent.socket_path(), 0) || !OwnedContainerIds(agent_id).empty())
    throw BenchFailure("kernels or containers of " + agent_id + " left after deleting them all");
  agent.Kill(SIGTERM);
  if (agent.exit_code() != 0)
    throw BenchFailure("the agent exited with " + std::to_string(agent.exit_code()) + " on SIGTERM");
}

// The --kernels value of the command line, or kDefaultKernels; exits 2 on
// anything else.
int ParseKernels(int argc, char** argv) {
  int kernels = kDefaultKernels;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--kernels" && i + 1 < argc) {
      kernels = std::atoi(argv[++i]);
    } else if (arg.rfind("--kernels=", 0) == 0) {
      kernels = std::atoi(arg.c_str() + 10);
    } else {
      kernels = 0;
      break;
    }
  }
  if (kernels < 1) {
    std::fprintf(stderr, "usage: bench_scale_engine [--kernels N]   (N >= 1, default %d)\n", kDefaultKernels);
    std::exit(2);
  }
  return kernels;
}

}  // namespace
}  // namespace slotd::bench

int main(int argc, char** argv) {
  using namespace slotd::bench;
  const int kernels = ParseKernels(argc, argv);
  const std::string agent_id = UniqueAgentId("scale-engine");
  return RunBenchmark("bench_scale_engine", {agent_id, DirectOwner(agent_id)}, [&] { Run(agent_id, kernels); });
}
