// Shared pieces of the benchmarks:
// timing and figures, the kernels they ask for, the containers they build
// behind the agent's back, and a run wrapper that always cleans up.
//
// Agents are the integration tests' AgentProcess (tests/integration/harness.h):
// the real build/bin/slotd, each with its own /tmp directory, against the
// engine at $DOCKER_HOST.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/kernel.h"
#include "common/status.h"
#include "engine/container_engine.h"
#include "integration/harness.h"

namespace slotd::bench {

using Clock = std::chrono::steady_clock;

// Milliseconds from `start` to `end`.
double Millis(Clock::time_point start, Clock::time_point end);

// A step of a benchmark that could not be done. RunBenchmark prints it and
// makes the program exit 1.
class BenchFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws BenchFailure("<what>: <message>") unless `status` is OK.
void Check(const Status& status, const std::string& what);

// The value of `result`, or BenchFailure as Check.
template <typename T>
T Check(Result<T> result, const std::string& what) {
  Check(result.status(), what);
  return std::move(result).value();
}

// Throws BenchFailure once SIGINT or SIGTERM has arrived, so that a stopped
// run still unwinds and cleans up. Called by PollUntil and by each round.
void ThrowIfInterrupted();

// Calls `done` every millisecond (after the call returns) until it returns
// true; returns the Clock time of that last call's end. Throws BenchFailure
// naming `what` after `limit`.
Clock::time_point PollUntil(const std::function<bool()>& done, std::chrono::milliseconds limit,
                            const std::string& what);

// Durations in milliseconds and their summary.
class Samples {
 public:
  void Add(double ms) { values_.push_back(ms); }
  // Adds every value of `other`.
  void Add(const Samples& other) { values_.insert(values_.end(), other.values_.begin(), other.values_.end()); }
  size_t size() const { return values_.size(); }
  // The middle value (the mean of the two middle ones for an even count).
  double Median() const;
  // The nearest-rank percentile, `p` in (0, 100].
  double Percentile(double p) const;

 private:
  std::vector<double> values_;
};

// The number of entries of /proc/<pid>/fd: the files `pid` has open.
long OpenFiles(pid_t pid);

// Resident memory of process `pid` in bytes (VmRSS of /proc/<pid>/status).
uint64_t ResidentBytes(pid_t pid);

// CPU seconds (user + system) process `pid` has used, from /proc/<pid>/stat.
double CpuSeconds(pid_t pid);

// What a process costs: its resident memory at the end of a window, and the
// CPU it used over that window, in percent of one core.
struct Usage {
  double resident_mib = 0;
  double core_percent = 0;
};

// Watches `pid` for `window`; prints "footprint <label> ..." and returns it.
Usage MeasureUsage(pid_t pid, const std::string& label, std::chrono::seconds window);

// The engine's process id as SLOTD_DOCKERD_PID names it (scripts/dockerd-start
// exports it); -1 when that is unset or names no running process.
pid_t DockerdPid();

// Prints one line: the label, then median and p90 in milliseconds, and n.
void PrintSamples(const std::string& label, const Samples& samples);

// Prints one line: "ratio <label>: <value>  (target <target>)".
void PrintRatio(const std::string& label, double value, const std::string& target);

// An agent id unique to this run: "bench-<name>-<pid>-<hex seconds>".
std::string UniqueAgentId(const std::string& bench_name);

// The owner label value of the containers a benchmark creates directly
// through the engine: the agent id with "-direct", so the agent never sees,
// adopts or counts them (its event stream and lists filter on its own id).
std::string DirectOwner(const std::string& agent_id);

// Agent settings for a benchmark: id `agent_id`, memory 4g, and as
// allowed-cores and port-range what no running container of another owner
// on the engine holds (by its ai.backend.allocations label; slotd refuses to
// start on such resources, and other tests may share the engine): the
// machine's cores (its 2 when quiet) and 10 ports from 40000 up. Throws
// BenchFailure naming the holders when no core is free.
testing::AgentOptions BenchAgentOptions(const std::string& agent_id);

// The failure of an agent whose Start() returned false: its exit code and log.
BenchFailure AgentDidNotStart(const testing::AgentProcess& agent);

// Prints the first line of a benchmark's output: its name, the agent's id
// and allowed-cores, the engine and the image.
void PrintHeader(const std::string& bench_name, const testing::AgentOptions& options);

// Starts `agent`; throws AgentDidNotStart when it cannot.
void StartAgent(testing::AgentProcess& agent);

// Calls the agent over its unix socket and parses the JSON answer; throws
// BenchFailure unless the HTTP status is `expect`.
nlohmann::json CallAgent(const testing::AgentProcess& agent, const std::string& method, const std::string& path,
                         const nlohmann::json& body, long expect);

// Times `samples` calls of GET `path` on `client`; throws BenchFailure unless
// each answers 200.
Samples TimeGet(const HttpClient& client, const std::string& path, int samples);

// Whether one GET /v1/kernels on the agent's unix socket `socket_path`
// answers with `count` kernels RUNNING.
bool ListsAllRunning(const std::string& socket_path, int count);

// The milliseconds of one owner-filtered list of the engine's containers
// (what `docker ps --filter label=ai.backend.owner=<owner>` costs); throws
// BenchFailure unless it finds `count` containers.
double TimeOwnerList(const std::string& owner, int count);

// Polls GET /v1/stats every 50 ms until `sweeps` distinct sweeps that each
// saw `kernels` kernels have come; returns their durations (sweep_us) in
// milliseconds. Throws BenchFailure when they do not come within 2 s a sweep
// and 30 s more.
Samples AgentSweeps(const testing::AgentProcess& agent, int kernels, int sweeps);

// The create request every benchmark kernel uses: `kernel_id`, the test
// image, `sleep 3600`, 1 cpu and `mem`.
nlohmann::json KernelRequestBody(const std::string& kernel_id, const std::string& mem);

// The container the agent would create for `request` on agent `owner` with
// `allocation`: its name, image, command, environment, labels (KernelLabels),
// cpuset, memory limit and network mode "none" — built from the project's
// own Kernel, CreateRequest and Allocation code.
ContainerSpec KernelContainerSpec(const std::string& owner, const CreateRequest& request,
                                  const Allocation& allocation);

// Creates and starts `count` kernels of owner `owner` directly through the
// engine, as that owner's agent would have made them (KernelContainerSpec of
// KernelRequestBody(<prefix>-NN, `mem`)), but holding NO cpu core: the cpu
// plugin hands out whole exclusive cores, so a machine with few cores cannot
// hold many kernels made through the API. Their request label still says
// cpu 1, as every valid request does; restore claims what the allocation
// label holds, an empty cpu list. Ids are <prefix>-00 .. (3 digits from 100 kernels).
void CreateCorelessKernels(const std::string& owner, const std::string& prefix, int count, const std::string& mem);
// As CreateCorelessKernels above, with kernel <prefix>-NN's request made by
// `body` from its id instead (its "resources" cpu is ignored likewise).
void CreateCorelessKernels(const std::string& owner, const std::string& prefix, int count,
                           const std::function<nlohmann::json(const std::string&)>& body);

// Spawns the (stopped) `agent` with Start() on another thread and calls
// `ready` every millisecond from the spawn until it returns true; returns the
// milliseconds from the spawn to that call's end. Throws AgentDidNotStart
// when slotd exits or never gets ready, BenchFailure naming `what` after `limit`.
double TimeSpawnUntilReady(testing::AgentProcess& agent, const std::function<bool()>& ready,
                           std::chrono::milliseconds limit, const std::string& what);

// Runs `body` and then, whatever happened, force-removes every container
// owned by each of `owners` (by label) and reports how many it removed.
// Returns the process exit status: 0, or 1 when $DOCKER_HOST is unset, `body`
// threw or clean-up failed. SIGINT and SIGTERM make ThrowIfInterrupted throw.
int RunBenchmark(const std::string& name, const std::vector<std::string>& owners, const std::function<void()>& body);

// Runs `body`, which needs no engine (the core over the fake engine, a
// plugin over a fake library); returns 0, or prints "<name>: FAILED: ..."
// and returns 1 when it throws.
int RunWithoutEngine(const std::string& name, const std::function<void()>& body);

}  // namespace slotd::bench
