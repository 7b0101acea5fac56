#include "resources/cuda/nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <string_view>
#include <type_traits>
#include <utility>

#include "common/ascii.h"

// ---- The part of NVML's C ABI that slotd uses, declared here from NVIDIA's
// public API reference so that no NVIDIA header is needed to build. At global
// scope, as in C, so that the functions' types are NVML's own (UBSan's
// function check compares them with the library's).

using nvmlReturn_t = int;  // an enum in C: 0 is success, anything else an error
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlErrorNotSupported = 3;
constexpr nvmlReturn_t kNvmlErrorNotFound = 6;
constexpr nvmlReturn_t kNvmlErrorInsufficientSize = 7;
constexpr nvmlReturn_t kNvmlErrorTimeout = 10;
constexpr nvmlReturn_t kNvmlErrorGpuIsLost = 15;

// nvmlDeviceGetMigMode's NVML_DEVICE_MIG_ENABLE.
constexpr unsigned int kNvmlMigEnabled = 1;
// nvmlEventTypeXidCriticalError, the event type slotd waits for.
constexpr unsigned long long kNvmlEventXidCritical = 0x8;
// What NVML writes into an event's instance ids when it concerns the whole GPU.
constexpr unsigned int kNvmlNoInstance = 0xFFFFFFFFu;
// nvmlMemoryErrorType_t NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvmlEccCounterType_t NVML_VOLATILE_ECC.
constexpr int kNvmlUncorrected = 1;
constexpr int kNvmlVolatileEcc = 0;

// NVML_VALUE_NOT_AVAILABLE: what NVML writes into a number it cannot measure.
constexpr unsigned long long kNvmlValueNotAvailable = ~0ull;

struct nvmlDevice_st;                   // opaque; only NVML looks inside
using nvmlDevice_t = nvmlDevice_st*;
struct nvmlEventSet_st;                 // opaque
using nvmlEventSet_t = nvmlEventSet_st*;

// One event, as nvmlEventSetWait fills it.
struct nvmlEventData_t {
  nvmlDevice_t device;                // the GPU it was registered for
  unsigned long long eventType;       // kNvmlEventXidCritical for an Xid
  unsigned long long eventData;       // the Xid
  unsigned int gpuInstanceId;         // kNvmlNoInstance: the whole GPU
  unsigned int computeInstanceId;
};

// Device memory in bytes.
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

// PCI attributes (the layout since nvmlDeviceGetPciInfo_v2). The unversioned
// nvmlDeviceGetPciInfo fills only a shorter, older layout whose first 16 bytes
// are its bus id, which lands in busIdLegacy here.
struct nvmlPciInfo_t {
  char busIdLegacy[16];         // "dddd:bb:dd.f", NUL-terminated
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;     // device id << 16 | vendor id
  unsigned int pciSubSystemId;
  char busId[32];               // "dddddddd:bb:dd.f", NUL-terminated
};

// Utilisation in percent over the last sample period.
struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};

// One running process, as the unversioned nvmlDevice{Compute,Graphics}RunningProcesses fill it.
struct nvmlProcessInfo_v1_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // bytes, or kNvmlValueNotAvailable
};

// One running process, as the _v2 entry points fill it, and the _v3 ones on
// every driver but 535.43 to 535.86 (which appended a usedGpuCcProtectedMemory
// to the _v3 layout without renaming it). 24 bytes.
struct nvmlProcessInfo_v2_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // bytes, or kNvmlValueNotAvailable
  unsigned int gpuInstanceId;        // MIG instance ids; 0xFFFFFFFF without MIG
  unsigned int computeInstanceId;
};

namespace slotd {

NvmlApi::~NvmlApi() = default;

namespace {

// The process lists NVML keeps, per GPU.
enum class ProcessKind { kCompute, kGraphics };

// Buffer sizes NVML documents as always large enough
// (NVML_DEVICE_UUID_V2_BUFFER_SIZE, NVML_DEVICE_NAME_V2_BUFFER_SIZE).
constexpr unsigned int kUuidBufferSize = 96;
constexpr unsigned int kNameBufferSize = 96;

// The entry points, resolved by ResolveFunctions. To use another NVML call,
// add a member here and one line there.
struct NvmlFunctions {
  nvmlReturn_t (*init)() = nullptr;                                            // nvmlInit_v2
  nvmlReturn_t (*shutdown)() = nullptr;                                        // nvmlShutdown
  const char* (*error_string)(nvmlReturn_t) = nullptr;                         // nvmlErrorString
  nvmlReturn_t (*get_count)(unsigned int*) = nullptr;                          // nvmlDeviceGetCount_v2
  nvmlReturn_t (*get_handle_by_index)(unsigned int, nvmlDevice_t*) = nullptr;  // nvmlDeviceGetHandleByIndex_v2
  nvmlReturn_t (*get_uuid)(nvmlDevice_t, char*, unsigned int) = nullptr;       // nvmlDeviceGetUUID
  nvmlReturn_t (*get_name)(nvmlDevice_t, char*, unsigned int) = nullptr;       // nvmlDeviceGetName
  nvmlReturn_t (*get_memory_info)(nvmlDevice_t, nvmlMemory_t*) = nullptr;      // nvmlDeviceGetMemoryInfo
  nvmlReturn_t (*get_minor_number)(nvmlDevice_t, unsigned int*) = nullptr;     // nvmlDeviceGetMinorNumber
  nvmlReturn_t (*get_pci_info)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;        // nvmlDeviceGetPciInfo_v3/_v2/(v1)
  nvmlReturn_t (*get_numa_node_id)(nvmlDevice_t, unsigned int*) = nullptr;     // nvmlDeviceGetNumaNodeId; optional
  nvmlReturn_t (*get_handle_by_uuid)(const char*, nvmlDevice_t*) = nullptr;    // nvmlDeviceGetHandleByUUID
  nvmlReturn_t (*get_utilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr; // nvmlDeviceGetUtilizationRates
  // Each process list through the newest layout the library has: the
  // nvmlProcessInfo_v2_t entry point where there is one, else the v1 one.
  using ProcessesV2 = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_v2_t*);
  using ProcessesV1 = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_v1_t*);
  ProcessesV2 get_compute_processes = nullptr;     // nvmlDeviceGetComputeRunningProcesses_v2/_v3
  ProcessesV1 get_compute_processes_v1 = nullptr;  // nvmlDeviceGetComputeRunningProcesses, if neither
  ProcessesV2 get_graphics_processes = nullptr;    // nvmlDeviceGetGraphicsRunningProcesses_v2/_v3
  ProcessesV1 get_graphics_processes_v1 = nullptr; // nvmlDeviceGetGraphicsRunningProcesses, if neither
  // MIG (drivers since R450); all optional: without them no GPU is in MIG mode.
  nvmlReturn_t (*get_mig_mode)(nvmlDevice_t, unsigned int*, unsigned int*) = nullptr;  // nvmlDeviceGetMigMode
  nvmlReturn_t (*get_max_mig_count)(nvmlDevice_t, unsigned int*) = nullptr;  // nvmlDeviceGetMaxMigDeviceCount
  nvmlReturn_t (*get_mig_handle)(nvmlDevice_t, unsigned int, nvmlDevice_t*) = nullptr;  // ...GetMigDeviceHandleByIndex
  nvmlReturn_t (*get_gpu_instance_id)(nvmlDevice_t, unsigned int*) = nullptr;      // nvmlDeviceGetGpuInstanceId
  nvmlReturn_t (*get_compute_instance_id)(nvmlDevice_t, unsigned int*) = nullptr;  // nvmlDeviceGetComputeInstanceId
  // Health; optional: a reading without its entry point stays unset.
  nvmlReturn_t (*get_total_ecc)(nvmlDevice_t, int, int, unsigned long long*) = nullptr;  // nvmlDeviceGetTotalEccErrors
  nvmlReturn_t (*get_retired_pending)(nvmlDevice_t, int*) = nullptr;  // nvmlDeviceGetRetiredPagesPendingStatus
  nvmlReturn_t (*get_remapped_rows)(nvmlDevice_t, unsigned int*, unsigned int*, unsigned int*,
                                    unsigned int*) = nullptr;  // nvmlDeviceGetRemappedRows
  // Events; optional: without them WatchXids fails and health is only polled.
  nvmlReturn_t (*event_set_create)(nvmlEventSet_t*) = nullptr;                               // nvmlEventSetCreate
  nvmlReturn_t (*register_events)(nvmlDevice_t, unsigned long long, nvmlEventSet_t) = nullptr;  // nvmlDeviceRegisterEvents
  nvmlReturn_t (*event_set_wait)(nvmlEventSet_t, nvmlEventData_t*, unsigned int) = nullptr;  // nvmlEventSetWait_v2/(v1)
  nvmlReturn_t (*event_set_free)(nvmlEventSet_t) = nullptr;                                  // nvmlEventSetFree
};

// Closes a dlopen handle.
struct DlClose {
  void operator()(void* handle) const { dlclose(handle); }
};
using LibraryHandle = std::unique_ptr<void, DlClose>;

// Fills `fns` from `handle`. Fails naming the first required symbol missing.
Status ResolveFunctions(void* handle, const std::string& library, NvmlFunctions& fns) {
  std::string missing;
  auto optional = [&](auto& slot, const char* symbol) {
    if (slot == nullptr) slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(dlsym(handle, symbol));
  };
  auto required = [&](auto& slot, const char* symbol) {
    optional(slot, symbol);
    if (slot == nullptr && missing.empty()) missing = symbol;
  };
  required(fns.init, "nvmlInit_v2");
  required(fns.shutdown, "nvmlShutdown");
  required(fns.error_string, "nvmlErrorString");
  required(fns.get_count, "nvmlDeviceGetCount_v2");
  required(fns.get_handle_by_index, "nvmlDeviceGetHandleByIndex_v2");
  required(fns.get_uuid, "nvmlDeviceGetUUID");
  required(fns.get_name, "nvmlDeviceGetName");
  required(fns.get_memory_info, "nvmlDeviceGetMemoryInfo");
  required(fns.get_minor_number, "nvmlDeviceGetMinorNumber");
  optional(fns.get_pci_info, "nvmlDeviceGetPciInfo_v3");  // newest first; each fills nvmlPciInfo_t
  optional(fns.get_pci_info, "nvmlDeviceGetPciInfo_v2");
  required(fns.get_pci_info, "nvmlDeviceGetPciInfo");
  optional(fns.get_numa_node_id, "nvmlDeviceGetNumaNodeId");  // drivers since 2023 only
  required(fns.get_handle_by_uuid, "nvmlDeviceGetHandleByUUID");
  required(fns.get_utilization, "nvmlDeviceGetUtilizationRates");
  // _v2 before _v3: _v2's layout never changed, while _v3's grew by 8 bytes on
  // drivers 535.43 to 535.86, which would overrun a v2 buffer.
  optional(fns.get_compute_processes, "nvmlDeviceGetComputeRunningProcesses_v2");
  optional(fns.get_compute_processes, "nvmlDeviceGetComputeRunningProcesses_v3");
  if (fns.get_compute_processes == nullptr) {
    required(fns.get_compute_processes_v1, "nvmlDeviceGetComputeRunningProcesses");
  }
  optional(fns.get_graphics_processes, "nvmlDeviceGetGraphicsRunningProcesses_v2");
  optional(fns.get_graphics_processes, "nvmlDeviceGetGraphicsRunningProcesses_v3");
  if (fns.get_graphics_processes == nullptr) {
    required(fns.get_graphics_processes_v1, "nvmlDeviceGetGraphicsRunningProcesses");
  }
  optional(fns.get_mig_mode, "nvmlDeviceGetMigMode");
  optional(fns.get_max_mig_count, "nvmlDeviceGetMaxMigDeviceCount");
  optional(fns.get_mig_handle, "nvmlDeviceGetMigDeviceHandleByIndex");
  optional(fns.get_gpu_instance_id, "nvmlDeviceGetGpuInstanceId");
  optional(fns.get_compute_instance_id, "nvmlDeviceGetComputeInstanceId");
  optional(fns.get_total_ecc, "nvmlDeviceGetTotalEccErrors");
  optional(fns.get_retired_pending, "nvmlDeviceGetRetiredPagesPendingStatus");
  optional(fns.get_remapped_rows, "nvmlDeviceGetRemappedRows");
  optional(fns.event_set_create, "nvmlEventSetCreate");
  optional(fns.register_events, "nvmlDeviceRegisterEvents");
  optional(fns.event_set_wait, "nvmlEventSetWait_v2");  // the same layout as the older one
  optional(fns.event_set_wait, "nvmlEventSetWait");
  optional(fns.event_set_free, "nvmlEventSetFree");
  if (missing.empty()) return Status::Ok();
  return Status::FailedPrecondition("NVML library \"" + library + "\" has no symbol " + missing +
                                    ": it is not libnvidia-ml, or its driver is too old. Set "
                                    "resource.cuda.nvml-library to the NVIDIA driver's libnvidia-ml.so.1.");
}

// A NUL-terminated string from a fixed-size buffer that NVML may fill to the end.
std::string FromBuffer(const char* buffer, size_t size) { return std::string(buffer, strnlen(buffer, size)); }

// NvmlApi over a dlopen'ed libnvidia-ml on which nvmlInit_v2 succeeded.
class DlNvml final : public NvmlApi {
 public:
  DlNvml(std::string library, LibraryHandle handle, const NvmlFunctions& fns)
      : library_(std::move(library)), handle_(std::move(handle)), fns_(fns) {}

  // Shuts NVML down; handle_ is closed after, as members are destroyed.
  ~DlNvml() override { fns_.shutdown(); }

  const std::string& LibraryPath() const override { return library_; }

  Result<std::vector<GpuInfo>> Devices() override {
    unsigned int count = 0;
    if (Status s = Check(fns_.get_count(&count), "nvmlDeviceGetCount_v2"); !s.ok()) return s;
    std::vector<GpuInfo> gpus;
    for (unsigned int i = 0; i < count; ++i) {
      Result<GpuInfo> gpu = Device(i);
      if (!gpu.ok()) return gpu.status();
      gpus.push_back(std::move(gpu).value());
    }
    return gpus;
  }

  Result<GpuUsage> Usage(const std::string& uuid) override {
    Result<nvmlDevice_t> device = Handle(uuid);
    if (!device.ok()) return device.status();
    const std::string gpu = "(" + uuid + ")";
    GpuUsage usage;
    nvmlMemory_t memory = {};
    if (Status s = Check(fns_.get_memory_info(*device, &memory), "nvmlDeviceGetMemoryInfo" + gpu); !s.ok()) return s;
    usage.memory_used_bytes = memory.used;
    usage.memory_total_bytes = memory.total;
    nvmlUtilization_t utilization = {};
    const nvmlReturn_t rc = fns_.get_utilization(*device, &utilization);
    if (rc == kNvmlSuccess) {
      usage.gpu_util_percent = utilization.gpu;
      usage.memory_util_percent = utilization.memory;
    } else if (rc != kNvmlErrorNotSupported) {
      return Check(rc, "nvmlDeviceGetUtilizationRates" + gpu);
    }
    return usage;
  }

  Result<std::vector<GpuProcess>> Processes(const std::string& uuid) override {
    Result<nvmlDevice_t> device = Handle(uuid);
    if (!device.ok()) return device.status();
    std::vector<GpuProcess> processes;
    for (ProcessKind kind : {ProcessKind::kCompute, ProcessKind::kGraphics}) {
      Result<std::vector<GpuProcess>> list = ProcessList(*device, uuid, kind);
      if (!list.ok()) return list.status();
      for (const GpuProcess& process : *list) {
        auto same = std::find_if(processes.begin(), processes.end(),
                                 [&](const GpuProcess& p) { return p.pid == process.pid; });
        if (same == processes.end()) {
          processes.push_back(process);
        } else {  // NVML gives the process's whole usage in each list
          same->used_memory_bytes = std::max(same->used_memory_bytes, process.used_memory_bytes);
        }
      }
    }
    return processes;
  }

  Result<GpuHealthReading> Health(const std::string& uuid) override {
    GpuHealthReading reading;
    nvmlDevice_t handle = nullptr;
    if (fns_.get_handle_by_uuid(uuid.c_str(), &handle) == kNvmlErrorGpuIsLost) {
      reading.lost = true;
      return reading;
    }
    Result<nvmlDevice_t> device = Handle(uuid);
    if (!device.ok()) return device.status();
    const std::string gpu = "(" + uuid + ")";
    // Each reading: success fills it, NOT_SUPPORTED leaves it unset, GPU_IS_LOST ends the reading.
    auto read = [&](nvmlReturn_t rc, const char* call) -> Status {
      if (rc == kNvmlErrorGpuIsLost) reading.lost = true;
      if (rc == kNvmlSuccess || rc == kNvmlErrorNotSupported || rc == kNvmlErrorGpuIsLost) return Status::Ok();
      return Check(rc, call + gpu);
    };
    if (fns_.get_total_ecc != nullptr) {
      unsigned long long count = 0;
      const nvmlReturn_t rc = fns_.get_total_ecc(*device, kNvmlUncorrected, kNvmlVolatileEcc, &count);
      if (Status s = read(rc, "nvmlDeviceGetTotalEccErrors"); !s.ok()) return s;
      if (rc == kNvmlSuccess) reading.ecc_uncorrected = count;
    }
    if (fns_.get_retired_pending != nullptr && !reading.lost) {
      int pending = 0;
      const nvmlReturn_t rc = fns_.get_retired_pending(*device, &pending);
      if (Status s = read(rc, "nvmlDeviceGetRetiredPagesPendingStatus"); !s.ok()) return s;
      if (rc == kNvmlSuccess) reading.retired_pages_pending = pending != 0;
    }
    if (fns_.get_remapped_rows != nullptr && !reading.lost) {
      unsigned int corrected = 0, uncorrected = 0, pending = 0, failure = 0;
      const nvmlReturn_t rc = fns_.get_remapped_rows(*device, &corrected, &uncorrected, &pending, &failure);
      if (Status s = read(rc, "nvmlDeviceGetRemappedRows"); !s.ok()) return s;
      if (rc == kNvmlSuccess) {
        reading.row_remap_failure = failure != 0;
        reading.row_remap_pending = pending != 0;
      }
    }
    if (reading.lost) {  // what was read before it was lost means nothing now
      reading = GpuHealthReading();
      reading.lost = true;
    }
    return reading;
  }

  Result<std::unique_ptr<XidWatch>> WatchXids(const std::vector<std::string>& gpu_uuids) override;

 private:
  // The handle of the GPU `uuid`; kNotFound naming it when NVML has none.
  Result<nvmlDevice_t> Handle(const std::string& uuid) const {
    nvmlDevice_t device = nullptr;
    const nvmlReturn_t rc = fns_.get_handle_by_uuid(uuid.c_str(), &device);
    if (rc == kNvmlErrorNotFound) {
      return Status::NotFound("NVML has no GPU " + uuid + " (nvmlDeviceGetHandleByUUID): it was removed, or is "
                              "not this node's; nvidia-smi -L lists the GPUs NVML sees");
    }
    if (Status s = Check(rc, "nvmlDeviceGetHandleByUUID(" + uuid + ")"); !s.ok()) return s;
    return device;
  }

  // One of `device`'s process lists, through whichever entry point the library has.
  Result<std::vector<GpuProcess>> ProcessList(nvmlDevice_t device, const std::string& uuid, ProcessKind kind) const {
    const bool compute = kind == ProcessKind::kCompute;
    const std::string call =
        std::string(compute ? "nvmlDeviceGetComputeRunningProcesses" : "nvmlDeviceGetGraphicsRunningProcesses") +
        "(" + uuid + ")";
    const NvmlFunctions::ProcessesV2 v2 = compute ? fns_.get_compute_processes : fns_.get_graphics_processes;
    if (v2 != nullptr) return ReadProcessList(device, v2, call);
    return ReadProcessList(device, compute ? fns_.get_compute_processes_v1 : fns_.get_graphics_processes_v1, call);
  }

  // Calls `list` with a buffer it grows while NVML answers
  // NVML_ERROR_INSUFFICIENT_SIZE (processes start between the calls), a few
  // times at most. `Info` is the entry point's nvmlProcessInfo layout.
  template <typename Info>
  Result<std::vector<GpuProcess>> ReadProcessList(nvmlDevice_t device,
                                                  nvmlReturn_t (*list)(nvmlDevice_t, unsigned int*, Info*),
                                                  const std::string& call) const {
    constexpr unsigned int kFirstGuess = 16;  // more processes than most GPUs run
    constexpr int kAttempts = 4;
    std::vector<Info> infos(kFirstGuess);
    nvmlReturn_t rc = kNvmlErrorInsufficientSize;
    unsigned int count = 0;
    for (int attempt = 0; attempt < kAttempts && rc == kNvmlErrorInsufficientSize; ++attempt) {
      if (attempt > 0) infos.resize(std::max<size_t>(count, infos.size()) + kFirstGuess);  // room for newcomers
      count = static_cast<unsigned int>(infos.size());
      rc = list(device, &count, infos.data());
    }
    if (Status s = Check(rc, call); !s.ok()) return s;
    std::vector<GpuProcess> processes;
    for (unsigned int i = 0; i < count && i < infos.size(); ++i) {
      const unsigned long long used = infos[i].usedGpuMemory;
      processes.push_back({infos[i].pid, used == kNvmlValueNotAvailable ? 0 : used});
    }
    return processes;
  }

  // Everything slotd knows of GPU `index`. A GPU_IS_LOST answer ends the
  // reading with `lost` set; any other error fails it.
  Result<GpuInfo> Device(unsigned int index) {
    const std::string gpu = "(GPU " + std::to_string(index) + ")";
    GpuInfo info;
    info.index = static_cast<int>(index);
    // Whether `rc` lets the reading go on; sets `failed` or info.lost when not.
    Status failed;
    auto go_on = [&](nvmlReturn_t rc, const char* call) {
      if (rc == kNvmlErrorGpuIsLost) info.lost = true;
      else if (rc != kNvmlSuccess) failed = Check(rc, call + gpu);
      return rc == kNvmlSuccess;
    };
    auto done = [&]() -> Result<GpuInfo> {
      if (!failed.ok()) return failed;
      return info;
    };

    nvmlDevice_t device = nullptr;
    if (!go_on(fns_.get_handle_by_index(index, &device), "nvmlDeviceGetHandleByIndex_v2")) return done();
    char uuid[kUuidBufferSize] = {};
    if (!go_on(fns_.get_uuid(device, uuid, kUuidBufferSize), "nvmlDeviceGetUUID")) return done();
    info.uuid = FromBuffer(uuid, sizeof uuid);
    char name[kNameBufferSize] = {};
    if (!go_on(fns_.get_name(device, name, kNameBufferSize), "nvmlDeviceGetName")) return done();
    info.name = FromBuffer(name, sizeof name);
    nvmlMemory_t memory = {};
    if (!go_on(fns_.get_memory_info(device, &memory), "nvmlDeviceGetMemoryInfo")) return done();
    info.memory_bytes = memory.total;
    unsigned int minor = 0;
    if (!go_on(fns_.get_minor_number(device, &minor), "nvmlDeviceGetMinorNumber")) return done();
    info.minor = static_cast<int>(minor);
    nvmlPciInfo_t pci = {};
    if (!go_on(fns_.get_pci_info(device, &pci), "nvmlDeviceGetPciInfo")) return done();
    info.pci_bus_id = FromBuffer(pci.busId, sizeof pci.busId);
    if (info.pci_bus_id.empty()) info.pci_bus_id = FromBuffer(pci.busIdLegacy, sizeof pci.busIdLegacy);

    unsigned int node = 0;
    if (fns_.get_numa_node_id != nullptr && fns_.get_numa_node_id(device, &node) == kNvmlSuccess) {
      info.numa_node = static_cast<int>(node);
    } else {
      info.numa_node = PciNumaNode(info.pci_bus_id);
    }
    if (Status s = ReadMig(device, gpu, info); !s.ok()) return s;
    return info;
  }

  // Fills info.mig_enabled and info.mig_instances of `device`. A GPU without
  // MIG support (NOT_SUPPORTED, or a library without the calls) is not in
  // MIG mode; a lost one is lost.
  Status ReadMig(nvmlDevice_t device, const std::string& gpu, GpuInfo& info) const {
    if (fns_.get_mig_mode == nullptr || fns_.get_max_mig_count == nullptr || fns_.get_mig_handle == nullptr) {
      return Status::Ok();
    }
    unsigned int current = 0, pending = 0;
    nvmlReturn_t rc = fns_.get_mig_mode(device, &current, &pending);
    if (rc == kNvmlErrorNotSupported) return Status::Ok();
    if (rc == kNvmlErrorGpuIsLost) {
      info.lost = true;
      return Status::Ok();
    }
    if (Status s = Check(rc, "nvmlDeviceGetMigMode" + gpu); !s.ok()) return s;
    info.mig_enabled = current == kNvmlMigEnabled;
    if (!info.mig_enabled) return Status::Ok();
    unsigned int slots = 0;
    if (Status s = Check(fns_.get_max_mig_count(device, &slots), "nvmlDeviceGetMaxMigDeviceCount" + gpu); !s.ok())
      return s;
    for (unsigned int slot = 0; slot < slots; ++slot) {
      nvmlDevice_t mig = nullptr;
      rc = fns_.get_mig_handle(device, slot, &mig);
      if (rc == kNvmlErrorNotFound) continue;  // no instance in this slot
      const std::string where = gpu.substr(0, gpu.size() - 1) + " MIG slot " + std::to_string(slot) + ")";
      if (Status s = Check(rc, "nvmlDeviceGetMigDeviceHandleByIndex" + where); !s.ok()) return s;
      MigInstance instance;
      char uuid[kUuidBufferSize] = {};
      if (Status s = Check(fns_.get_uuid(mig, uuid, kUuidBufferSize), "nvmlDeviceGetUUID" + where); !s.ok()) return s;
      instance.uuid = FromBuffer(uuid, sizeof uuid);
      char name[kNameBufferSize] = {};
      if (Status s = Check(fns_.get_name(mig, name, kNameBufferSize), "nvmlDeviceGetName" + where); !s.ok()) return s;
      instance.profile = MigProfileOfName(FromBuffer(name, sizeof name));
      nvmlMemory_t memory = {};
      if (Status s = Check(fns_.get_memory_info(mig, &memory), "nvmlDeviceGetMemoryInfo" + where); !s.ok()) return s;
      instance.memory_bytes = memory.total;
      if (fns_.get_gpu_instance_id != nullptr) fns_.get_gpu_instance_id(mig, &instance.gpu_instance_id);
      if (fns_.get_compute_instance_id != nullptr) fns_.get_compute_instance_id(mig, &instance.compute_instance_id);
      info.mig_instances.push_back(std::move(instance));
    }
    return Status::Ok();
  }

  // OK for success, else kUnavailable "<call> failed: <NVML's text>".
  Status Check(nvmlReturn_t rc, const std::string& call) const {
    if (rc == kNvmlSuccess) return Status::Ok();
    const char* text = fns_.error_string(rc);
    return Status::Unavailable(call + " failed: " + (text != nullptr ? text : "NVML error " + std::to_string(rc)));
  }

  const std::string library_;
  const LibraryHandle handle_;
  const NvmlFunctions fns_;
};

// XidWatch over an nvmlEventSet; the set is freed with it.
class DlXidWatch final : public XidWatch {
 public:
  DlXidWatch(const NvmlFunctions& fns, nvmlEventSet_t set, std::map<nvmlDevice_t, std::string> uuids)
      : fns_(fns), set_(set), uuids_(std::move(uuids)) {}
  ~DlXidWatch() override { fns_.event_set_free(set_); }

  Result<std::optional<XidEvent>> Wait(std::chrono::milliseconds timeout) override {
    nvmlEventData_t data = {};
    const nvmlReturn_t rc = fns_.event_set_wait(set_, &data, static_cast<unsigned int>(timeout.count()));
    if (rc == kNvmlErrorTimeout) return std::optional<XidEvent>();
    if (rc != kNvmlSuccess) {
      const char* text = fns_.error_string(rc);
      return Status::Unavailable(std::string("nvmlEventSetWait failed: ") +
                                 (text != nullptr ? text : "NVML error " + std::to_string(rc)));
    }
    if ((data.eventType & kNvmlEventXidCritical) == 0) return std::optional<XidEvent>();
    XidEvent event;
    auto uuid = uuids_.find(data.device);
    event.gpu_uuid = uuid == uuids_.end() ? std::string() : uuid->second;
    event.xid = data.eventData;
    if (data.gpuInstanceId != kNvmlNoInstance) event.gpu_instance_id = data.gpuInstanceId;
    if (data.computeInstanceId != kNvmlNoInstance) event.compute_instance_id = data.computeInstanceId;
    return std::optional<XidEvent>(std::move(event));
  }

 private:
  const NvmlFunctions fns_;
  const nvmlEventSet_t set_;
  const std::map<nvmlDevice_t, std::string> uuids_;  // registered handle -> GPU UUID
};

Result<std::unique_ptr<XidWatch>> DlNvml::WatchXids(const std::vector<std::string>& gpu_uuids) {
  if (fns_.event_set_create == nullptr || fns_.register_events == nullptr || fns_.event_set_wait == nullptr ||
      fns_.event_set_free == nullptr)
    return Status::FailedPrecondition("NVML library \"" + library_ + "\" has no event entry points "
                                      "(nvmlEventSetCreate, nvmlDeviceRegisterEvents, nvmlEventSetWait_v2)");
  nvmlEventSet_t set = nullptr;
  if (Status s = Check(fns_.event_set_create(&set), "nvmlEventSetCreate"); !s.ok()) return s;
  std::map<nvmlDevice_t, std::string> uuids;
  for (const std::string& uuid : gpu_uuids) {
    Result<nvmlDevice_t> device = Handle(uuid);
    Status registered = device.ok() ? Check(fns_.register_events(*device, kNvmlEventXidCritical, set),
                                            "nvmlDeviceRegisterEvents(" + uuid + ")")
                                    : device.status();
    if (!registered.ok()) {
      fns_.event_set_free(set);
      return registered;
    }
    uuids[*device] = uuid;
  }
  return std::unique_ptr<XidWatch>(new DlXidWatch(fns_, set, std::move(uuids)));
}

}  // namespace

Result<std::unique_ptr<NvmlApi>> LoadNvml(const std::string& library) {
  LibraryHandle handle(dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL));
  if (handle == nullptr) {
    const char* error = dlerror();
    return Status::FailedPrecondition("cannot load NVML from \"" + library + "\": " +
                                      (error != nullptr ? error : "unknown error") +
                                      ". Install the NVIDIA driver (it provides libnvidia-ml.so.1), or set "
                                      "resource.cuda.nvml-library to its path, or remove [resource.cuda] on a "
                                      "node without NVIDIA GPUs.");
  }
  NvmlFunctions fns;
  if (Status s = ResolveFunctions(handle.get(), library, fns); !s.ok()) return s;
  if (nvmlReturn_t rc = fns.init(); rc != kNvmlSuccess) {
    const char* text = fns.error_string(rc);
    return Status::FailedPrecondition("nvmlInit_v2 failed (NVML library \"" + library + "\"): " +
                                      (text != nullptr ? text : "NVML error " + std::to_string(rc)) +
                                      ". Check that the NVIDIA kernel driver is loaded (nvidia-smi tells).");
  }
  return std::unique_ptr<NvmlApi>(std::make_unique<DlNvml>(library, std::move(handle), fns));
}

std::string MigProfileOfName(const std::string& name) {
  constexpr std::string_view kMarker = "MIG ";
  const size_t at = name.rfind(kMarker);
  return at == std::string::npos ? name : name.substr(at + kMarker.size());
}

int PciNumaNode(const std::string& pci_bus_id, const std::string& pci_devices_dir) {
  // NVML writes the domain with 8 hex digits, sysfs with 4: re-format it.
  const size_t colon = pci_bus_id.find(':');
  if (colon == std::string::npos || colon == 0 || pci_bus_id.find('/') != std::string::npos) return 0;
  unsigned long domain = 0;
  try {
    size_t used = 0;
    domain = std::stoul(pci_bus_id.substr(0, colon), &used, 16);
    if (used != colon) return 0;
  } catch (const std::exception&) {
    return 0;
  }
  char prefix[24];
  std::snprintf(prefix, sizeof prefix, "%04lx", domain);
  const std::string address = AsciiLowered(prefix + pci_bus_id.substr(colon));

  std::ifstream file(pci_devices_dir + "/" + address + "/numa_node");
  int node = -1;
  if (!(file >> node) || node < 0) return 0;
  return node;
}

}  // namespace slotd
