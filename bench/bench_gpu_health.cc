// bench_gpu_health: the CUDA plugin over the fake libnvidia-ml, in process
// (no engine, no slotd process), with 8 GPUs:
//  - how long an injected Xid 79 takes to take its GPU out of the
//    allocatable set (NVML event -> health monitor -> the board the
//    allocator reads), against the target of 100 ms, and to reach the
//    board's listener (what wakes the agent's device-health look);
//  - allocation throughput (allocate then free one device, in a loop) of a
//    node split into 56 MIG instances (8 GPUs x 7 of 1g.18gb) against the
//    same node of 8 whole GPUs.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "common.h"
#include "resources/cuda/cuda_plugin.h"
#include "testing/temp_tree.h"

namespace slotd::bench {
namespace {

using nlohmann::json;

constexpr int kGpus = 8;
constexpr int kMigPerGpu = 7;
constexpr int kXids = 30;        // injected Xids, one after the other
constexpr int kAllocations = 20000;  // allocate+free cycles per layout

std::string Uuid(const char* prefix, int i) {
  char uuid[64];
  std::snprintf(uuid, sizeof uuid, "%s-%08x-0000-4000-8000-%012x", prefix, i, i);
  return uuid;
}

// 8 GPUs, split into 7 MIG instances each when `mig`; `events` as the fake reads them.
json Node(bool mig, const json& events) {
  json gpus = json::array();
  for (int g = 0; g < kGpus; ++g) {
    json gpu = {{"uuid", Uuid("GPU", g)}, {"name", "Fake H200"}, {"memory", "141g"}, {"numa_node", g / 4}};
    if (mig) {
      json instances = json::array();
      for (int m = 0; m < kMigPerGpu; ++m)
        instances.push_back({{"uuid", Uuid("MIG", g * kMigPerGpu + m)},
                             {"profile", "1g.18gb"},
                             {"memory", "16g"},
                             {"gpu_instance", 7 + m}});
      gpu["mig"] = {{"instances", instances}};
    }
    gpus.push_back(gpu);
  }
  return {{"gpus", gpus}, {"events", events}};
}

void WriteNode(const std::string& path, const json& node) {
  {
    std::ofstream out(path + ".tmp");
    out << node.dump();
  }
  if (std::rename((path + ".tmp").c_str(), path.c_str()) != 0) throw BenchFailure("cannot write " + path);
}

std::unique_ptr<CudaPlugin> Plugin() {
  CudaConfig config;
  config.nvml_library = SLOTD_FAKE_NVML_PATH;
  auto nvml = LoadNvml(config.nvml_library);
  if (!nvml.ok()) throw BenchFailure(nvml.status().message());
  auto plugin = CudaPlugin::Create(config, std::move(*nvml));
  if (!plugin.ok()) throw BenchFailure(plugin.status().message());
  return std::move(*plugin);
}

// Allocate-and-free cycles per second of one `slot` device.
double AllocationsPerSecond(CudaPlugin& plugin, const std::string& slot) {
  ResourceRequest request;
  request.devices[slot] = 1;
  const auto start = Clock::now();
  for (int i = 0; i < kAllocations; ++i) {
    Allocation alloc;
    if (Status s = plugin.Allocate("k", request, alloc); !s.ok()) throw BenchFailure(s.message());
    plugin.Free("k");
  }
  return kAllocations / (Millis(start, Clock::now()) / 1e3);
}

void Run() {
  testing::TempDir dir;
  const std::string file = dir.path() + "/nvml.json";
  setenv("SLOTD_FAKE_NVML_FILE", file.c_str(), 1);
  std::printf("bench_gpu_health: %d fake GPUs (tests/fake_nvml), in process\n", kGpus);

  WriteNode(file, Node(false, json::array()));
  std::unique_ptr<CudaPlugin> whole = Plugin();
  whole->StartHealthMonitor();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the monitor's event set exists
  Samples xid_ms;
  Samples told_ms;
  std::atomic<bool> told{false};
  Clock::time_point told_at;  // written by the listener before `told`
  whole->Health()->SetListener([&] {
    told_at = Clock::now();
    told = true;
  });
  json events = json::array();
  for (int i = 1; i <= kXids; ++i) {
    const std::string uuid = Uuid("GPU", i % kGpus);
    events.push_back({{"id", i}, {"gpu", uuid}, {"xid", 79}});
    told = false;
    const auto start = Clock::now();
    WriteNode(file, Node(false, events));
    PollUntil([&] { return !whole->Health()->Allocatable(uuid); }, std::chrono::seconds(5),
              "GPU " + uuid + " to leave the allocatable set after Xid 79");
    xid_ms.Add(Millis(start, Clock::now()));
    PollUntil([&] { return told.load(); }, std::chrono::seconds(5), "the board's listener to hear of GPU " + uuid);
    told_ms.Add(Millis(start, told_at));
    whole->Health()->Clear(uuid, 0);
  }
  whole->Health()->SetListener(nullptr);
  PrintSamples("Xid 79 written -> GPU no longer allocatable", xid_ms);
  PrintSamples("Xid 79 written -> the board's listener told", told_ms);
  PrintRatio("Xid to unallocatable, median / 100 ms target", xid_ms.Median() / 100.0, "< 1");

  const double whole_rate = AllocationsPerSecond(*whole, "cuda.device");
  whole.reset();
  WriteNode(file, Node(true, json::array()));
  std::unique_ptr<CudaPlugin> split = Plugin();
  const double mig_rate = AllocationsPerSecond(*split, MigSlot("1g.18gb"));
  std::printf("  allocate+free of one device: %.0f/s of 8 whole GPUs, %.0f/s of 56 MIG instances\n", whole_rate,
              mig_rate);
  PrintRatio("allocations per second, 56 MIG instances / 8 whole GPUs", mig_rate / whole_rate, "near 1 (no collapse)");
}

}  // namespace
}  // namespace slotd::bench

int main() { return slotd::bench::RunWithoutEngine("bench_gpu_health", slotd::bench::Run); }
