// A fake libnvidia-ml for tests. It exports, with NVML's C signatures, every
// entry point slotd's loader (src/resources/cuda/nvml.cc) resolves, so tests
// exercise the real dlopen/dlsym code without a GPU. Built as
// libnvidia-ml-fake.so.1; tests find it through SLOTD_FAKE_NVML_PATH.
//
// Its GPUs come from the JSON file named by the environment variable
// SLOTD_FAKE_NVML_FILE, read at every nvmlInit_v2, and read again by any later
// call that answers with GPU state when the file has changed since (its
// modification time, size or inode), so a test can change GPUs, processes and
// injected errors while one initialised instance (an agent) keeps running:
//
//   {
//     "gpus": [                              // in NVML index order
//       {
//         "uuid": "GPU-1f2e…",               // required
//         "name": "Fake H100",               // required
//         "memory": "80g",                   // required: total bytes, a number or a size
//                                            //   with a binary suffix k, m, g, t ("80g", "512m")
//         "minor": 0,                        // optional, default: the index (/dev/nvidiaN)
//         "pci_bus_id": "00000000:17:00.0",  // optional, default "00000000:<index+1, 2 hex digits>:00.0"
//         "numa_node": 1,                    // optional; absent: nvmlDeviceGetNumaNodeId answers
//                                            //   NVML_ERROR_NOT_SUPPORTED (as on most x86 hosts)
//         "processes": [                     // optional, default none: running processes, in order
//           {"pid": 1234,                    //   required: the host's pid
//            "used_memory": "1g",            //   optional, a size as "memory"; absent: reported as
//                                            //     NVML_VALUE_NOT_AVAILABLE (and counted as 0)
//            "type": "C"}                    //   optional, as nvidia-smi's column: "C" (default,
//                                            //     compute), "G" (graphics) or "C+G" (in both lists)
//         ],
//         "utilization": {"gpu": 37, "memory": 12}  // optional, percent; default 0 and 0
//       }
//     ],
//     "fail": {                              // optional error injection: the named entry point
//       "nvmlDeviceGetName": 15              //   returns this nvmlReturn_t (15: GPU is lost) and
//     }                                      //   does nothing else; "nvmlInit_v2" may be named too
//   }
//
// Unknown keys are ignored. A GPU's memory used is the sum of its processes'
// used_memory (free is the rest of the total, or 0).
//
// A missing variable, an unreadable file or an invalid one makes nvmlInit_v2
// fail; nvmlErrorString of that code then says why and names the file. A
// later call that finds the file changed but unreadable or invalid (e.g.
// half-written) keeps the GPUs it had and tries again at the next call. Since
// a file's time stamp is coarse (a clock tick), a file changed less than a
// second before it was read is read again at every call until it is older,
// so that a second write within the same tick is not missed.
//
// Behaviour follows NVML where tests can see it: nvmlInit_v2/nvmlShutdown
// count, device calls before init answer NVML_ERROR_UNINITIALIZED, a short
// buffer NVML_ERROR_INSUFFICIENT_SIZE (a process list then sets the count it
// needs, as NVML does), an unknown UUID NVML_ERROR_NOT_FOUND. A device handle
// is the GPU's index in the file: after the file changes it names whichever
// GPU is now at that index. All entry points are thread-safe (one
// mutex); a string from nvmlErrorString stays valid until the next nvmlInit_v2.
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include <sys/stat.h>
#include <time.h>

#include <nlohmann/json.hpp>

// ---- NVML's C ABI, declared from NVIDIA's public API reference.

using nvmlReturn_t = int;
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;

struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
};

struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};

// Filled by the unversioned process-list entry points.
struct nvmlProcessInfo_v1_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
};

// Filled by the _v2 process-list entry points, and by _v3 as current drivers do.
struct nvmlProcessInfo_v2_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

namespace {

constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kUninitialized = 1;
constexpr nvmlReturn_t kInvalidArgument = 2;
constexpr nvmlReturn_t kNotSupported = 3;
constexpr nvmlReturn_t kNotFound = 6;
constexpr nvmlReturn_t kInsufficientSize = 7;
constexpr nvmlReturn_t kLibraryNotFound = 12;

constexpr unsigned long long kValueNotAvailable = ~0ull;  // NVML_VALUE_NOT_AVAILABLE
constexpr unsigned int kNoInstance = 0xFFFFFFFFu;        // a MIG instance id without MIG

// One running process of a GPU.
struct FakeProcess {
  unsigned int pid = 0;
  unsigned long long used_memory = kValueNotAvailable;
  bool compute = true;   // in the compute list
  bool graphics = false; // in the graphics list
};

// One GPU of the file.
struct FakeGpu {
  std::string uuid;
  std::string name;
  unsigned long long memory = 0;
  unsigned int minor = 0;
  std::string pci_bus_id;
  int numa_node = -1;  // -1: not in the file
  std::vector<FakeProcess> processes;
  unsigned int gpu_utilization = 0;
  unsigned int memory_utilization = 0;
};

// What tells a changed file from the one read last.
struct FileStamp {
  timespec mtime = {};
  off_t size = -1;
  ino_t inode = 0;
  bool operator==(const FileStamp& o) const {
    return mtime.tv_sec == o.mtime.tv_sec && mtime.tv_nsec == o.mtime.tv_nsec && size == o.size && inode == o.inode;
  }
};

// Everything the library knows; guarded by `mutex`.
struct State {
  std::mutex mutex;
  int init_count = 0;                       // nvmlInit_v2 successes minus nvmlShutdowns
  std::vector<FakeGpu> gpus;                // from the last good file
  std::map<std::string, nvmlReturn_t> fail; // entry point -> injected error
  nvmlReturn_t init_error = kSuccess;       // the code the last failed nvmlInit_v2 returned
  std::string init_error_text;              // and why, for nvmlErrorString
  FileStamp stamp;                          // of the file `gpus` and `fail` come from
  bool racy = false;                        // it was read within a second of its change
};

State& state() {
  static State s;
  return s;
}

// Parses "80g", "512M", "17" (binary suffixes, optional "b"/"ib") into bytes.
bool ParseBytes(const nlohmann::json& value, unsigned long long& bytes) {
  if (value.is_number_integer()) {  // signed when built in C++ from an int
    if (!value.is_number_unsigned() && value.get<long long>() < 0) return false;
    bytes = value.get<unsigned long long>();
    return true;
  }
  if (!value.is_string()) return false;
  const std::string text = value.get<std::string>();
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0) return false;
  std::string suffix;
  for (char c : text.substr(digits)) suffix += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const std::map<std::string, int> kShift = {
      {"", 0}, {"b", 0}, {"k", 10}, {"kb", 10}, {"kib", 10}, {"m", 20}, {"mb", 20}, {"mib", 20},
      {"g", 30}, {"gb", 30}, {"gib", 30}, {"t", 40}, {"tb", 40}, {"tib", 40}};
  const auto shift = kShift.find(suffix);
  if (shift == kShift.end()) return false;
  bytes = std::stoull(text.substr(0, digits)) << shift->second;
  return true;
}

// Reads one entry of a GPU's "processes"; false if it is not valid.
bool ParseProcess(const nlohmann::json& entry, FakeProcess& process) {
  if (!entry.is_object() || !entry.contains("pid") || !entry["pid"].is_number_unsigned()) return false;
  process.pid = entry["pid"].get<unsigned int>();
  if (entry.contains("used_memory") && !ParseBytes(entry["used_memory"], process.used_memory)) return false;
  const std::string type = entry.value("type", std::string("C"));
  if (type != "C" && type != "G" && type != "C+G") return false;
  process.compute = type != "G";
  process.graphics = type != "C";
  return true;
}

// The stamp of the file at `path`; false if it cannot be stat'ed.
bool Stamp(const char* path, FileStamp& stamp) {
  struct stat st = {};
  if (stat(path, &st) != 0) return false;
  stamp = {st.st_mtim, st.st_size, st.st_ino};
  return true;
}

// Reads and checks the file named by SLOTD_FAKE_NVML_FILE into `gpus` and
// `fail`, and the file's stamp from before the read into `stamp`. On failure
// returns an NVML error code and sets `why`.
nvmlReturn_t ReadFile(std::vector<FakeGpu>& gpus, std::map<std::string, nvmlReturn_t>& fail, FileStamp& stamp,
                      std::string& why) {
  const char* path = std::getenv("SLOTD_FAKE_NVML_FILE");
  if (path == nullptr || *path == '\0') {
    why = "fake NVML: SLOTD_FAKE_NVML_FILE is not set; set it to a JSON file of fake GPUs";
    return kLibraryNotFound;
  }
  const std::string file = std::string("SLOTD_FAKE_NVML_FILE \"") + path + "\"";
  Stamp(path, stamp);  // before reading: a change during the read shows as a change at the next call
  std::ifstream in(path);
  if (!in) {
    why = "fake NVML: cannot read " + file + ": " + std::strerror(errno);
    return kUninitialized;
  }
  try {
    const nlohmann::json doc = nlohmann::json::parse(in);
    if (!doc.is_object() || !doc.contains("gpus") || !doc["gpus"].is_array()) {
      why = "fake NVML: " + file + " has no \"gpus\" array";
      return kUninitialized;
    }
    for (size_t i = 0; i < doc["gpus"].size(); ++i) {
      const nlohmann::json& entry = doc["gpus"][i];
      const std::string where = "fake NVML: " + file + ": gpus[" + std::to_string(i) + "]";
      FakeGpu gpu;
      if (!entry.is_object() || !entry.contains("uuid") || !entry["uuid"].is_string() || !entry.contains("name") ||
          !entry["name"].is_string()) {
        why = where + " needs string \"uuid\" and \"name\"";
        return kUninitialized;
      }
      gpu.uuid = entry["uuid"].get<std::string>();
      gpu.name = entry["name"].get<std::string>();
      if (!entry.contains("memory") || !ParseBytes(entry["memory"], gpu.memory)) {
        why = where + " needs \"memory\": bytes or a size like \"80g\"";
        return kUninitialized;
      }
      gpu.minor = entry.value("minor", static_cast<unsigned int>(i));
      char default_bus_id[32];
      std::snprintf(default_bus_id, sizeof default_bus_id, "00000000:%02X:00.0", static_cast<unsigned>(i + 1) & 0xffu);
      gpu.pci_bus_id = entry.value("pci_bus_id", std::string(default_bus_id));
      gpu.numa_node = entry.value("numa_node", -1);
      const nlohmann::json processes = entry.value("processes", nlohmann::json::array());
      if (!processes.is_array()) {
        why = where + ": \"processes\" must be an array";
        return kUninitialized;
      }
      for (const nlohmann::json& process : processes) {
        if (!ParseProcess(process, gpu.processes.emplace_back())) {
          why = where + ": each of \"processes\" needs a \"pid\", and may have \"used_memory\" (a size) and "
                        "\"type\" (\"C\", \"G\" or \"C+G\")";
          return kUninitialized;
        }
      }
      const nlohmann::json utilization = entry.value("utilization", nlohmann::json::object());
      gpu.gpu_utilization = utilization.value("gpu", 0u);
      gpu.memory_utilization = utilization.value("memory", 0u);
      gpus.push_back(std::move(gpu));
    }
    if (doc.contains("fail")) fail = doc["fail"].get<std::map<std::string, nvmlReturn_t>>();
  } catch (const std::exception& e) {  // nlohmann's errors, and stoull's out_of_range
    why = "fake NVML: " + file + " is not valid: " + e.what();
    return kUninitialized;
  }
  return kSuccess;
}

// Whether a file stamped `stamp` may still change within its time stamp's
// tick: it changed less than a second before now.
bool Racy(const FileStamp& stamp) {
  timespec now = {};
  clock_gettime(CLOCK_REALTIME, &now);
  return now.tv_sec - stamp.mtime.tv_sec < 1 ||
         (now.tv_sec - stamp.mtime.tv_sec == 1 && now.tv_nsec < stamp.mtime.tv_nsec);
}

// Reads the file again if it changed since it was read, or may have (racy),
// keeping the current GPUs if it is now unreadable or invalid. Caller holds
// the mutex, and NVML is initialised.
void Refresh(State& s) {
  const char* path = std::getenv("SLOTD_FAKE_NVML_FILE");
  FileStamp stamp;
  if (path == nullptr || !Stamp(path, stamp) || (stamp == s.stamp && !s.racy)) return;
  std::vector<FakeGpu> gpus;
  std::map<std::string, nvmlReturn_t> fail;
  std::string why;
  if (ReadFile(gpus, fail, stamp, why) != kSuccess) return;
  s.gpus = std::move(gpus);
  s.fail = std::move(fail);
  s.stamp = stamp;
  s.racy = Racy(stamp);
}

// The injected error for `entry_point`, or kSuccess. Caller holds the mutex.
nvmlReturn_t Injected(const State& s, const char* entry_point) {
  const auto it = s.fail.find(entry_point);
  return it == s.fail.end() ? kSuccess : it->second;
}

// Checks init, refreshes the GPUs and checks injection: the start of every
// call that answers with GPU state. Caller holds the mutex.
nvmlReturn_t Begin(State& s, const char* entry_point) {
  if (s.init_count == 0) return kUninitialized;
  Refresh(s);
  return Injected(s, entry_point);
}

// Begin, then finds `device` for the device calls; on success `gpu` points at
// it. Caller holds the mutex.
nvmlReturn_t Lookup(State& s, const char* entry_point, nvmlDevice_t device, const FakeGpu*& gpu) {
  if (nvmlReturn_t rc = Begin(s, entry_point); rc != kSuccess) return rc;
  const uintptr_t index = reinterpret_cast<uintptr_t>(device) - 1;  // handles are index + 1
  if (device == nullptr || index >= s.gpus.size()) return kInvalidArgument;
  gpu = &s.gpus[index];
  return kSuccess;
}

// Copies `text` with its NUL into `buffer` of `length` bytes.
nvmlReturn_t CopyText(const std::string& text, char* buffer, unsigned int length) {
  if (buffer == nullptr) return kInvalidArgument;
  if (text.size() + 1 > length) return kInsufficientSize;
  std::memcpy(buffer, text.c_str(), text.size() + 1);
  return kSuccess;
}

// Fills NVML's PCI structure from "dddddddd:bb:dd.f".
nvmlReturn_t FillPci(const FakeGpu& gpu, nvmlPciInfo_t* pci) {
  if (pci == nullptr) return kInvalidArgument;
  *pci = {};
  unsigned int function = 0;
  std::sscanf(gpu.pci_bus_id.c_str(), "%x:%x:%x.%x", &pci->domain, &pci->bus, &pci->device, &function);
  std::snprintf(pci->busId, sizeof pci->busId, "%s", gpu.pci_bus_id.c_str());
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04x:%02x:%02x.%x", pci->domain & 0xffffu, pci->bus,
                pci->device, function);
  pci->pciDeviceId = 0x233010DEu;  // an H100's device id and NVIDIA's vendor id
  return kSuccess;
}

// Device memory in use: the sum of the processes' known usage.
unsigned long long MemoryUsed(const FakeGpu& gpu) {
  unsigned long long used = 0;
  for (const FakeProcess& process : gpu.processes) {
    if (process.used_memory != kValueNotAvailable) used += process.used_memory;
  }
  return used;
}

// The body of the six process-list entry points: fills `infos` (`Info` is the
// entry point's layout) with the processes of `device` in the compute or the
// graphics list, as NVML does: a short or absent buffer gets
// NVML_ERROR_INSUFFICIENT_SIZE and the count needed (NVML_SUCCESS if none).
template <typename Info>
nvmlReturn_t ListProcesses(const char* entry_point, bool compute, nvmlDevice_t device, unsigned int* count,
                           Info* infos) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const FakeGpu* gpu = nullptr;
  if (nvmlReturn_t rc = Lookup(s, entry_point, device, gpu); rc != kSuccess) return rc;
  if (count == nullptr) return kInvalidArgument;
  std::vector<const FakeProcess*> listed;
  for (const FakeProcess& process : gpu->processes) {
    if (compute ? process.compute : process.graphics) listed.push_back(&process);
  }
  const unsigned int room = *count;
  *count = static_cast<unsigned int>(listed.size());
  if (listed.size() > room) return kInsufficientSize;
  if (listed.empty()) return kSuccess;
  if (infos == nullptr) return kInvalidArgument;
  for (size_t i = 0; i < listed.size(); ++i) {
    infos[i] = {};
    infos[i].pid = listed[i]->pid;
    infos[i].usedGpuMemory = listed[i]->used_memory;
    if constexpr (std::is_same_v<Info, nvmlProcessInfo_v2_t>) {
      infos[i].gpuInstanceId = kNoInstance;
      infos[i].computeInstanceId = kNoInstance;
    }
  }
  return kSuccess;
}

}  // namespace

#define FAKE_NVML_EXPORT extern "C" __attribute__((visibility("default")))

FAKE_NVML_EXPORT nvmlReturn_t nvmlInit_v2() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::vector<FakeGpu> gpus;
  std::map<std::string, nvmlReturn_t> fail;
  FileStamp stamp;
  std::string why;
  nvmlReturn_t rc = ReadFile(gpus, fail, stamp, why);
  if (rc == kSuccess && fail.count("nvmlInit_v2") != 0) {
    rc = fail["nvmlInit_v2"];
    why.clear();  // an injected error reads like the real one
  }
  if (rc != kSuccess) {
    s.init_error = rc;
    s.init_error_text = why;
    return rc;
  }
  s.gpus = std::move(gpus);
  s.fail = std::move(fail);
  s.stamp = stamp;
  s.racy = Racy(stamp);
  s.init_error = kSuccess;
  s.init_error_text.clear();
  ++s.init_count;
  return kSuccess;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlShutdown() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.init_count == 0) return kUninitialized;
  --s.init_count;
  return kSuccess;
}

FAKE_NVML_EXPORT const char* nvmlErrorString(nvmlReturn_t result) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (result == s.init_error && !s.init_error_text.empty()) return s.init_error_text.c_str();
  switch (result) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 6: return "Not Found";
    case 7: return "Insufficient Size";
    case 9: return "Driver Not Loaded";
    case 12: return "NVML Shared Library Not Found";
    case 13: return "Function Not Found";
    case 15: return "GPU is lost";
    default: return "Unknown Error";
  }
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (nvmlReturn_t rc = Begin(s, "nvmlDeviceGetCount_v2"); rc != kSuccess) return rc;
  if (count == nullptr) return kInvalidArgument;
  *count = static_cast<unsigned int>(s.gpus.size());
  return kSuccess;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (nvmlReturn_t rc = Begin(s, "nvmlDeviceGetHandleByIndex_v2"); rc != kSuccess) return rc;
  if (device == nullptr || index >= s.gpus.size()) return kInvalidArgument;
  *device = reinterpret_cast<nvmlDevice_t>(static_cast<uintptr_t>(index) + 1);
  return kSuccess;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (nvmlReturn_t rc = Begin(s, "nvmlDeviceGetHandleByUUID"); rc != kSuccess) return rc;
  if (uuid == nullptr || device == nullptr) return kInvalidArgument;
  for (size_t i = 0; i < s.gpus.size(); ++i) {
    if (s.gpus[i].uuid == uuid) {
      *device = reinterpret_cast<nvmlDevice_t>(static_cast<uintptr_t>(i) + 1);
      return kSuccess;
    }
  }
  return kNotFound;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const FakeGpu* gpu = nullptr;
  if (nvmlReturn_t rc = Lookup(s, "nvmlDeviceGetUUID", device, gpu); rc != kSuccess) return rc;
  return CopyText(gpu->uuid, uuid, length);
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const FakeGpu* gpu = nullptr;
  if (nvmlReturn_t rc = Lookup(s, "nvmlDeviceGetName", device, gpu); rc != kSuccess) return rc;
  return CopyText(gpu->name, name, length);
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const FakeGpu* gpu = nullptr;
  if (nvmlReturn_t rc = Lookup(s, "nvmlDeviceGetMemoryInfo", device, gpu); rc != kSuccess) return rc;
  if (memory == nullptr) return kInvalidArgument;
  const unsigned long long used = MemoryUsed(*gpu);
  *memory = {gpu->memory, used < gpu->memory ? gpu->memory - used : 0, used};
  return kSuccess;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* utilization) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const FakeGpu* gpu = nullptr;
  if (nvmlReturn_t rc = Lookup(s, "nvmlDeviceGetUtilizationRates", device, gpu); rc != kSuccess) return rc;
  if (utilization == nullptr) return kInvalidArgument;
  *utilization = {gpu->gpu_utilization, gpu->memory_utilization};
  return kSuccess;
}

// Each process list in NVML's three versions; each can be failed on its own.
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                                      nvmlProcessInfo_v2_t* infos) {
  return ListProcesses("nvmlDeviceGetComputeRunningProcesses_v3", true, device, count, infos);
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int* count,
                                                                      nvmlProcessInfo_v2_t* infos) {
  return ListProcesses("nvmlDeviceGetComputeRunningProcesses_v2", true, device, count, infos);
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int* count,
                                                                   nvmlProcessInfo_v1_t* infos) {
  return ListProcesses("nvmlDeviceGetComputeRunningProcesses", true, device, count, infos);
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                                       nvmlProcessInfo_v2_t* infos) {
  return ListProcesses("nvmlDeviceGetGraphicsRunningProcesses_v3", false, device, count, infos);
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t device, unsigned int* count,
                                                                       nvmlProcessInfo_v2_t* infos) {
  return ListProcesses("nvmlDeviceGetGraphicsRunningProcesses_v2", false, device, count, infos);
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t device, unsigned int* count,
                                                                    nvmlProcessInfo_v1_t* infos) {
  return ListProcesses("nvmlDeviceGetGraphicsRunningProcesses", false, device, count, infos);
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int* minor) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const FakeGpu* gpu = nullptr;
  if (nvmlReturn_t rc = Lookup(s, "nvmlDeviceGetMinorNumber", device, gpu); rc != kSuccess) return rc;
  if (minor == nullptr) return kInvalidArgument;
  *minor = gpu->minor;
  return kSuccess;
}

// The three PCI entry points fill the same structure; each can be failed on its own.
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const FakeGpu* gpu = nullptr;
  if (nvmlReturn_t rc = Lookup(s, "nvmlDeviceGetPciInfo_v3", device, gpu); rc != kSuccess) return rc;
  return FillPci(*gpu, pci);
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const FakeGpu* gpu = nullptr;
  if (nvmlReturn_t rc = Lookup(s, "nvmlDeviceGetPciInfo_v2", device, gpu); rc != kSuccess) return rc;
  return FillPci(*gpu, pci);
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const FakeGpu* gpu = nullptr;
  if (nvmlReturn_t rc = Lookup(s, "nvmlDeviceGetPciInfo", device, gpu); rc != kSuccess) return rc;
  return FillPci(*gpu, pci);
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int* node) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const FakeGpu* gpu = nullptr;
  if (nvmlReturn_t rc = Lookup(s, "nvmlDeviceGetNumaNodeId", device, gpu); rc != kSuccess) return rc;
  if (node == nullptr) return kInvalidArgument;
  if (gpu->numa_node < 0) return kNotSupported;
  *node = static_cast<unsigned int>(gpu->numa_node);
  return kSuccess;
}
