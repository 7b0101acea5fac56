#include "model/label_codec.h"
#include "model/create_request.h"
#include "common.h"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <filesystem>
#include <set>
#include <sstream>
#include <thread>

#include "common/units.h"

namespace slotd::bench {
namespace {

std::atomic<bool> interrupted{false};  // set by the SIGINT/SIGTERM handler

void OnInterrupt(int) { interrupted = true; }

}  // namespace

double Millis(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double, std::milli>(end - start).count();
}

void Check(const Status& status, const std::string& what) {
  if (!status.ok()) throw BenchFailure(what + ": " + status.message());
}

void ThrowIfInterrupted() {
  if (interrupted) throw BenchFailure("interrupted");
}

Clock::time_point PollUntil(const std::function<bool()>& done, std::chrono::milliseconds limit,
                            const std::string& what) {
  const auto deadline = Clock::now() + limit;
  while (true) {
    bool finished = done();
    auto now = Clock::now();
    if (finished) return now;
    if (now > deadline) throw BenchFailure(what + ": not within " + std::to_string(limit.count()) + " ms");
    ThrowIfInterrupted();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

double Samples::Median() const {
  if (values_.empty()) return NAN;
  std::vector<double> sorted = values_;
  std::sort(sorted.begin(), sorted.end());
  size_t n = sorted.size();
  return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

double Samples::Percentile(double p) const {
  if (values_.empty()) return NAN;
  std::vector<double> sorted = values_;
  std::sort(sorted.begin(), sorted.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100 * sorted.size()));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

long OpenFiles(pid_t pid) {
  long n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd"))
    ++n;
  return n;
}

uint64_t ResidentBytes(pid_t pid) {
  const long kib = testing::ProcStatusField(pid, "VmRSS");
  if (kib < 0) throw BenchFailure("no VmRSS in /proc/" + std::to_string(pid) + "/status");
  return static_cast<uint64_t>(kib) * 1024;
}

double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t paren = text.rfind(')');  // the command name may hold spaces
  if (paren == std::string::npos) throw BenchFailure("cannot parse /proc/" + std::to_string(pid) + "/stat");
  std::istringstream fields(text.substr(paren + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; fields >> field; ++i) {  // field 3 is the state
    if (i == 14) utime = std::stoull(field);
    if (i == 15) {
      stime = std::stoull(field);
      break;
    }
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

Usage MeasureUsage(pid_t pid, const std::string& label, std::chrono::seconds window) {
  const double cpu_start = CpuSeconds(pid);
  const auto start = Clock::now();
  std::this_thread::sleep_for(window);
  const double cpu = CpuSeconds(pid) - cpu_start;
  const double wall_s = Millis(start, Clock::now()) / 1000.0;
  const Usage usage{static_cast<double>(ResidentBytes(pid)) / (1 << 20), 100.0 * cpu / wall_s};
  std::printf("  footprint %-12s resident %6.1f MiB   cpu %5.2f %% of one core (%.2f s over %.0f s)\n", label.c_str(),
              usage.resident_mib, usage.core_percent, cpu, wall_s);
  return usage;
}

pid_t DockerdPid() {
  const char* pid = std::getenv("SLOTD_DOCKERD_PID");
  if (pid == nullptr || *pid == '\0' || !std::filesystem::exists(std::string("/proc/") + pid)) return -1;
  return static_cast<pid_t>(std::atoi(pid));
}

void PrintSamples(const std::string& label, const Samples& samples) {
  std::printf("  %-52s median %8.2f ms   p90 %8.2f ms   n=%zu\n", label.c_str(), samples.Median(),
              samples.Percentile(90), samples.size());
  std::fflush(stdout);
}

void PrintRatio(const std::string& label, double value, const std::string& target) {
  std::printf("  ratio %-46s %8.3f        (target %s)\n", label.c_str(), value, target.c_str());
  std::fflush(stdout);
}

std::string UniqueAgentId(const std::string& bench_name) {
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, "%d-%lx", static_cast<int>(getpid()), static_cast<long>(std::time(nullptr)));
  return "bench-" + bench_name + "-" + suffix;
}

std::string DirectOwner(const std::string& agent_id) { return agent_id + "-direct"; }

testing::AgentOptions BenchAgentOptions(const std::string& agent_id) {
  cpu_set_t affinity;
  CPU_ZERO(&affinity);
  if (sched_getaffinity(0, sizeof affinity, &affinity) != 0) throw BenchFailure("cannot read this process's cpu affinity");
  std::set<int> free_cores;
  for (int core = 0; core < CPU_SETSIZE; ++core)
    if (CPU_ISSET(core, &affinity)) free_cores.insert(core);

  std::set<int> held_ports;
  std::string holders;  // " <container> (of <owner>)" for each container holding a core
  for (const auto& info : Check(testing::Engine().List({label::kAllocations}), "listing the engine's containers")) {
    auto owner = info.labels.find(label::kOwner);
    if (!info.running || owner == info.labels.end() || owner->second == agent_id) continue;
    auto allocation = AllocationFromLabel(nlohmann::json::parse(info.labels.at(label::kAllocations), nullptr, false));
    if (!allocation.ok()) continue;
    for (int core : allocation->cores) free_cores.erase(core);
    for (const auto& binding : allocation->ports) held_ports.insert(binding.host_port);
    if (!allocation->cores.empty()) holders += " " + info.name + " (of " + owner->second + ")";
  }
  if (free_cores.empty())
    throw BenchFailure("every core of this machine is held by running containers of other owners:" + holders +
                       "; wait for them or remove them");

  testing::AgentOptions options;
  options.id = agent_id;
  options.cores = FormatCoreList({free_cores.begin(), free_cores.end()});
  options.memory = "4g";
  options.port_first = 40000;
  auto window_held = [&](int first) {
    auto it = held_ports.lower_bound(first);
    return it != held_ports.end() && *it <= first + 9;
  };
  while (window_held(options.port_first)) options.port_first += 10;
  options.port_last = options.port_first + 9;
  return options;
}

void PrintHeader(const std::string& bench_name, const testing::AgentOptions& options) {
  std::printf("%s: agent %s (allowed-cores %s), engine %s, image %s\n", bench_name.c_str(), options.id.c_str(),
              options.cores.c_str(), testing::DockerHost().c_str(), testing::kTestImage);
}

BenchFailure AgentDidNotStart(const testing::AgentProcess& agent) {
  return BenchFailure("slotd did not become ready (exit code " + std::to_string(agent.exit_code()) +
                      "); its log:\n" + agent.log());
}

void StartAgent(testing::AgentProcess& agent) {
  if (!agent.Start()) throw AgentDidNotStart(agent);
}

nlohmann::json CallAgent(const testing::AgentProcess& agent, const std::string& method, const std::string& path,
                         const nlohmann::json& body, long expect) {
  HttpResponse res = agent.Call(method, path, body.is_null() ? "" : body.dump());
  if (res.status != expect)
    throw BenchFailure(method + " " + path + ": HTTP " + std::to_string(res.status) + " (expected " +
                       std::to_string(expect) + "): " + res.body);
  nlohmann::json parsed = nlohmann::json::parse(res.body, nullptr, false);
  if (parsed.is_discarded()) throw BenchFailure(method + " " + path + ": the answer is not JSON: " + res.body);
  return parsed;
}

Samples TimeGet(const HttpClient& client, const std::string& path, int samples) {
  Samples out;
  for (int i = 0; i < samples; ++i) {
    ThrowIfInterrupted();
    const auto start = Clock::now();
    auto res = client.Request("GET", path, "", std::chrono::seconds(10));
    const auto end = Clock::now();
    if (!res.ok()) throw BenchFailure("GET " + path + " on " + client.Describe() + ": " + res.status().message());
    if (res->status != 200)
      throw BenchFailure("GET " + path + " on " + client.Describe() + ": HTTP " + std::to_string(res->status));
    out.Add(Millis(start, end));
  }
  return out;
}

bool ListsAllRunning(const std::string& socket_path, int count) {
  auto res = HttpClient::Unix(socket_path).Request("GET", "/v1/kernels", "", std::chrono::seconds(5));
  if (!res.ok() || res->status != 200) return false;
  nlohmann::json body = nlohmann::json::parse(res->body, nullptr, false);
  if (body.is_discarded() || !body.contains("kernels")) return false;
  int running = 0;
  for (const auto& kernel : body["kernels"]) running += kernel.value("state", "") == "RUNNING";
  return running == count;
}

double TimeOwnerList(const std::string& owner, int count) {
  auto start = Clock::now();
  auto listed = Check(testing::Engine().List({std::string(label::kOwner) + "=" + owner}), "listing the containers");
  double ms = Millis(start, Clock::now());
  if (static_cast<int>(listed.size()) != count)
    throw BenchFailure("the engine lists " + std::to_string(listed.size()) + " containers of " + owner +
                       ", expected " + std::to_string(count));
  return ms;
}

Samples AgentSweeps(const testing::AgentProcess& agent, int kernels, int sweeps) {
  Samples durations;
  uint64_t last_sweep = 0;
  PollUntil(
      [&] {
        nlohmann::json stats = CallAgent(agent, "GET", "/v1/stats", nullptr, 200);
        const uint64_t sweep = stats["sweeps_total"].get<uint64_t>();
        if (sweep != last_sweep && static_cast<int>(stats["kernels"].size()) == kernels) {
          last_sweep = sweep;
          durations.Add(static_cast<double>(stats["sweep_us"].get<int64_t>()) / 1000.0);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        return static_cast<int>(durations.size()) >= sweeps;
      },
      std::chrono::seconds(2 * sweeps + 30), std::to_string(sweeps) + " stats sweeps of all " +
                                                std::to_string(kernels) + " kernels");
  return durations;
}

nlohmann::json KernelRequestBody(const std::string& kernel_id, const std::string& mem) {
  return {{"kernel_id", kernel_id},
          {"image", testing::kTestImage},
          {"command", {"sleep", "3600"}},
          {"resources", {{"cpu", 1}, {"mem", mem}}}};
}

ContainerSpec KernelContainerSpec(const std::string& owner, const CreateRequest& request,
                                  const Allocation& allocation) {
  Kernel kernel;
  kernel.request = request;
  kernel.agent_id = owner;
  kernel.allocation = allocation;
  ContainerSpec spec;
  spec.name = ContainerName(owner, request.kernel_id);
  spec.image = request.image.name;
  spec.command = request.command;
  for (const auto& [name, value] : request.env) spec.env.push_back(name + "=" + value);
  spec.env.push_back("SLOTD_KERNEL_ID=" + request.kernel_id);
  spec.env.push_back("SLOTD_AGENT_ID=" + owner);
  spec.labels = KernelLabels(kernel);
  spec.cpuset_cpus = FormatCoreList(allocation.cores);
  spec.memory_bytes = static_cast<int64_t>(allocation.mem_bytes);
  spec.network_mode = "none";
  return spec;
}

void CreateCorelessKernels(const std::string& owner, const std::string& prefix, int count, const std::string& mem) {
  CreateCorelessKernels(owner, prefix, count, [&mem](const std::string& id) { return KernelRequestBody(id, mem); });
}

void CreateCorelessKernels(const std::string& owner, const std::string& prefix, int count,
                           const std::function<nlohmann::json(const std::string&)>& body) {
  DockerEngine& engine = testing::Engine();
  const int digits = count > 100 ? 3 : 2;
  for (int i = 0; i < count; ++i) {
    ThrowIfInterrupted();
    char kernel_id[64];
    std::snprintf(kernel_id, sizeof kernel_id, "%s-%0*d", prefix.c_str(), digits, i);
    CreateRequest request = Check(ParseCreateRequest(body(kernel_id)), "the create request");
    Allocation allocation;  // no cores
    allocation.mem_bytes = request.resources.mem_bytes;
    ContainerSpec spec = KernelContainerSpec(owner, request, allocation);
    std::string id = Check(engine.Create(spec), "creating container " + spec.name);
    Check(engine.Start(id), "starting container " + spec.name);
  }
}

double TimeSpawnUntilReady(testing::AgentProcess& agent, const std::function<bool()>& ready,
                           std::chrono::milliseconds limit, const std::string& what) {
  std::atomic<int> start_result{-1};  // -1: Start() still runs; 0: slotd exited or never got ready; 1: ready
  const auto spawn = Clock::now();
  Clock::time_point done;
  {
    std::jthread starter([&] { start_result = agent.Start() ? 1 : 0; });
    done = PollUntil(
        [&] {
          if (start_result == 0) throw AgentDidNotStart(agent);
          return ready();
        },
        limit, what);
  }
  if (start_result != 1) throw AgentDidNotStart(agent);
  return Millis(spawn, done);
}

int RunWithoutEngine(const std::string& name, const std::function<void()>& body) {
  try {
    body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: FAILED: %s\n", name.c_str(), e.what());
    return 1;
  }
  return 0;
}

int RunBenchmark(const std::string& name, const std::vector<std::string>& owners, const std::function<void()>& body) {
  struct sigaction action {};
  action.sa_handler = OnInterrupt;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  const char* docker_host = std::getenv("DOCKER_HOST");
  if (docker_host == nullptr || *docker_host == '\0') {
    std::fprintf(stderr, "%s: DOCKER_HOST is not set: point it at a Docker engine, e.g. one started by "
                         "scripts/dockerd-start (see bench/README.md)\n", name.c_str());
    return 1;
  }
  int exit_status = 0;
  try {
    body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: FAILED: %s\n", name.c_str(), e.what());
    exit_status = 1;
  }
  for (const auto& owner : owners) {
    auto listed = testing::Engine().List({std::string(label::kOwner) + "=" + owner});
    if (!listed.ok()) {
      std::fprintf(stderr, "%s: clean-up: cannot list the containers of owner %s: %s\n", name.c_str(), owner.c_str(),
                   listed.status().message().c_str());
      exit_status = 1;
      continue;
    }
    for (const auto& container : *listed) {
      Status removed = testing::Engine().Remove(container.id, /*force=*/true);
      if (!removed.ok() && removed.code() != Status::Code::kNotFound) {
        std::fprintf(stderr, "%s: clean-up: cannot remove container %s: %s\n", name.c_str(), container.name.c_str(),
                     removed.message().c_str());
        exit_status = 1;
      }
    }
    if (!listed->empty())
      std::fprintf(stderr, "%s: clean-up: removed %zu leftover container(s) of owner %s\n", name.c_str(),
                   listed->size(), owner.c_str());
  }
  return exit_status;
}

}  // namespace slotd::bench
