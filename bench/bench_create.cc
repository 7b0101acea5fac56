// bench_create: how long a kernel takes to be RUNNING through the agent
// (POST /v1/kernels over its unix socket; the answer comes after the start)
// compared with what a user would otherwise do: create + start the same
// container directly through the Docker Engine API. The two alternate, one
// of each per round, in swapped order every other round; clean-up of each is
// outside the timed part. Twice: plain kernels, then kernels of a real job
// (a scratch directory, two read-only dataset mounts, a 32m /dev/shm and
// ulimits), whose direct twin gets the same: its scratch directory made in
// the timed part, the same mounts, shm and ulimits.
#include <cstdio>
#include <filesystem>
#include <functional>
#include <thread>

#include "model/label_codec.h"
#include "model/create_request.h"
#include "common.h"

namespace slotd::bench {
namespace {

constexpr int kWarmUpRounds = 2;     // rounds run first and not counted
constexpr int kMeasuredRounds = 20;  // rounds counted
constexpr char kMemory[] = "64m";    // each kernel's memory
// Pause after each clean-up so that the engine's and the agent's work on the
// removal (events, relists) does not fall into the next timed part.
constexpr auto kSettle = std::chrono::milliseconds(200);

// What a job kernel adds to the plain one: the host directories it mounts
// read-only (under `datasets`, which the agent's mount-allow allows), its
// /dev/shm and the agent's ulimits.
struct Job {
  std::string datasets;  // empty: a plain kernel
  std::string scratch;   // where the direct twin's scratch directories go
};
constexpr char kJobShm[] = "32m";
constexpr char kJobUlimits[] = "ulimits = { nofile = 4096, memlock = 65536 }\n";

nlohmann::json RequestBody(const std::string& kernel_id, const Job& job) {
  nlohmann::json body = KernelRequestBody(kernel_id, kMemory);
  if (job.datasets.empty()) return body;
  body["resources"]["shm"] = kJobShm;
  body["mounts"] = {{{"source", job.datasets + "/images"}, {"target", "/data/images"}, {"readonly", true}},
                    {{"source", job.datasets + "/labels"}, {"target", "/data/labels"}, {"readonly", true}}};
  return body;
}

// Creates kernel `kernel_id` through the agent and returns the milliseconds
// until the answer; stores what the agent allocated (its container's
// label) in `allocation`; deletes
// the kernel afterwards, untimed.
double TimeAgentCreate(const testing::AgentProcess& agent, const std::string& kernel_id, const Job& job,
                       Allocation& allocation) {
  nlohmann::json body = RequestBody(kernel_id, job);
  auto start = Clock::now();
  nlohmann::json kernel = CallAgent(agent, "POST", "/v1/kernels", body, 201);
  double ms = Millis(start, Clock::now());
  if (kernel.value("state", "") != "RUNNING")
    throw BenchFailure("kernel " + kernel_id + " is not RUNNING after its create: " + kernel.dump());
  // What the agent allocated, as its container's label records it.
  const ContainerInfo container =
      Check(testing::Engine().Inspect(kernel.value("container_id", "")), "inspecting the kernel's container");
  const auto recorded = container.labels.find(label::kAllocations);
  allocation = Check(AllocationFromLabel(nlohmann::json::parse(
                         recorded == container.labels.end() ? std::string() : recorded->second, nullptr, false)),
                     "the kernel's allocations label");
  CallAgent(agent, "DELETE", "/v1/kernels/" + kernel_id, nullptr, 200);
  return ms;
}

// Creates and starts, through the engine, the container the agent would make
// for `kernel_id` with `allocation` (owned by DirectOwner) and returns the
// milliseconds the two calls took (and, for a job, the making of its scratch
// directory); removes it afterwards, untimed.
double TimeDirectCreate(const std::string& agent_id, const std::string& kernel_id, const Job& job,
                        const Allocation& allocation) {
  CreateRequest request = Check(ParseCreateRequest(RequestBody(kernel_id, job)), "the create request");
  ContainerSpec spec = KernelContainerSpec(DirectOwner(agent_id), request, allocation);
  DockerEngine& engine = testing::Engine();
  const std::string scratch = job.scratch + "/" + kernel_id;

  auto start = Clock::now();
  if (!job.datasets.empty()) {
    std::filesystem::create_directories(scratch);
    spec.mounts.push_back({Mount::Type::kBind, scratch, "/home/work", false, 0});
    for (const RequestedMount& m : request.mounts) spec.mounts.push_back({Mount::Type::kBind, m.source, m.target, true, 0});
    spec.shm_bytes = request.resources.ShmBytes();
    spec.ulimits = {{"nofile", 4096}, {"memlock", 65536}};
  }
  std::string id = Check(engine.Create(spec), "creating container " + spec.name);
  Status started = engine.Start(id);
  double ms = Millis(start, Clock::now());
  Status removed = engine.Remove(id, /*force=*/true);
  std::filesystem::remove_all(scratch);
  Check(started, "starting container " + spec.name);
  Check(removed, "removing container " + spec.name);
  return ms;
}

// Rounds of one kind of kernel; prints its figures and ratio.
void Measure(const testing::AgentProcess& agent, const std::string& agent_id, const std::string& name,
             const Job& job) {
  Samples agent_ms, direct_ms;
  // What the agent gave its last kernel; the direct containers get the same.
  // Round 0 starts with the agent, so it is known before the first direct create.
  Allocation allocation;
  for (int round = 0; round < kWarmUpRounds + kMeasuredRounds; ++round) {
    ThrowIfInterrupted();
    const std::string kernel_id = name + "-" + std::to_string(round);
    double a = 0, d = 0;
    std::function<void()> turns[] = {[&] { a = TimeAgentCreate(agent, kernel_id, job, allocation); },
                                     [&] { d = TimeDirectCreate(agent_id, kernel_id, job, allocation); }};
    if (round % 2) std::swap(turns[0], turns[1]);  // so that neither side always goes first
    for (const auto& turn : turns) {
      turn();
      std::this_thread::sleep_for(kSettle);
    }
    if (round >= kWarmUpRounds) {
      agent_ms.Add(a);
      direct_ms.Add(d);
    }
  }
  PrintSamples("agent:  POST /v1/kernels -> RUNNING (" + name + ")", agent_ms);
  PrintSamples("direct: engine create + start, same settings (" + name + ")", direct_ms);
  PrintRatio("agent/direct " + name + " (medians)", agent_ms.Median() / direct_ms.Median(), "<= 1.10");
}

void Run(const std::string& agent_id) {
  testing::TempDir dir;
  const Job job{dir.path() + "/datasets", dir.path() + "/direct-scratch"};
  std::filesystem::create_directories(job.datasets + "/images");
  std::filesystem::create_directories(job.datasets + "/labels");
  testing::AgentOptions options = BenchAgentOptions(agent_id);
  options.container_toml = "mount-allow = [{ path = \"" + job.datasets + "\", mode = \"ro\" }]\n" + kJobUlimits;
  testing::AgentProcess agent(options);
  StartAgent(agent);
  PrintHeader("bench_create", agent.options());
  std::printf("  %d warm-up + %d measured rounds of each kind; each round: one agent create, one direct create\n",
              kWarmUpRounds, kMeasuredRounds);
  Measure(agent, agent_id, "plain", Job{});
  Measure(agent, agent_id, "job", job);
}

}  // namespace
}  // namespace slotd::bench

int main() {
  using namespace slotd::bench;
  const std::string agent_id = UniqueAgentId("create");
  return RunBenchmark("bench_create", {agent_id, DirectOwner(agent_id)}, [&] { Run(agent_id); });
}
