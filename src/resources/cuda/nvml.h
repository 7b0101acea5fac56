// NvmlApi: the narrow edge between slotd and NVIDIA's management library.
//
// LoadNvml() opens libnvidia-ml with dlopen at run time, so slotd builds and
// runs without any NVIDIA header, SDK or driver; only a node with
// [resource.cuda] needs the library. The tests load a small fake
// libnvidia-ml (tests/fake_nvml) through the same code.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace slotd {

// One MIG instance (a compute instance of a GPU instance) of a GPU in MIG
// mode: what a kernel is given in place of a whole GPU.
struct MigInstance {
  std::string uuid;           // "MIG-5c1d…"
  // The profile as nvidia-smi -L names it ("1g.18gb", "3g.71gb",
  // "1c.3g.71gb"): the end of NVML's name for the instance after "MIG ".
  std::string profile;
  uint64_t memory_bytes = 0;  // the instance's device memory
  unsigned gpu_instance_id = 0;
  unsigned compute_instance_id = 0;
};

// One GPU as NVML reports it.
struct GpuInfo {
  int index = 0;             // NVML's device index (0..count-1), as nvidia-smi numbers it
  std::string uuid;          // "GPU-6f3c…"
  std::string name;          // product name, e.g. "NVIDIA H100 80GB HBM3"
  uint64_t memory_bytes = 0; // total device memory
  int minor = 0;             // N of /dev/nvidiaN
  std::string pci_bus_id;    // as NVML reports it, e.g. "00000000:17:00.0"
  // nvmlDeviceGetNumaNodeId's answer where the driver gives one (only where the
  // GPU's memory is itself a NUMA node, e.g. Grace Hopper); else the node of the
  // GPU's PCI device from sysfs (PciNumaNode); 0 when the host does not say.
  int numa_node = 0;
  // Whether the GPU is in MIG mode now; then its instances, in NVML's order.
  bool mig_enabled = false;
  std::vector<MigInstance> mig_instances;
  // NVML answered GPU_IS_LOST while reading it: only `index`, and `uuid`
  // when it was read before, are known.
  bool lost = false;
};

// What NVML reports of a GPU's health now. A reading NVML does not support
// on this GPU is unset.
struct GpuHealthReading {
  // NVML_ERROR_GPU_IS_LOST from any of the calls: nothing else was read.
  bool lost = false;
  std::optional<uint64_t> ecc_uncorrected;   // volatile uncorrected ECC errors since the driver loaded
  std::optional<bool> retired_pages_pending; // pages retired, waiting for a reset (before Ampere)
  std::optional<bool> row_remap_failure;     // a row remapping failed (Ampere and later)
  std::optional<bool> row_remap_pending;     // rows remapped, waiting for a reset
};

// A critical Xid error NVML delivered.
struct XidEvent {
  std::string gpu_uuid;  // the GPU it happened on
  uint64_t xid = 0;
  // The MIG instance it concerns, on a GPU in MIG mode; unset: the whole GPU.
  std::optional<unsigned> gpu_instance_id;
  std::optional<unsigned> compute_instance_id;
};

// A wait on NVML's Xid events of some GPUs (an nvmlEventSet). Events that
// happened before it was made are not delivered.
// Thread-safety: one thread at a time.
class XidWatch {
 public:
  virtual ~XidWatch() = default;
  // The next event, waiting at most `timeout`; nullopt when none came.
  // kUnavailable naming NVML's error otherwise.
  virtual Result<std::optional<XidEvent>> Wait(std::chrono::milliseconds timeout) = 0;
};

// What one GPU is doing now, as NVML reports it.
struct GpuUsage {
  uint64_t memory_used_bytes = 0;   // device memory in use, by every process and the driver
  uint64_t memory_total_bytes = 0;  // as GpuInfo::memory_bytes
  // Percent of the last sample period (1/6 s to 1 s, by product) during which
  // a kernel ran, and during which device memory was read or written. 0 on a
  // GPU whose driver does not measure them (NVML_ERROR_NOT_SUPPORTED).
  unsigned gpu_util_percent = 0;
  unsigned memory_util_percent = 0;
};

// One process that holds a context on a GPU.
struct GpuProcess {
  // The process id in the pid namespace of the NVIDIA driver, i.e. the host's,
  // whatever namespace the caller runs in: a caller inside a container, or
  // matching a container's processes, maps it (e.g. through NSpid in
  // /proc/<pid>/status).
  unsigned pid = 0;
  // The device memory the process uses; 0 where NVML cannot tell
  // (NVML_VALUE_NOT_AVAILABLE, e.g. without the privilege to see it).
  uint64_t used_memory_bytes = 0;
};

// The NVML calls slotd makes. One instance owns one NVML initialisation: it
// is initialised when LoadNvml returns it and shut down when destroyed.
//
// Thread-safety: the methods may be called from any thread at the same time
// (NVML itself is thread-safe; the instance holds no mutable state).
class NvmlApi {
 public:
  virtual ~NvmlApi();

  // The library path or name this instance was loaded from, as given to LoadNvml.
  virtual const std::string& LibraryPath() const = 0;

  // Every GPU NVML sees, in index order, with its MIG instances. A GPU
  // whose instances cannot be listed is an error. On an NVML error: kUnavailable naming
  // the call and NVML's own text, e.g. "nvmlDeviceGetUUID(GPU 1) failed: GPU is lost".
  virtual Result<std::vector<GpuInfo>> Devices() = 0;

  // Memory and utilisation of the GPU or MIG instance `uuid` (a MIG
  // instance's utilisation reads 0: NVML does not measure it). kNotFound naming
  // the UUID when NVML knows no such GPU; kUnavailable as Devices on any other
  // NVML error, except that a utilisation NVML does not measure reads 0.
  virtual Result<GpuUsage> Usage(const std::string& uuid) = 0;

  // Every process with a compute or graphics context on the GPU or MIG
  // instance `uuid` (a GPU in MIG mode: those of all its instances), each
  // once (a process with both kinds of context is listed in both of NVML's
  // lists), in NVML's order, compute processes first. The list is a snapshot:
  // processes come and go between calls. Errors as Usage.
  virtual Result<std::vector<GpuProcess>> Processes(const std::string& uuid) = 0;

  // The health counters of the GPU `uuid` (not a MIG instance). kNotFound
  // when NVML knows no such GPU; kUnavailable on another NVML error;
  // GPU_IS_LOST is a reading (lost), not an error.
  virtual Result<GpuHealthReading> Health(const std::string& uuid) = 0;

  // Starts a wait on the Xid critical errors of the GPUs `gpu_uuids` (whole
  // GPUs, in MIG mode or not). kUnavailable naming the call and NVML's text
  // when a GPU cannot be registered; kFailedPrecondition when the library
  // has no event entry points. This instance must outlive the watch.
  virtual Result<std::unique_ptr<XidWatch>> WatchXids(const std::vector<std::string>& gpu_uuids) = 0;
};

// Opens `library` (a file name searched like any shared library, or a path)
// and initialises NVML. Errors (kFailedPrecondition), written as advice:
//  - the library cannot be opened: names it, dlerror's text, and what to do;
//  - a required entry point is missing: names the symbol and the library;
//  - nvmlInit_v2 fails: names the call and nvmlErrorString's text.
// Thread-safety: may be called from any thread.
Result<std::unique_ptr<NvmlApi>> LoadNvml(const std::string& library);

// The MIG profile in NVML's name of a MIG instance: what follows its last
// "MIG " ("NVIDIA H100 80GB HBM3 MIG 1g.10gb" -> "1g.10gb"); the whole name
// when it has none.
std::string MigProfileOfName(const std::string& name);

// The NUMA node of the PCI device `pci_bus_id` (NVML's "00000000:17:00.0" or
// the short "0000:17:00.0" form, any case), read from
// `<pci_devices_dir>/<dddd:bb:dd.f>/numa_node`. A missing or unreadable file,
// or -1 (the host has no NUMA information), gives 0.
// Thread-safety: may be called from any thread.
int PciNumaNode(const std::string& pci_bus_id, const std::string& pci_devices_dir = "/sys/bus/pci/devices");

}  // namespace slotd
