// A fake libnvidia-ml for tests. It exports, with NVML's C signatures, every
// entry point slotd's loader (src/resources/cuda/nvml.cc) resolves, and those
// for GPU health, MIG and Xid events, so tests exercise the real dlopen/dlsym
// code without a GPU. Built as libnvidia-ml-fake.so.1; tests find it through
// SLOTD_FAKE_NVML_PATH.
//
// Its GPUs come from the JSON file named by the environment variable
// SLOTD_FAKE_NVML_FILE, read at every nvmlInit_v2, and read again by any later
// call that answers with GPU state when the file has changed since (its
// modification time, size or inode), so a test can change GPUs, processes,
// events and injected errors while one initialised instance (an agent) keeps
// running:
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
//         "utilization": {"gpu": 37, "memory": 12},  // optional, percent; default 0 and 0
//         "ecc": true,                       // optional, default true; false: nvmlDeviceGetTotalEccErrors
//                                            //   answers NVML_ERROR_NOT_SUPPORTED
//         "ecc_uncorrected": 2,              // optional, default 0: its uncorrected count, volatile and
//                                            //   aggregate alike (the corrected count is always 0)
//         "retired_pages": true,             // optional, default true; false:
//                                            //   nvmlDeviceGetRetiredPagesPendingStatus answers
//                                            //   NVML_ERROR_NOT_SUPPORTED (as on Ampere and later)
//         "retired_pages_pending": false,    // optional, default false: what it answers otherwise
//         "row_remap": {"failure": false,    // optional, each key too (default false, false, 0, 0):
//                       "pending": false,    //   nvmlDeviceGetRemappedRows's answer; false instead of
//                       "corrected": 0,      //   an object: NVML_ERROR_NOT_SUPPORTED
//                       "uncorrected": 0},
//         "lost": false,                     // optional, default false; true: the GPU fell off the bus
//         "mig": {                           // optional; absent (or false): the GPU has no MIG
//           "enabled": true,                 //   optional, default true; false: MIG mode is off (the
//                                            //     instances are kept but do not exist)
//           "instances": [                   //   optional, default none: its MIG devices, in index order
//             {"uuid": "MIG-5c1b…",          //     required
//              "profile": "1g.18gb",         //     required: its name is "<GPU's name> MIG <profile>"
//              "memory": "16g",              //     required, a size as the GPU's "memory"
//              "gpu_instance": 1,            //     required: its GPU instance id
//              "compute_instance": 0,        //     optional, default 0: its compute instance id
//              "processes": []}              //     optional, as the GPU's "processes"
//           ],
//           "max": 7                         //   optional: nvmlDeviceGetMaxMigDeviceCount, no fewer than
//         }                                  //     the instances; default the larger of 7 and their number
//       }
//     ],
//     "events": [                            // optional: Xid events, the ones past the last delivered
//       {"id": 1,                            //   required: a positive integer, each greater than the
//                                            //     one before it in the list
//        "gpu": "GPU-1f2e…",                 //   required: a GPU's UUID, or its index in "gpus"
//        "type": "xid",                      //   optional; the only type (nvmlEventTypeXidCriticalError)
//        "xid": 79,                          //   required: the event's data
//        "gpu_instance": 1,                  //   optional, default 0xFFFFFFFF (not a MIG instance's)
//        "compute_instance": 0}              //   optional, default 0xFFFFFFFF
//     ],
//     "fail": {                              // optional error injection: the named entry point
//       "nvmlDeviceGetName": 15              //   returns this nvmlReturn_t (15: GPU is lost) and
//     },                                     //   does nothing else; any entry point but nvmlShutdown
//                                            //   and nvmlErrorString may be named, nvmlInit_v2 too
//     "hang": {                              // optional, a hung driver: the named entry point (as
//       "nvmlDeviceGetTotalEccErrors": 3000  //   "fail" names them) first sleeps this many milliseconds,
//     }                                      //   without the mutex (other calls go on), then answers as
//   }                                        //   it would have (an injected error too)
//
// Unknown keys are ignored. A GPU's memory used is the sum of its processes'
// used_memory (free is the rest of the total, or 0).
//
// A lost GPU: every call that takes a handle of it or of its MIG devices, and
// nvmlDeviceGetHandleByUUID of its UUID or theirs, answers
// NVML_ERROR_GPU_IS_LOST; nvmlDeviceGetCount_v2 still counts it and
// nvmlDeviceGetHandleByIndex_v2 still gives its handle, as NVML does.
//
// MIG: nvmlDeviceGetMigMode answers current and pending mode alike (1 on, 0
// off). On a GPU without "mig" it and nvmlDeviceGetMigDeviceHandleByIndex
// answer NVML_ERROR_NOT_SUPPORTED (the latter also while MIG mode is off),
// and nvmlDeviceGetMaxMigDeviceCount 0. A MIG index below the number of
// instances gives a MIG device handle, one below "max" NVML_ERROR_NOT_FOUND,
// a larger one NVML_ERROR_INVALID_ARGUMENT. A MIG device answers its own
// UUID, name, memory (used: its processes'), process lists (with its instance
// ids in the _v2/_v3 layouts) and instance ids; the minor number, PCI, NUMA
// and health calls answer its GPU's; utilization, the MIG mode, count and
// index calls and the event calls answer NVML_ERROR_NOT_SUPPORTED.
// nvmlDeviceGetHandleByUUID finds MIG devices too. A GPU in MIG mode lists
// its own processes then every instance's (with their ids), and counts all of
// them as its memory used. The instance id calls and
// nvmlDeviceGetDeviceHandleFromMigDeviceHandle answer
// NVML_ERROR_INVALID_ARGUMENT on a GPU's handle.
//
// Events: nvmlEventSetCreate makes a set that starts past the events the file
// has then (its last delivered id is the largest one), so only events added
// to the file later are delivered. nvmlDeviceRegisterEvents (GPU handles
// only; supported types, nvmlDeviceGetSupportedEventTypes: Xid and single and
// double bit ECC) adds types of a GPU to a set. nvmlEventSetWait_v2 and
// nvmlEventSetWait deliver the first event of the list past the set's last
// delivered one whose GPU is registered in the set for its type (events of
// GPUs not registered are passed over for good once a later one is
// delivered); when there is none they read the file again every 5 ms,
// without holding the mutex in between, until timeoutms has passed:
// NVML_ERROR_TIMEOUT (0: at once). A set is freed by nvmlEventSetFree.
//
// A missing variable, an unreadable file or an invalid one makes nvmlInit_v2
// fail; nvmlErrorString of that code then says why and names the file (and
// the entry, e.g. "gpus[1]: mig: instances[0]"). A later call that finds the
// file changed but unreadable or invalid (e.g. half-written) keeps the state
// it had and tries again at the next call. Since a file's time stamp is
// coarse (a clock tick), a file changed less than a second before it was read
// is read again at every call until it is older, so that a second write
// within the same tick is not missed.
//
// Behaviour follows NVML where tests can see it: nvmlInit_v2/nvmlShutdown
// count, device calls before init answer NVML_ERROR_UNINITIALIZED, a short
// buffer NVML_ERROR_INSUFFICIENT_SIZE (a process list then sets the count it
// needs, as NVML does), an unknown UUID NVML_ERROR_NOT_FOUND. A device handle
// is a GPU's index in the file (plus 1), or for a MIG device its GPU's index
// and its own in the instances (1 + GPU index + 0x10000 * (instance index +
// 1)): after the file changes it names whichever GPU or MIG device is now at
// those indices. All entry points are thread-safe (one mutex); a string from
// nvmlErrorString stays valid until the next nvmlInit_v2.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <sys/stat.h>
#include <time.h>

#include <nlohmann/json.hpp>

// ---- NVML's C ABI, declared from NVIDIA's public API reference.

using nvmlReturn_t = int;
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;
struct nvmlEventSet_st;
using nvmlEventSet_t = nvmlEventSet_st*;

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

// Filled by nvmlEventSetWait(_v2).
struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

// An event set (opaque to callers): the GPUs registered in it, by index in
// the file, with their event types, and the id of the last event delivered.
struct nvmlEventSet_st {
  std::map<size_t, unsigned long long> registered;
  unsigned long long last_id = 0;
};

namespace {

constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kUninitialized = 1;
constexpr nvmlReturn_t kInvalidArgument = 2;
constexpr nvmlReturn_t kNotSupported = 3;
constexpr nvmlReturn_t kNotFound = 6;
constexpr nvmlReturn_t kInsufficientSize = 7;
constexpr nvmlReturn_t kTimeout = 10;
constexpr nvmlReturn_t kLibraryNotFound = 12;
constexpr nvmlReturn_t kGpuIsLost = 15;

constexpr unsigned long long kValueNotAvailable = ~0ull;  // NVML_VALUE_NOT_AVAILABLE
constexpr unsigned int kNoInstance = 0xFFFFFFFFu;        // a MIG instance id without MIG

constexpr int kMemoryErrorCorrected = 0;    // NVML_MEMORY_ERROR_TYPE_CORRECTED
constexpr int kMemoryErrorUncorrected = 1;  // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
constexpr int kVolatileEcc = 0;             // NVML_VOLATILE_ECC
constexpr int kAggregateEcc = 1;            // NVML_AGGREGATE_ECC

constexpr unsigned long long kEventTypeSingleBitEcc = 0x2;  // nvmlEventTypeSingleBitEccError
constexpr unsigned long long kEventTypeDoubleBitEcc = 0x4;  // nvmlEventTypeDoubleBitEccError
constexpr unsigned long long kEventTypeXid = 0x8;           // nvmlEventTypeXidCriticalError
constexpr unsigned long long kSupportedEventTypes = kEventTypeSingleBitEcc | kEventTypeDoubleBitEcc | kEventTypeXid;

// A device handle is 1 + GPU index + kMigStride * (MIG instance index + 1),
// the last term 0 for a whole GPU; so at most kMigStride GPUs.
constexpr uintptr_t kMigStride = 0x10000;

// How often nvmlEventSetWait reads the file again while it waits.
constexpr std::chrono::milliseconds kEventPoll(5);

// One running process of a GPU or MIG device.
struct FakeProcess {
  unsigned int pid = 0;
  unsigned long long used_memory = kValueNotAvailable;
  bool compute = true;   // in the compute list
  bool graphics = false; // in the graphics list
};

// One MIG device (a compute instance of a GPU instance) of a GPU.
struct FakeMig {
  std::string uuid;
  std::string profile;
  unsigned long long memory = 0;
  unsigned int gpu_instance = 0;
  unsigned int compute_instance = 0;
  std::vector<FakeProcess> processes;
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
  bool ecc = true;  // false: ECC counts are not supported
  unsigned long long ecc_uncorrected = 0;
  bool retired_pages = true;  // false: retired pages are not supported
  bool retired_pages_pending = false;
  bool row_remap = true;  // false: row remapping is not supported
  bool row_remap_failure = false;
  bool row_remap_pending = false;
  unsigned int row_remap_corrected = 0;
  unsigned int row_remap_uncorrected = 0;
  bool lost = false;
  bool mig = false;  // the file has "mig" for it: MIG capable
  bool mig_enabled = false;
  unsigned int mig_max = 0;
  std::vector<FakeMig> instances;  // exist only while mig_enabled
};

// One event of the file.
struct FakeEvent {
  unsigned long long id = 0;
  size_t gpu = 0;  // index in the file
  unsigned long long type = kEventTypeXid;
  unsigned long long xid = 0;
  unsigned int gpu_instance = kNoInstance;
  unsigned int compute_instance = kNoInstance;
};

// What the file says.
struct Contents {
  std::vector<FakeGpu> gpus;
  std::map<std::string, nvmlReturn_t> fail;  // entry point -> injected error
  std::map<std::string, unsigned int> hang;  // entry point -> milliseconds to sleep first
  std::vector<FakeEvent> events;             // in increasing id order
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
  int init_count = 0;                  // nvmlInit_v2 successes minus nvmlShutdowns
  Contents file;                       // from the last good file
  nvmlReturn_t init_error = kSuccess;  // the code the last failed nvmlInit_v2 returned
  std::string init_error_text;         // and why, for nvmlErrorString
  FileStamp stamp;                     // of the file `file` comes from
  bool racy = false;                   // it was read within a second of its change
  std::set<nvmlEventSet_t> event_sets; // created and not yet freed
};

State& state() {
  static State s;
  return s;
}

// Why the file is not valid, naming where; thrown while reading it.
struct Invalid : std::runtime_error {
  using std::runtime_error::runtime_error;
};

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

// Whether `value` is a non-negative integer that `Value` holds; if so sets `out`.
template <typename Value>
bool ParseUnsigned(const nlohmann::json& value, Value& out) {
  if (!value.is_number_integer()) return false;
  if (!value.is_number_unsigned() && value.get<long long>() < 0) return false;
  if (value.get<unsigned long long>() > std::numeric_limits<Value>::max()) return false;
  out = static_cast<Value>(value.get<unsigned long long>());
  return true;
}

// Reads `object`'s optional `key`, a bool, into `value`.
void OptionalBool(const nlohmann::json& object, const char* key, bool& value, const std::string& where) {
  if (!object.contains(key)) return;
  if (!object[key].is_boolean()) throw Invalid(where + ": \"" + key + "\" must be true or false");
  value = object[key].get<bool>();
}

// Reads `object`'s optional `key`, a non-negative integer, into `value`.
template <typename Value>
void OptionalUnsigned(const nlohmann::json& object, const char* key, Value& value, const std::string& where) {
  if (object.contains(key) && !ParseUnsigned(object[key], value)) {
    throw Invalid(where + ": \"" + key + "\" must be a non-negative integer up to " +
                  std::to_string(std::numeric_limits<Value>::max()));
  }
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

// Reads the optional "processes" of a GPU or MIG instance `entry`.
std::vector<FakeProcess> ParseProcesses(const nlohmann::json& entry, const std::string& where) {
  const nlohmann::json processes = entry.value("processes", nlohmann::json::array());
  if (!processes.is_array()) throw Invalid(where + ": \"processes\" must be an array");
  std::vector<FakeProcess> parsed;
  for (const nlohmann::json& process : processes) {
    if (!ParseProcess(process, parsed.emplace_back())) {
      throw Invalid(where + ": each of \"processes\" needs a \"pid\", and may have \"used_memory\" (a size) and "
                            "\"type\" (\"C\", \"G\" or \"C+G\")");
    }
  }
  return parsed;
}

// Reads one entry of a GPU's "mig": "instances".
FakeMig ParseMigInstance(const nlohmann::json& entry, const std::string& where) {
  if (!entry.is_object() || !entry.contains("uuid") || !entry["uuid"].is_string() || !entry.contains("profile") ||
      !entry["profile"].is_string()) {
    throw Invalid(where + " needs string \"uuid\" and \"profile\"");
  }
  FakeMig mig;
  mig.uuid = entry["uuid"].get<std::string>();
  mig.profile = entry["profile"].get<std::string>();
  if (!entry.contains("memory") || !ParseBytes(entry["memory"], mig.memory)) {
    throw Invalid(where + " needs \"memory\": bytes or a size like \"16g\"");
  }
  if (!entry.contains("gpu_instance") || !ParseUnsigned(entry["gpu_instance"], mig.gpu_instance)) {
    throw Invalid(where + " needs \"gpu_instance\": a non-negative integer");
  }
  OptionalUnsigned(entry, "compute_instance", mig.compute_instance, where);
  mig.processes = ParseProcesses(entry, where);
  return mig;
}

// Reads a GPU's "mig" into `gpu`.
void ParseMig(const nlohmann::json& mig, FakeGpu& gpu, const std::string& where) {
  if (mig.is_boolean() && !mig.get<bool>()) return;  // "mig": false: as if absent
  if (!mig.is_object()) throw Invalid(where + ": \"mig\" must be an object (or false)");
  gpu.mig = true;
  gpu.mig_enabled = true;
  OptionalBool(mig, "enabled", gpu.mig_enabled, where + ": mig");
  const nlohmann::json instances = mig.value("instances", nlohmann::json::array());
  if (!instances.is_array()) throw Invalid(where + ": mig: \"instances\" must be an array");
  for (size_t k = 0; k < instances.size(); ++k) {
    gpu.instances.push_back(ParseMigInstance(instances[k], where + ": mig: instances[" + std::to_string(k) + "]"));
  }
  gpu.mig_max = std::max<unsigned int>(7, static_cast<unsigned int>(gpu.instances.size()));
  OptionalUnsigned(mig, "max", gpu.mig_max, where + ": mig");
  if (gpu.mig_max < gpu.instances.size()) throw Invalid(where + ": mig: \"max\" is less than the instances");
}

// Reads the GPU `entry`, index `index` in "gpus".
FakeGpu ParseGpu(const nlohmann::json& entry, size_t index, const std::string& where) {
  FakeGpu gpu;
  if (!entry.is_object() || !entry.contains("uuid") || !entry["uuid"].is_string() || !entry.contains("name") ||
      !entry["name"].is_string()) {
    throw Invalid(where + " needs string \"uuid\" and \"name\"");
  }
  gpu.uuid = entry["uuid"].get<std::string>();
  gpu.name = entry["name"].get<std::string>();
  if (!entry.contains("memory") || !ParseBytes(entry["memory"], gpu.memory)) {
    throw Invalid(where + " needs \"memory\": bytes or a size like \"80g\"");
  }
  gpu.minor = entry.value("minor", static_cast<unsigned int>(index));
  char default_bus_id[32];
  std::snprintf(default_bus_id, sizeof default_bus_id, "00000000:%02X:00.0", static_cast<unsigned>(index + 1) & 0xffu);
  gpu.pci_bus_id = entry.value("pci_bus_id", std::string(default_bus_id));
  gpu.numa_node = entry.value("numa_node", -1);
  gpu.processes = ParseProcesses(entry, where);
  const nlohmann::json utilization = entry.value("utilization", nlohmann::json::object());
  gpu.gpu_utilization = utilization.value("gpu", 0u);
  gpu.memory_utilization = utilization.value("memory", 0u);
  OptionalBool(entry, "ecc", gpu.ecc, where);
  OptionalUnsigned(entry, "ecc_uncorrected", gpu.ecc_uncorrected, where);
  OptionalBool(entry, "retired_pages", gpu.retired_pages, where);
  OptionalBool(entry, "retired_pages_pending", gpu.retired_pages_pending, where);
  if (entry.contains("row_remap")) {
    const nlohmann::json& remap = entry["row_remap"];
    if (remap.is_boolean()) {
      gpu.row_remap = remap.get<bool>();
    } else if (remap.is_object()) {
      const std::string at = where + ": row_remap";
      OptionalBool(remap, "failure", gpu.row_remap_failure, at);
      OptionalBool(remap, "pending", gpu.row_remap_pending, at);
      OptionalUnsigned(remap, "corrected", gpu.row_remap_corrected, at);
      OptionalUnsigned(remap, "uncorrected", gpu.row_remap_uncorrected, at);
    } else {
      throw Invalid(where + ": \"row_remap\" must be an object or false");
    }
  }
  OptionalBool(entry, "lost", gpu.lost, where);
  if (entry.contains("mig")) ParseMig(entry["mig"], gpu, where);
  return gpu;
}

// Reads the file's "events" (`gpus` already read) into `events`.
void ParseEvents(const nlohmann::json& doc, const std::vector<FakeGpu>& gpus, std::vector<FakeEvent>& events,
                 const std::string& file) {
  const nlohmann::json& list = doc["events"];
  if (!list.is_array()) throw Invalid(file + ": \"events\" must be an array");
  for (size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& entry = list[i];
    const std::string where = file + ": events[" + std::to_string(i) + "]";
    FakeEvent event;
    if (!entry.is_object() || !entry.contains("id") || !ParseUnsigned(entry["id"], event.id) || event.id == 0) {
      throw Invalid(where + " needs \"id\": a positive integer");
    }
    if (!events.empty() && event.id <= events.back().id) {
      throw Invalid(where + ": \"id\" must be greater than the previous event's");
    }
    bool found = false;
    if (entry.contains("gpu") && entry["gpu"].is_string()) {
      const std::string uuid = entry["gpu"].get<std::string>();
      for (size_t g = 0; g < gpus.size() && !found; ++g) {
        if (gpus[g].uuid == uuid) {
          event.gpu = g;
          found = true;
        }
      }
    } else if (entry.contains("gpu")) {
      found = ParseUnsigned(entry["gpu"], event.gpu) && event.gpu < gpus.size();
    }
    if (!found) throw Invalid(where + " needs \"gpu\": the UUID of one of \"gpus\", or its index");
    if (entry.contains("type") && entry["type"] != "xid") throw Invalid(where + ": \"type\" can only be \"xid\"");
    if (!entry.contains("xid") || !ParseUnsigned(entry["xid"], event.xid)) {
      throw Invalid(where + " needs \"xid\": a non-negative integer");
    }
    OptionalUnsigned(entry, "gpu_instance", event.gpu_instance, where);
    OptionalUnsigned(entry, "compute_instance", event.compute_instance, where);
    events.push_back(event);
  }
}

// The stamp of the file at `path`; false if it cannot be stat'ed.
bool Stamp(const char* path, FileStamp& stamp) {
  struct stat st = {};
  if (stat(path, &st) != 0) return false;
  stamp = {st.st_mtim, st.st_size, st.st_ino};
  return true;
}

// Reads and checks the file named by SLOTD_FAKE_NVML_FILE into `contents`,
// and the file's stamp from before the read into `stamp`. On failure returns
// an NVML error code and sets `why`.
nvmlReturn_t ReadFile(Contents& contents, FileStamp& stamp, std::string& why) {
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
    if (doc["gpus"].size() > kMigStride) {
      why = "fake NVML: " + file + " has more than " + std::to_string(kMigStride) + " \"gpus\"";
      return kUninitialized;
    }
    for (size_t i = 0; i < doc["gpus"].size(); ++i) {
      const std::string where = "fake NVML: " + file + ": gpus[" + std::to_string(i) + "]";
      contents.gpus.push_back(ParseGpu(doc["gpus"][i], i, where));
    }
    if (doc.contains("events")) ParseEvents(doc, contents.gpus, contents.events, "fake NVML: " + file);
    if (doc.contains("fail")) contents.fail = doc["fail"].get<std::map<std::string, nvmlReturn_t>>();
    if (doc.contains("hang")) {
      const nlohmann::json& hang = doc["hang"];
      if (!hang.is_object()) throw Invalid("fake NVML: " + file + ": \"hang\" must be an object");
      for (const auto& [entry_point, ms] : hang.items()) {
        if (!ParseUnsigned(ms, contents.hang[entry_point])) {
          throw Invalid("fake NVML: " + file + ": hang: \"" + entry_point + "\" must be milliseconds");
        }
      }
    }
  } catch (const Invalid& e) {
    why = e.what();
    return kUninitialized;
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
// keeping the current state if it is now unreadable or invalid. Caller holds
// the mutex, and NVML is initialised.
void Refresh(State& s) {
  const char* path = std::getenv("SLOTD_FAKE_NVML_FILE");
  FileStamp stamp;
  if (path == nullptr || !Stamp(path, stamp) || (stamp == s.stamp && !s.racy)) return;
  Contents contents;
  std::string why;
  if (ReadFile(contents, stamp, why) != kSuccess) return;
  s.file = std::move(contents);
  s.stamp = stamp;
  s.racy = Racy(stamp);
}

// The injected error for `entry_point`, or kSuccess. Caller holds the mutex.
nvmlReturn_t Injected(const State& s, const char* entry_point) {
  const auto it = s.file.fail.find(entry_point);
  return it == s.file.fail.end() ? kSuccess : it->second;
}

// The MIG devices `gpu` has now: its instances while MIG mode is on.
size_t MigCount(const FakeGpu& gpu) { return gpu.mig && gpu.mig_enabled ? gpu.instances.size() : 0; }

// The handle of GPU `gpu`, or of its MIG device `instance`.
nvmlDevice_t GpuHandle(size_t gpu) { return reinterpret_cast<nvmlDevice_t>(static_cast<uintptr_t>(gpu) + 1); }
nvmlDevice_t MigHandle(size_t gpu, size_t instance) {
  return reinterpret_cast<nvmlDevice_t>(static_cast<uintptr_t>(gpu) + 1 + kMigStride * (instance + 1));
}

// What a device handle names: a GPU, or one of its MIG devices.
struct Target {
  size_t index = 0;               // the GPU's, in the file
  const FakeGpu* gpu = nullptr;
  const FakeMig* mig = nullptr;   // the MIG device; nullptr: the whole GPU
};

// Decodes `device` into `target`; false if it names nothing now. Caller holds the mutex.
bool Decode(const State& s, nvmlDevice_t device, Target& target) {
  const uintptr_t value = reinterpret_cast<uintptr_t>(device);
  if (value == 0) return false;
  const uintptr_t index = (value - 1) % kMigStride;
  const uintptr_t instance = (value - 1) / kMigStride;  // 0: the GPU, else the MIG device's index + 1
  if (index >= s.file.gpus.size()) return false;
  const FakeGpu& gpu = s.file.gpus[index];
  if (instance > MigCount(gpu)) return false;
  target = {index, &gpu, instance == 0 ? nullptr : &gpu.instances[instance - 1]};
  return true;
}

// One call of an entry point that "fail" and "hang" may name: first sleeps
// as "hang" says (without the mutex), then holds the mutex until it returns.
// `s`'s GPUs may change at Sleep: a Target from before it is stale.
class Call {
 public:
  explicit Call(const char* entry_point) : s(state()), name_(entry_point), lock_(s.mutex) {
    if (s.init_count == 0) return;
    Refresh(s);
    fresh_ = true;
    const auto hang = s.file.hang.find(name_);
    if (hang != s.file.hang.end() && hang->second > 0) Sleep(std::chrono::milliseconds(hang->second));
  }

  // Checks init, refreshes the file (unless just done) and checks injection:
  // the start of every call that answers with GPU state.
  nvmlReturn_t Begin() {
    if (s.init_count == 0) return kUninitialized;
    if (!fresh_) Refresh(s);
    fresh_ = false;
    return Injected(s, name_);
  }

  // Begin, then finds what `device` names: NVML_ERROR_INVALID_ARGUMENT if
  // nothing, NVML_ERROR_GPU_IS_LOST if its GPU is lost.
  nvmlReturn_t Lookup(nvmlDevice_t device, Target& target) {
    if (nvmlReturn_t rc = Begin(); rc != kSuccess) return rc;
    if (!Decode(s, device, target)) return kInvalidArgument;
    if (target.gpu->lost) return kGpuIsLost;
    return kSuccess;
  }

  // Sleeps `duration` without holding the mutex.
  void Sleep(std::chrono::nanoseconds duration) {
    lock_.unlock();
    std::this_thread::sleep_for(duration);
    lock_.lock();
    fresh_ = false;
  }

  State& s;

 private:
  const char* const name_;
  std::unique_lock<std::mutex> lock_;
  bool fresh_ = false;  // Refresh ran since the lock was taken
};

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

// A process of a GPU, and the MIG device it runs on (nullptr: none).
struct Running {
  const FakeProcess* process;
  const FakeMig* mig;
};

// The processes of `target`: a MIG device's own; a GPU's own, then its MIG
// devices'.
std::vector<Running> Processes(const Target& target) {
  std::vector<Running> running;
  if (target.mig != nullptr) {
    for (const FakeProcess& process : target.mig->processes) running.push_back({&process, target.mig});
    return running;
  }
  for (const FakeProcess& process : target.gpu->processes) running.push_back({&process, nullptr});
  for (size_t k = 0; k < MigCount(*target.gpu); ++k) {
    const FakeMig& mig = target.gpu->instances[k];
    for (const FakeProcess& process : mig.processes) running.push_back({&process, &mig});
  }
  return running;
}

// The body of the six process-list entry points: fills `infos` (`Info` is the
// entry point's layout) with the processes of `device` in the compute or the
// graphics list, as NVML does: a short or absent buffer gets
// NVML_ERROR_INSUFFICIENT_SIZE and the count needed (NVML_SUCCESS if none).
template <typename Info>
nvmlReturn_t ListProcesses(const char* entry_point, bool compute, nvmlDevice_t device, unsigned int* count,
                           Info* infos) {
  Call call(entry_point);
  Target target;
  if (nvmlReturn_t rc = call.Lookup(device, target); rc != kSuccess) return rc;
  if (count == nullptr) return kInvalidArgument;
  std::vector<Running> listed;
  for (const Running& running : Processes(target)) {
    if (compute ? running.process->compute : running.process->graphics) listed.push_back(running);
  }
  const unsigned int room = *count;
  *count = static_cast<unsigned int>(listed.size());
  if (listed.size() > room) return kInsufficientSize;
  if (listed.empty()) return kSuccess;
  if (infos == nullptr) return kInvalidArgument;
  for (size_t i = 0; i < listed.size(); ++i) {
    infos[i] = {};
    infos[i].pid = listed[i].process->pid;
    infos[i].usedGpuMemory = listed[i].process->used_memory;
    if constexpr (std::is_same_v<Info, nvmlProcessInfo_v2_t>) {
      infos[i].gpuInstanceId = listed[i].mig != nullptr ? listed[i].mig->gpu_instance : kNoInstance;
      infos[i].computeInstanceId = listed[i].mig != nullptr ? listed[i].mig->compute_instance : kNoInstance;
    }
  }
  return kSuccess;
}

// The body of nvmlEventSetWait_v2 and nvmlEventSetWait.
nvmlReturn_t WaitForEvent(const char* entry_point, nvmlEventSet_t set, nvmlEventData_t* data,
                          unsigned int timeoutms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutms);
  Call call(entry_point);
  State& s = call.s;
  for (;;) {
    if (nvmlReturn_t rc = call.Begin(); rc != kSuccess) return rc;
    if (set == nullptr || data == nullptr || s.event_sets.count(set) == 0) return kInvalidArgument;
    for (const FakeEvent& event : s.file.events) {
      if (event.id <= set->last_id) continue;
      const auto registered = set->registered.find(event.gpu);
      if (registered == set->registered.end() || (registered->second & event.type) == 0) continue;
      set->last_id = event.id;
      *data = {GpuHandle(event.gpu), event.type, event.xid, event.gpu_instance, event.compute_instance};
      return kSuccess;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return kTimeout;
    call.Sleep(std::min<std::chrono::nanoseconds>(kEventPoll, deadline - now));
  }
}

}  // namespace

#define FAKE_NVML_EXPORT extern "C" __attribute__((visibility("default")))

FAKE_NVML_EXPORT nvmlReturn_t nvmlInit_v2() {
  State& s = state();
  std::unique_lock<std::mutex> lock(s.mutex);
  Contents contents;
  FileStamp stamp;
  std::string why;
  nvmlReturn_t rc = ReadFile(contents, stamp, why);
  if (rc == kSuccess) {
    const auto hang = contents.hang.find("nvmlInit_v2");
    if (hang != contents.hang.end() && hang->second > 0) {
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(hang->second));
      lock.lock();
    }
    if (contents.fail.count("nvmlInit_v2") != 0) {
      rc = contents.fail["nvmlInit_v2"];
      why.clear();  // an injected error reads like the real one
    }
  }
  if (rc != kSuccess) {
    s.init_error = rc;
    s.init_error_text = why;
    return rc;
  }
  s.file = std::move(contents);
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
    case 10: return "Timeout";
    case 12: return "NVML Shared Library Not Found";
    case 13: return "Function Not Found";
    case 15: return "GPU is lost";
    default: return "Unknown Error";
  }
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  Call call("nvmlDeviceGetCount_v2");
  if (nvmlReturn_t rc = call.Begin(); rc != kSuccess) return rc;
  if (count == nullptr) return kInvalidArgument;
  *count = static_cast<unsigned int>(call.s.file.gpus.size());
  return kSuccess;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  Call call("nvmlDeviceGetHandleByIndex_v2");
  if (nvmlReturn_t rc = call.Begin(); rc != kSuccess) return rc;
  if (device == nullptr || index >= call.s.file.gpus.size()) return kInvalidArgument;
  *device = GpuHandle(index);  // a lost GPU's too
  return kSuccess;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  Call call("nvmlDeviceGetHandleByUUID");
  if (nvmlReturn_t rc = call.Begin(); rc != kSuccess) return rc;
  if (uuid == nullptr || device == nullptr) return kInvalidArgument;
  const std::vector<FakeGpu>& gpus = call.s.file.gpus;
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (gpus[i].uuid == uuid) {
      if (gpus[i].lost) return kGpuIsLost;
      *device = GpuHandle(i);
      return kSuccess;
    }
    for (size_t k = 0; k < MigCount(gpus[i]); ++k) {
      if (gpus[i].instances[k].uuid == uuid) {
        if (gpus[i].lost) return kGpuIsLost;
        *device = MigHandle(i, k);
        return kSuccess;
      }
    }
  }
  return kNotFound;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  Call call("nvmlDeviceGetUUID");
  Target target;
  if (nvmlReturn_t rc = call.Lookup(device, target); rc != kSuccess) return rc;
  return CopyText(target.mig != nullptr ? target.mig->uuid : target.gpu->uuid, uuid, length);
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  Call call("nvmlDeviceGetName");
  Target target;
  if (nvmlReturn_t rc = call.Lookup(device, target); rc != kSuccess) return rc;
  if (target.mig != nullptr) return CopyText(target.gpu->name + " MIG " + target.mig->profile, name, length);
  return CopyText(target.gpu->name, name, length);
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  Call call("nvmlDeviceGetMemoryInfo");
  Target target;
  if (nvmlReturn_t rc = call.Lookup(device, target); rc != kSuccess) return rc;
  if (memory == nullptr) return kInvalidArgument;
  const unsigned long long total = target.mig != nullptr ? target.mig->memory : target.gpu->memory;
  unsigned long long used = 0;
  for (const Running& running : Processes(target)) {
    if (running.process->used_memory != kValueNotAvailable) used += running.process->used_memory;
  }
  *memory = {total, used < total ? total - used : 0, used};
  return kSuccess;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* utilization) {
  Call call("nvmlDeviceGetUtilizationRates");
  Target target;
  if (nvmlReturn_t rc = call.Lookup(device, target); rc != kSuccess) return rc;
  if (utilization == nullptr) return kInvalidArgument;
  if (target.mig != nullptr) return kNotSupported;
  *utilization = {target.gpu->gpu_utilization, target.gpu->memory_utilization};
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
  Call call("nvmlDeviceGetMinorNumber");
  Target target;
  if (nvmlReturn_t rc = call.Lookup(device, target); rc != kSuccess) return rc;
  if (minor == nullptr) return kInvalidArgument;
  *minor = target.gpu->minor;
  return kSuccess;
}

// The three PCI entry points fill the same structure; each can be failed on its own.
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  Call call("nvmlDeviceGetPciInfo_v3");
  Target target;
  if (nvmlReturn_t rc = call.Lookup(device, target); rc != kSuccess) return rc;
  return FillPci(*target.gpu, pci);
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  Call call("nvmlDeviceGetPciInfo_v2");
  Target target;
  if (nvmlReturn_t rc = call.Lookup(device, target); rc != kSuccess) return rc;
  return FillPci(*target.gpu, pci);
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  Call call("nvmlDeviceGetPciInfo");
  Target target;
  if (nvmlReturn_t rc = call.Lookup(device, target); rc != kSuccess) return rc;
  return FillPci(*target.gpu, pci);
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int* node) {
  Call call("nvmlDeviceGetNumaNodeId");
  Target target;
  if (nvmlReturn_t rc = call.Lookup(device, target); rc != kSuccess) return rc;
  if (node == nullptr) return kInvalidArgument;
  if (target.gpu->numa_node < 0) return kNotSupported;
  *node = static_cast<unsigned int>(target.gpu->numa_node);
  return kSuccess;
}

// ---- Health: answered from the GPU's keys, for its MIG devices too.

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, int errorType, int counterType,
                                                          unsigned long long* eccCounts) {
  Call call("nvmlDeviceGetTotalEccErrors");
  Target target;
  if (nvmlReturn_t rc = call.Lookup(device, target); rc != kSuccess) return rc;
  if (eccCounts == nullptr || (errorType != kMemoryErrorCorrected && errorType != kMemoryErrorUncorrected) ||
      (counterType != kVolatileEcc && counterType != kAggregateEcc)) {
    return kInvalidArgument;
  }
  if (!target.gpu->ecc) return kNotSupported;
  *eccCounts = errorType == kMemoryErrorUncorrected ? target.gpu->ecc_uncorrected : 0;
  return kSuccess;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device, int* isPending) {
  Call call("nvmlDeviceGetRetiredPagesPendingStatus");
  Target target;
  if (nvmlReturn_t rc = call.Lookup(device, target); rc != kSuccess) return rc;
  if (isPending == nullptr) return kInvalidArgument;
  if (!target.gpu->retired_pages) return kNotSupported;
  *isPending = target.gpu->retired_pages_pending ? 1 : 0;
  return kSuccess;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int* corrRows,
                                                        unsigned int* uncRows, unsigned int* isPending,
                                                        unsigned int* failureOccurred) {
  Call call("nvmlDeviceGetRemappedRows");
  Target target;
  if (nvmlReturn_t rc = call.Lookup(device, target); rc != kSuccess) return rc;
  if (corrRows == nullptr || uncRows == nullptr || isPending == nullptr || failureOccurred == nullptr) {
    return kInvalidArgument;
  }
  const FakeGpu& gpu = *target.gpu;
  if (!gpu.row_remap) return kNotSupported;
  *corrRows = gpu.row_remap_corrected;
  *uncRows = gpu.row_remap_uncorrected;
  *isPending = gpu.row_remap_pending ? 1 : 0;
  *failureOccurred = gpu.row_remap_failure ? 1 : 0;
  return kSuccess;
}

// ---- MIG.

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* currentMode,
                                                   unsigned int* pendingMode) {
  Call call("nvmlDeviceGetMigMode");
  Target target;
  if (nvmlReturn_t rc = call.Lookup(device, target); rc != kSuccess) return rc;
  if (currentMode == nullptr || pendingMode == nullptr) return kInvalidArgument;
  if (target.mig != nullptr || !target.gpu->mig) return kNotSupported;
  *currentMode = *pendingMode = target.gpu->mig_enabled ? 1 : 0;  // NVML_DEVICE_MIG_ENABLE / _DISABLE
  return kSuccess;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count) {
  Call call("nvmlDeviceGetMaxMigDeviceCount");
  Target target;
  if (nvmlReturn_t rc = call.Lookup(device, target); rc != kSuccess) return rc;
  if (count == nullptr) return kInvalidArgument;
  if (target.mig != nullptr) return kNotSupported;
  *count = target.gpu->mig ? target.gpu->mig_max : 0;
  return kSuccess;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                                  nvmlDevice_t* migDevice) {
  Call call("nvmlDeviceGetMigDeviceHandleByIndex");
  Target target;
  if (nvmlReturn_t rc = call.Lookup(device, target); rc != kSuccess) return rc;
  if (migDevice == nullptr) return kInvalidArgument;
  if (target.mig != nullptr || !target.gpu->mig || !target.gpu->mig_enabled) return kNotSupported;
  if (index < MigCount(*target.gpu)) {
    *migDevice = MigHandle(target.index, index);
    return kSuccess;
  }
  return index < target.gpu->mig_max ? kNotFound : kInvalidArgument;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int* isMigDevice) {
  Call call("nvmlDeviceIsMigDeviceHandle");
  Target target;
  if (nvmlReturn_t rc = call.Lookup(device, target); rc != kSuccess) return rc;
  if (isMigDevice == nullptr) return kInvalidArgument;
  *isMigDevice = target.mig != nullptr ? 1 : 0;
  return kSuccess;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice,
                                                                           nvmlDevice_t* device) {
  Call call("nvmlDeviceGetDeviceHandleFromMigDeviceHandle");
  Target target;
  if (nvmlReturn_t rc = call.Lookup(migDevice, target); rc != kSuccess) return rc;
  if (device == nullptr || target.mig == nullptr) return kInvalidArgument;
  *device = GpuHandle(target.index);
  return kSuccess;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) {
  Call call("nvmlDeviceGetGpuInstanceId");
  Target target;
  if (nvmlReturn_t rc = call.Lookup(device, target); rc != kSuccess) return rc;
  if (id == nullptr || target.mig == nullptr) return kInvalidArgument;
  *id = target.mig->gpu_instance;
  return kSuccess;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int* id) {
  Call call("nvmlDeviceGetComputeInstanceId");
  Target target;
  if (nvmlReturn_t rc = call.Lookup(device, target); rc != kSuccess) return rc;
  if (id == nullptr || target.mig == nullptr) return kInvalidArgument;
  *id = target.mig->compute_instance;
  return kSuccess;
}

// ---- Events.

FAKE_NVML_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  Call call("nvmlEventSetCreate");
  if (nvmlReturn_t rc = call.Begin(); rc != kSuccess) return rc;
  if (set == nullptr) return kInvalidArgument;
  nvmlEventSet_t created = new nvmlEventSet_st;
  const std::vector<FakeEvent>& events = call.s.file.events;
  created->last_id = events.empty() ? 0 : events.back().id;  // ids increase along the list
  call.s.event_sets.insert(created);
  *set = created;
  return kSuccess;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long* eventTypes) {
  Call call("nvmlDeviceGetSupportedEventTypes");
  Target target;
  if (nvmlReturn_t rc = call.Lookup(device, target); rc != kSuccess) return rc;
  if (eventTypes == nullptr) return kInvalidArgument;
  if (target.mig != nullptr) return kNotSupported;
  *eventTypes = kSupportedEventTypes;
  return kSuccess;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                                       nvmlEventSet_t set) {
  Call call("nvmlDeviceRegisterEvents");
  Target target;
  if (nvmlReturn_t rc = call.Lookup(device, target); rc != kSuccess) return rc;
  if (set == nullptr || call.s.event_sets.count(set) == 0) return kInvalidArgument;
  if (target.mig != nullptr || (eventTypes & ~kSupportedEventTypes) != 0) return kNotSupported;
  set->registered[target.index] |= eventTypes;
  return kSuccess;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeoutms) {
  return WaitForEvent("nvmlEventSetWait_v2", set, data, timeoutms);
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeoutms) {
  return WaitForEvent("nvmlEventSetWait", set, data, timeoutms);
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  Call call("nvmlEventSetFree");
  if (nvmlReturn_t rc = call.Begin(); rc != kSuccess) return rc;
  if (set == nullptr || call.s.event_sets.erase(set) == 0) return kInvalidArgument;
  delete set;
  return kSuccess;
}
