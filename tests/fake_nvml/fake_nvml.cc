// A fake libnvidia-ml for tests. It exports, with NVML's C signatures, every
// entry point slotd's loader (src/resources/nvml.cc) resolves, so tests
// exercise the real dlopen/dlsym code without a GPU. Built as
// libnvidia-ml-fake.so.1; tests find it through SLOTD_FAKE_NVML_PATH.
//
// Its GPUs come from the JSON file named by the environment variable
// SLOTD_FAKE_NVML_FILE, read again at every nvmlInit_v2 (so a test can change
// the file between loads):
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
//         "numa_node": 1                     // optional; absent: nvmlDeviceGetNumaNodeId answers
//                                            //   NVML_ERROR_NOT_SUPPORTED (as on most x86 hosts)
//       }
//     ],
//     "fail": {                              // optional error injection: the named entry point
//       "nvmlDeviceGetName": 15              //   returns this nvmlReturn_t (15: GPU is lost) and
//     }                                      //   does nothing else; "nvmlInit_v2" may be named too
//   }
//
// Unknown keys are ignored. Reserved for later versions, per GPU:
// "processes": [{"pid": 1234, "used_memory": "1g"}] (running compute
// processes; memory used will be their sum) and "utilization": {"gpu": 37,
// "memory": 12} (percent). Until then memory used is 0 and free is the total.
//
// A missing variable, an unreadable file or an invalid one makes nvmlInit_v2
// fail; nvmlErrorString of that code then says why and names the file.
//
// Behaviour follows NVML where tests can see it: nvmlInit_v2/nvmlShutdown
// count, device calls before init answer NVML_ERROR_UNINITIALIZED, a short
// buffer NVML_ERROR_INSUFFICIENT_SIZE. All entry points are thread-safe (one
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
#include <vector>

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

namespace {

constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kUninitialized = 1;
constexpr nvmlReturn_t kInvalidArgument = 2;
constexpr nvmlReturn_t kNotSupported = 3;
constexpr nvmlReturn_t kInsufficientSize = 7;
constexpr nvmlReturn_t kLibraryNotFound = 12;

// One GPU of the file.
struct FakeGpu {
  std::string uuid;
  std::string name;
  unsigned long long memory = 0;
  unsigned int minor = 0;
  std::string pci_bus_id;
  int numa_node = -1;  // -1: not in the file
};

// Everything the library knows; guarded by `mutex`.
struct State {
  std::mutex mutex;
  int init_count = 0;                       // nvmlInit_v2 successes minus nvmlShutdowns
  std::vector<FakeGpu> gpus;                // from the last good file
  std::map<std::string, nvmlReturn_t> fail; // entry point -> injected error
  nvmlReturn_t init_error = kSuccess;       // the code the last failed nvmlInit_v2 returned
  std::string init_error_text;              // and why, for nvmlErrorString
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

// Reads and checks the file named by SLOTD_FAKE_NVML_FILE into `gpus` and
// `fail`. On failure returns an NVML error code and sets `why`.
nvmlReturn_t ReadFile(std::vector<FakeGpu>& gpus, std::map<std::string, nvmlReturn_t>& fail, std::string& why) {
  const char* path = std::getenv("SLOTD_FAKE_NVML_FILE");
  if (path == nullptr || *path == '\0') {
    why = "fake NVML: SLOTD_FAKE_NVML_FILE is not set; set it to a JSON file of fake GPUs";
    return kLibraryNotFound;
  }
  const std::string file = std::string("SLOTD_FAKE_NVML_FILE \"") + path + "\"";
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
      gpus.push_back(std::move(gpu));
    }
    if (doc.contains("fail")) fail = doc["fail"].get<std::map<std::string, nvmlReturn_t>>();
  } catch (const std::exception& e) {  // nlohmann's errors, and stoull's out_of_range
    why = "fake NVML: " + file + " is not valid: " + e.what();
    return kUninitialized;
  }
  return kSuccess;
}

// The injected error for `entry_point`, or kSuccess. Caller holds the mutex.
nvmlReturn_t Injected(const State& s, const char* entry_point) {
  const auto it = s.fail.find(entry_point);
  return it == s.fail.end() ? kSuccess : it->second;
}

// Checks init and injection and finds `device` for the device calls; on
// success `gpu` points at it. Caller holds the mutex.
nvmlReturn_t Lookup(const State& s, const char* entry_point, nvmlDevice_t device, const FakeGpu*& gpu) {
  if (s.init_count == 0) return kUninitialized;
  if (nvmlReturn_t rc = Injected(s, entry_point); rc != kSuccess) return rc;
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

}  // namespace

#define FAKE_NVML_EXPORT extern "C" __attribute__((visibility("default")))

FAKE_NVML_EXPORT nvmlReturn_t nvmlInit_v2() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::vector<FakeGpu> gpus;
  std::map<std::string, nvmlReturn_t> fail;
  std::string why;
  nvmlReturn_t rc = ReadFile(gpus, fail, why);
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
  if (s.init_count == 0) return kUninitialized;
  if (nvmlReturn_t rc = Injected(s, "nvmlDeviceGetCount_v2"); rc != kSuccess) return rc;
  if (count == nullptr) return kInvalidArgument;
  *count = static_cast<unsigned int>(s.gpus.size());
  return kSuccess;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.init_count == 0) return kUninitialized;
  if (nvmlReturn_t rc = Injected(s, "nvmlDeviceGetHandleByIndex_v2"); rc != kSuccess) return rc;
  if (device == nullptr || index >= s.gpus.size()) return kInvalidArgument;
  *device = reinterpret_cast<nvmlDevice_t>(static_cast<uintptr_t>(index) + 1);
  return kSuccess;
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
  *memory = {gpu->memory, gpu->memory, 0};
  return kSuccess;
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
