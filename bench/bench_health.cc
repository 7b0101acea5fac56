// bench_health: what health checks cost the agent, and how soon it tells of
// a check that starts failing.
//
//  - Cost: 100 more kernels, each checked every second by the agent: 50 exec
//    checks (`true`, run in the kernel through the engine) and 50 HTTP
//    checks (GET /healthz of a busybox httpd in the kernel; the kernels have
//    network "none", so the agent connects from inside each kernel's network
//    namespace). The agent's resident memory and CPU over 20 s, against the
//    same agent with no kernel, in the same run; the checks run in that
//    window are counted from slotd_kernel_health_checks_total. Where
//    SLOTD_DOCKERD_PID names the engine, its CPU over the window is printed
//    too: an exec check costs the engine more than the agent. Target: under
//    5 % of one core and 40 MiB.
//  - Latency: a kernel serving HTTP and one with an exec check (interval 1s,
//    timeout 1s, failures 1), first alone, then again with the 100 below
//    checked too. Each round waits a random part of the interval, removes
//    the file the check looks for (from the host, in the kernel's scratch:
//    the failure starts at a known instant) and times until the agent's
//    event stream brings kernel_unhealthy; then puts the file back and
//    waits for kernel_healthy. Target: every round at most interval +
//    timeout + 50 ms. The engine's own exec rate (4 at a time through the
//    Engine API) is printed beside it: exec checks beyond it queue.
//
// The 100 kernels are made directly through the engine exactly as the agent
// would write them, with no cpu core each (see bench_stats), and the agent
// adopts them with their checks, which are in their request label.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "common.h"

namespace slotd::bench {
namespace {

using nlohmann::json;

constexpr int kExecChecked = 50;
constexpr int kHttpChecked = 50;
constexpr char kMemory[] = "16m";
constexpr auto kFootprintWindow = std::chrono::seconds(20);
constexpr int kLatencyRounds = 10;  // per kind of check
constexpr double kIntervalMs = 1000;
constexpr double kTimeoutMs = 1000;
constexpr auto kEventLimit = std::chrono::seconds(10);

// The shell command of a kernel serving `dir` over HTTP on port 8080, with
// a file `healthz` in it.
std::vector<std::string> ServeCommand(const std::string& dir) {
  return {"sh", "-c", "mkdir -p " + dir + " && echo ok > " + dir + "/healthz && exec httpd -f -p 8080 -h " + dir};
}

// A check every second, failing once is unhealthy, reported only.
json CheckEverySecond(json probe) {
  probe["interval"] = "1s";
  probe["timeout"] = "1s";
  probe["failures"] = 1;
  probe["on_unhealthy"] = "none";
  return probe;
}

json ExecCheckedKernel(const std::string& kernel_id) {
  json body = KernelRequestBody(kernel_id, kMemory);
  body["health"] = CheckEverySecond({{"exec", {"true"}}});
  return body;
}

json HttpCheckedKernel(const std::string& kernel_id) {
  json body = KernelRequestBody(kernel_id, kMemory);
  body["command"] = ServeCommand("/tmp/www");
  body["ports"] = {8080};
  body["health"] = CheckEverySecond({{"http", {{"port", 8080}, {"path", "/healthz"}}}});
  return body;
}

// The sum of slotd_kernel_health_checks_total over every kernel.
double ChecksSoFar(const testing::AgentProcess& agent) {
  const HttpResponse metrics = agent.Call("GET", "/metrics");
  if (metrics.status != 200) throw BenchFailure("GET /metrics: HTTP " + std::to_string(metrics.status));
  double total = 0;
  std::istringstream lines(metrics.body);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("slotd_kernel_health_checks_total{", 0) == 0) total += std::stod(line.substr(line.rfind(' ') + 1));
  return total;
}

// The agent's /v1/events stream, read for one kernel's events.
class EventStream {
 public:
  explicit EventStream(const testing::AgentProcess& agent) : client_(agent.port()) {
    const std::string token = agent.options().token.empty() ? agent.GeneratedToken() : agent.options().token;
    if (!client_.connected() ||
        !client_.Send("GET /v1/events HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer " + token + "\r\n\r\n"))
      throw BenchFailure("cannot connect to the agent's port " + std::to_string(agent.port()));
    const std::string head = client_.Read(std::chrono::seconds(10), nullptr, "\r\n\r\n");
    if (head.rfind("HTTP/1.1 200", 0) != 0) throw BenchFailure("GET /v1/events: " + head.substr(0, 300));
    pending_ = head.substr(head.find("\r\n\r\n") + 4);
  }

  // Reads until an event `type` of `kernel_id` arrives; returns when it was
  // read. (The stream is chunked: a chunk's size line may come before an event.)
  Clock::time_point WaitFor(const std::string& type, const std::string& kernel_id) {
    const std::string frame = "event: " + type + "\ndata: ";
    const std::string of_kernel = "\"kernel_id\":\"" + kernel_id + "\"";
    const auto limit = Clock::now() + kEventLimit;
    while (true) {
      for (size_t at; (at = pending_.find("\n\n")) != std::string::npos;) {
        const std::string event = pending_.substr(0, at);
        pending_.erase(0, at + 2);
        if (event.find(frame) != std::string::npos && event.find(of_kernel) != std::string::npos) return Clock::now();
      }
      if (Clock::now() > limit) throw BenchFailure("no " + type + " event of kernel " + kernel_id + " within 10 s");
      bool closed = false;
      pending_ += client_.Read(std::chrono::milliseconds(100), &closed, "\n\n");
      if (closed) throw BenchFailure("the agent closed its event stream");
    }
  }

 private:
  testing::RawClient client_;
  std::string pending_;
};

// `rounds` of one kernel's check made to fail by removing `file` (a path on
// the host) and passing again when it is back; the milliseconds from each
// removal to kernel_unhealthy.
Samples TimeUnhealthy(EventStream& events, const std::string& kernel_id, const std::string& file, int rounds) {
  std::mt19937 random(std::random_device{}());
  std::uniform_int_distribution<int> phase_ms(0, static_cast<int>(kIntervalMs) - 1);
  Samples latency;
  for (int round = 0; round < rounds; ++round) {
    ThrowIfInterrupted();
    std::this_thread::sleep_for(std::chrono::milliseconds(phase_ms(random)));
    const auto broken = Clock::now();
    if (!std::filesystem::remove(file)) throw BenchFailure(file + " was not there to remove");
    latency.Add(Millis(broken, events.WaitFor("kernel_unhealthy", kernel_id)));
    std::ofstream(file) << "ok\n";
    events.WaitFor("kernel_healthy", kernel_id);
  }
  return latency;
}

// CPU seconds of the engine's process, where SLOTD_DOCKERD_PID names it; -1 otherwise.
double EngineCpuSeconds() {
  const pid_t pid = DockerdPid();
  return pid < 0 ? -1 : CpuSeconds(pid);
}

// Runs `command` in `container_id` through the Engine API from 4 threads at
// once for 5 s; returns how many finished a second: what the engine can do.
double EngineExecRate(const std::string& container_id) {
  constexpr int kThreads = 4;
  constexpr auto kFor = std::chrono::seconds(5);
  std::atomic<int> done{0};
  const auto start = Clock::now();
  {
    std::vector<std::jthread> threads;
    for (int i = 0; i < kThreads; ++i)
      threads.emplace_back([&] {
        while (Clock::now() - start < kFor)
          if (testing::Engine().Exec(container_id, {"true"}, std::chrono::seconds(5), nullptr, nullptr).ok()) ++done;
      });
  }
  return done / (Millis(start, Clock::now()) / 1000.0);
}

// Latency rounds of both kernels' checks; prints them, labelled `when`.
std::pair<Samples, Samples> TimeBothUnhealthy(const testing::AgentProcess& agent, EventStream& events, int rounds,
                                              const std::string& when) {
  const std::string scratch = agent.dir() + "/var/scratch/";
  std::pair<Samples, Samples> both{TimeUnhealthy(events, "web", scratch + "web/www/healthz", rounds),
                                   TimeUnhealthy(events, "worker", scratch + "worker/alive", rounds)};
  PrintSamples("http check fails -> kernel_unhealthy, " + when, both.first);
  PrintSamples("exec check fails -> kernel_unhealthy, " + when, both.second);
  return both;
}

void Run(const std::string& agent_id) {
  testing::AgentProcess agent(BenchAgentOptions(agent_id));
  PrintHeader("bench_health", agent.options());
  StartAgent(agent);
  const Usage idle = MeasureUsage(agent.pid(), "0 kernels", kFootprintWindow);

  // Two kernels with a core each, their checks' files in their scratch.
  json web = KernelRequestBody("web", kMemory);
  web["command"] = ServeCommand("/home/work/www");
  web["ports"] = {8080};
  web["health"] = CheckEverySecond({{"http", {{"port", 8080}, {"path", "/healthz"}}}});
  json worker = KernelRequestBody("worker", kMemory);
  worker["command"] = {"sh", "-c", "touch /home/work/alive && exec sleep 3600"};
  worker["health"] = CheckEverySecond({{"exec", {"test", "-f", "/home/work/alive"}}});
  EventStream events(agent);
  CallAgent(agent, "POST", "/v1/kernels", web, 201);
  events.WaitFor("kernel_ready", "web");
  const std::string worker_container = CallAgent(agent, "POST", "/v1/kernels", worker, 201).value("container_id", "");
  events.WaitFor("kernel_ready", "worker");
  const auto [http_ms, exec_ms] = TimeBothUnhealthy(agent, events, kLatencyRounds, "2 kernels");
  const double bound_ms = kIntervalMs + kTimeoutMs + 50;
  std::printf("  slowest: http %.1f ms, exec %.1f ms (target <= %.0f ms: interval + timeout + 50 ms)\n",
              http_ms.Percentile(100), exec_ms.Percentile(100), bound_ms);
  const double engine_execs = EngineExecRate(worker_container);
  std::printf("  the engine's own limit: %.1f execs a second (Engine API, 4 at a time, `true` in one container)\n",
              engine_execs);

  CreateCorelessKernels(agent_id, "x", kExecChecked, ExecCheckedKernel);
  CreateCorelessKernels(agent_id, "h", kHttpChecked, HttpCheckedKernel);
  const size_t checked = kExecChecked + kHttpChecked;
  PollUntil(
      [&] {
        const json kernels = CallAgent(agent, "GET", "/v1/kernels", nullptr, 200)["kernels"];
        size_t ready = 0;
        for (const json& k : kernels) ready += k.value("ready", false) ? 1 : 0;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        return kernels.size() == checked + 2 && ready == checked + 2;
      },
      std::chrono::seconds(90), "the agent adopting the " + std::to_string(checked) + " kernels, each ready");
  std::printf("  + %d kernels with an exec check (true) and %d with an HTTP check (busybox httpd), 16m and no cpu "
              "core each; every check every 1s\n",
              kExecChecked, kHttpChecked);
  const double checks_before = ChecksSoFar(agent);
  const double engine_before = EngineCpuSeconds();
  const auto window_start = Clock::now();
  const Usage busy = MeasureUsage(agent.pid(), "102 checked", kFootprintWindow);
  const double window_s = Millis(window_start, Clock::now()) / 1000.0;
  std::printf("  checks run in that window: %.1f a second (%zu kernels, one a second each)\n",
              (ChecksSoFar(agent) - checks_before) / window_s, checked + 2);
  if (engine_before >= 0)
    std::printf("  the engine (dockerd) over that window: %.2f %% of one core\n",
                100.0 * (EngineCpuSeconds() - engine_before) / window_s);
  TimeBothUnhealthy(agent, events, kLatencyRounds / 2, "102 kernels");

  std::printf("  footprint with 0 kernels: %.1f MiB resident, %.2f %% of one core\n", idle.resident_mib,
              idle.core_percent);
  std::printf("  footprint with 102 checked: %.1f MiB resident (target < 40), %.2f %% of one core (target < 5)\n",
              busy.resident_mib, busy.core_percent);
  for (const char* id : {"web", "worker"}) CallAgent(agent, "DELETE", std::string("/v1/kernels/") + id, nullptr, 200);
}

}  // namespace
}  // namespace slotd::bench

int main() {
  using namespace slotd::bench;
  const std::string agent_id = UniqueAgentId("health");
  return RunBenchmark("bench_health", {agent_id}, [&] { Run(agent_id); });
}
