// slotd-gpu-probe: lists the GPUs that slotd's own NVML loader
// (src/resources/cuda/nvml.cc, as the CUDA plugin uses it) discovers, in the shape
// of `nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv`, so
// that scripts/gpu-check can compare the two line by line. It only reads:
// NVML's device, health and MIG queries, nothing that sets.
//
// Usage: slotd-gpu-probe [--nvml-library PATH] [--details] [--health] [--mig]
//   --nvml-library PATH  the libnvidia-ml to load (default libnvidia-ml.so.1,
//                        slotd's default resource.cuda.nvml-library)
//   --details            write the details table (and the health and MIG
//                        tables) to stdout, each after a blank line, instead
//                        of to stderr
//   --health             also write the health table: what slotd's health
//                        polls read (NvmlApi::Health) of each GPU
//   --mig                also write the MIG table: the MIG instances slotd
//                        discovers
// Output: the CSV table on stdout, e.g.
//   index, uuid, name, memory.total [MiB]
//   0, GPU-6f3c1a2b-9d4e-4f5a-8b6c-7d8e9f0a1b2c, NVIDIA H200, 143771 MiB
// (memory in MiB is NVML's total bytes / 2^20, rounded down), then the details
// table of what nvidia-smi's query does not show:
//   index, minor, pci.bus_id, numa_node, memory.total [bytes]
//   0, 0, 00000000:17:00.0, 0, 150754820096
// then, with --health, one row per GPU (a reading NVML does not support on
// the GPU is [N/A], as nvidia-smi writes it):
//   index, uuid, lost, ecc.errors.uncorrected.volatile.total, retired_pages.pending, remapped_rows.failure, remapped_rows.pending
//   0, GPU-6f3c1a2b-9d4e-4f5a-8b6c-7d8e9f0a1b2c, No, 0, [N/A], No, No
// then, with --mig, one row per MIG instance (none for a GPU not in MIG mode):
//   gpu.index, gpu.uuid, mig.profile, mig.uuid, mig.gpu_instance_id, mig.compute_instance_id, mig.memory [MiB]
//   0, GPU-6f3c1a2b-…, 3g.71gb, MIG-5c1d…, 2, 0, 71424 MiB
// Each table has its header even when it has no rows.
// A lost GPU (NVML answers GPU_IS_LOST) is listed with what was read of it
// before; what was not is written [GPU is lost]. Its health row says lost Yes.
// A health reading that fails otherwise is written [Unknown Error] and NVML's
// message goes to stderr; the listing still succeeds.
// Exit status: 0 listed; 1 bad arguments; 2 NVML could not be loaded or the
// GPUs could not be listed (the loader's message is on stderr).
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "resources/cuda/nvml.h"

namespace {

constexpr int kExitListed = 0;
constexpr int kExitUsage = 1;
constexpr int kExitNvmlFailed = 2;

constexpr char kUsage[] = "usage: slotd-gpu-probe [--nvml-library PATH] [--details] [--health] [--mig]\n";

// What a table says in place of a value, in nvidia-smi's words.
constexpr char kLost[] = "[GPU is lost]";            // NVML answered GPU_IS_LOST before it was read
constexpr char kNotAvailable[] = "[N/A]";            // NVML does not support the reading on this GPU
constexpr char kUnknownError[] = "[Unknown Error]";  // NVML failed otherwise (the message is on stderr)

// What the command line asks for.
struct Options {
  std::string nvml_library = "libnvidia-ml.so.1";  // as slotd's resource.cuda.nvml-library
  bool details_on_stdout = false;                  // --details
  bool health = false;                             // --health
  bool mig = false;                                // --mig
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
    } else if (arg == "--health") {
      options.health = true;
    } else if (arg == "--mig") {
      options.mig = true;
    } else {
      std::cerr << "slotd-gpu-probe: unknown argument \"" << arg << "\"\n" << kUsage;
      return false;
    }
  }
  return true;
}

// A string field of `gpu`: itself, or kLost when the GPU was lost before it was read.
std::string Known(const slotd::GpuInfo& gpu, const std::string& value) {
  return gpu.lost && value.empty() ? kLost : value;
}

// A number field of `gpu`, read no later than its PCI bus id (the loader reads
// the minor number, then the PCI information, then the NUMA node from it): kLost
// when the GPU was lost before the PCI bus id was read.
std::string KnownWithPci(const slotd::GpuInfo& gpu, long long value) {
  return gpu.lost && gpu.pci_bus_id.empty() ? kLost : std::to_string(value);
}

// The memory size of `gpu` in `unit_shift` (20: MiB, 0: bytes), or kLost when
// the GPU was lost before it was read (no GPU has 0 bytes).
std::string KnownMemory(const slotd::GpuInfo& gpu, int unit_shift, std::string_view suffix) {
  if (gpu.lost && gpu.memory_bytes == 0) return kLost;
  return std::to_string(gpu.memory_bytes >> unit_shift) + std::string(suffix);
}

// The GPUs as nvidia-smi's --format=csv writes index,uuid,name,memory.total.
void WriteSmiTable(const std::vector<slotd::GpuInfo>& gpus, std::ostream& out) {
  out << "index, uuid, name, memory.total [MiB]\n";
  for (const slotd::GpuInfo& gpu : gpus) {
    out << gpu.index << ", " << Known(gpu, gpu.uuid) << ", " << Known(gpu, gpu.name) << ", "
        << KnownMemory(gpu, 20, " MiB") << "\n";
  }
}

// The rest of what the loader reports, and the exact memory size, in the same CSV style.
void WriteDetailsTable(const std::vector<slotd::GpuInfo>& gpus, std::ostream& out) {
  out << "index, minor, pci.bus_id, numa_node, memory.total [bytes]\n";
  for (const slotd::GpuInfo& gpu : gpus) {
    out << gpu.index << ", " << KnownWithPci(gpu, gpu.minor) << ", " << Known(gpu, gpu.pci_bus_id) << ", "
        << KnownWithPci(gpu, gpu.numa_node) << ", " << KnownMemory(gpu, 0, "") << "\n";
  }
}

std::string YesNo(bool value) { return value ? "Yes" : "No"; }
std::string Reading(const std::optional<uint64_t>& value) {
  return value ? std::to_string(*value) : kNotAvailable;
}
std::string Reading(const std::optional<bool>& value) { return value ? YesNo(*value) : kNotAvailable; }

// What slotd's health polls read of each GPU (NvmlApi::Health), in nvidia-smi's
// CSV style. A lost GPU whose UUID was never read cannot be asked (Health takes
// a UUID): it is lost, and its readings are unset, as Health gives them for
// any lost GPU. A reading that fails is written kUnknownError, NVML's message
// on stderr.
void WriteHealthTable(slotd::NvmlApi& nvml, const std::vector<slotd::GpuInfo>& gpus, std::ostream& out) {
  out << "index, uuid, lost, ecc.errors.uncorrected.volatile.total, retired_pages.pending, "
         "remapped_rows.failure, remapped_rows.pending\n";
  for (const slotd::GpuInfo& gpu : gpus) {
    out << gpu.index << ", " << Known(gpu, gpu.uuid) << ", ";
    if (gpu.uuid.empty()) {
      out << YesNo(gpu.lost) << ", " << kNotAvailable << ", " << kNotAvailable << ", " << kNotAvailable << ", "
          << kNotAvailable << "\n";
      continue;
    }
    slotd::Result<slotd::GpuHealthReading> health = nvml.Health(gpu.uuid);
    if (!health.ok()) {
      std::cerr << "slotd-gpu-probe: reading the health of GPU " << gpu.index << " (" << gpu.uuid
                << ") through NVML failed: " << health.status().message()
                << ". Check the GPU with nvidia-smi -q and the kernel log (dmesg) for Xid errors.\n";
      out << YesNo(gpu.lost) << ", " << kUnknownError << ", " << kUnknownError << ", " << kUnknownError << ", "
          << kUnknownError << "\n";
      continue;
    }
    out << YesNo(gpu.lost || health->lost) << ", " << Reading(health->ecc_uncorrected) << ", "
        << Reading(health->retired_pages_pending) << ", " << Reading(health->row_remap_failure) << ", "
        << Reading(health->row_remap_pending) << "\n";
  }
}

// The MIG instances slotd discovers, one row each, in NVML's order.
void WriteMigTable(const std::vector<slotd::GpuInfo>& gpus, std::ostream& out) {
  out << "gpu.index, gpu.uuid, mig.profile, mig.uuid, mig.gpu_instance_id, mig.compute_instance_id, "
         "mig.memory [MiB]\n";
  for (const slotd::GpuInfo& gpu : gpus) {
    for (const slotd::MigInstance& mig : gpu.mig_instances) {
      out << gpu.index << ", " << Known(gpu, gpu.uuid) << ", " << mig.profile << ", " << mig.uuid << ", "
          << mig.gpu_instance_id << ", " << mig.compute_instance_id << ", " << (mig.memory_bytes >> 20)
          << " MiB\n";
    }
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
  // A lost GPU is no error here: Devices() lists it with `lost` set.
  slotd::Result<std::vector<slotd::GpuInfo>> gpus = (*nvml)->Devices();
  if (!gpus.ok()) {
    std::cerr << "slotd-gpu-probe: listing the GPUs through NVML (\"" << options.nvml_library
              << "\") failed: " << gpus.status().message()
              << ". Check the GPUs with nvidia-smi -q and the kernel log (dmesg) for Xid errors.\n";
    return kExitNvmlFailed;
  }

  WriteSmiTable(*gpus, std::cout);
  // The other tables go together: to stdout after blank lines, or to stderr.
  std::ostream& more = options.details_on_stdout ? std::cout : std::cerr;
  if (options.details_on_stdout) more << "\n";
  WriteDetailsTable(*gpus, more);
  if (options.health) {
    more << "\n";
    WriteHealthTable(**nvml, *gpus, more);
  }
  if (options.mig) {
    more << "\n";
    WriteMigTable(*gpus, more);
  }
  return kExitListed;
}
