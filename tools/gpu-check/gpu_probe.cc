// slotd-gpu-probe: lists the GPUs that slotd's own NVML loader
// (src/resources/cuda/nvml.cc, as the CUDA plugin uses it) discovers, in the shape
// of `nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv`, so
// that scripts/gpu-check can compare the two line by line.
//
// Usage: slotd-gpu-probe [--nvml-library PATH] [--details]
//   --nvml-library PATH  the libnvidia-ml to load (default libnvidia-ml.so.1,
//                        slotd's default resource.cuda.nvml-library)
//   --details            write the details table to stdout after a blank line
//                        instead of to stderr
// Output: the CSV table on stdout, e.g.
//   index, uuid, name, memory.total [MiB]
//   0, GPU-6f3c1a2b-9d4e-4f5a-8b6c-7d8e9f0a1b2c, NVIDIA H200, 143771 MiB
// (memory in MiB is NVML's total bytes / 2^20, rounded down), then the details
// table of what nvidia-smi's query does not show:
//   index, minor, pci.bus_id, numa_node, memory.total [bytes]
//   0, 0, 00000000:17:00.0, 0, 150754820096
// Exit status: 0 listed; 1 bad arguments; 2 NVML could not be loaded or
// queried (the loader's message is on stderr).
#include <iostream>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "resources/cuda/nvml.h"

namespace {

constexpr int kExitListed = 0;
constexpr int kExitUsage = 1;
constexpr int kExitNvmlFailed = 2;

constexpr char kUsage[] = "usage: slotd-gpu-probe [--nvml-library PATH] [--details]\n";

// What the command line asks for.
struct Options {
  std::string nvml_library = "libnvidia-ml.so.1";  // as slotd's resource.cuda.nvml-library
  bool details_on_stdout = false;                  // --details
};

// Parses argv into `options`. On a bad argument writes why to stderr and
// returns false.
bool ParseArguments(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--nvml-library") {
      if (i + 1 == argc || std::string_view(argv[i + 1]).empty()) {
        std::cerr << "slotd-gpu-probe: --nvml-library needs a library name or path, e.g. "
                     "--nvml-library /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1\n"
                  << kUsage;
        return false;
      }
      options.nvml_library = argv[++i];
    } else if (arg == "--details") {
      options.details_on_stdout = true;
    } else {
      std::cerr << "slotd-gpu-probe: unknown argument \"" << arg << "\"\n" << kUsage;
      return false;
    }
  }
  return true;
}

// The GPUs as nvidia-smi's --format=csv writes index,uuid,name,memory.total.
void WriteSmiTable(const std::vector<slotd::GpuInfo>& gpus, std::ostream& out) {
  out << "index, uuid, name, memory.total [MiB]\n";
  for (const slotd::GpuInfo& gpu : gpus) {
    out << gpu.index << ", " << gpu.uuid << ", " << gpu.name << ", " << (gpu.memory_bytes >> 20) << " MiB\n";
  }
}

// The rest of what the loader reports, and the exact memory size, in the same CSV style.
void WriteDetailsTable(const std::vector<slotd::GpuInfo>& gpus, std::ostream& out) {
  out << "index, minor, pci.bus_id, numa_node, memory.total [bytes]\n";
  for (const slotd::GpuInfo& gpu : gpus) {
    out << gpu.index << ", " << gpu.minor << ", " << gpu.pci_bus_id << ", " << gpu.numa_node << ", "
        << gpu.memory_bytes << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && (std::string_view(argv[1]) == "--help" || std::string_view(argv[1]) == "-h")) {
    std::cout << kUsage;
    return kExitListed;
  }
  Options options;
  if (!ParseArguments(argc, argv, options)) return kExitUsage;

  slotd::Result<std::unique_ptr<slotd::NvmlApi>> nvml = slotd::LoadNvml(options.nvml_library);
  if (!nvml.ok()) {
    std::cerr << "slotd-gpu-probe: " << nvml.status().message() << "\n";
    return kExitNvmlFailed;
  }
  slotd::Result<std::vector<slotd::GpuInfo>> gpus = (*nvml)->Devices();
  if (!gpus.ok()) {
    std::cerr << "slotd-gpu-probe: listing the GPUs through NVML (\"" << options.nvml_library
              << "\") failed: " << gpus.status().message()
              << ". Check the GPUs with nvidia-smi -q and the kernel log (dmesg) for Xid errors.\n";
    return kExitNvmlFailed;
  }

  WriteSmiTable(*gpus, std::cout);
  if (options.details_on_stdout) {
    std::cout << "\n";
    WriteDetailsTable(*gpus, std::cout);
  } else {
    WriteDetailsTable(*gpus, std::cerr);
  }
  return kExitListed;
}
