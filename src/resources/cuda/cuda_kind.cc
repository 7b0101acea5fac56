#include "resources/cuda/cuda_kind.h"

#include <algorithm>
#include <cctype>
#include <string_view>

#include "resources/cuda/cuda_plugin.h"
#include "resources/cuda/nvml.h"

namespace slotd {
namespace {

constexpr char kName[] = "cuda";

// A GPU entry of resource.cuda.allowed-devices: a string; an integer is
// refused with the advice to quote it.
ValueType<std::string> GpuEntryType() {
  ValueType<std::string> type = StringType();
  type.read = [string = type.read](const Field& field, ConfigReader& reader) -> std::optional<std::string> {
    if (const auto* number = field.node->as_integer()) {
      const std::string index = std::to_string(number->get());
      reader.Report(field, "expected a string, found the integer " + index + "; quote GPU indices: \"" + index + "\"");
      return std::nullopt;
    }
    return string(field, reader);
  };
  return type;
}


Check<std::string> LibraryNameOrAbsolutePath() {
  return Rule<std::string>("Not a relative path.", [](const std::string& library, const Field&,
                                                      const ConfigReader&) -> std::string {
    if (library.front() == '/' || library.find('/') == std::string::npos) return "";
    return "\"" + library + "\" is a relative path; give a library name like \"libnvidia-ml.so.1\" or an absolute path";
  });
}

// True for a device as nvidia-smi -L names it: a GPU index without leading
// zeros ("0", "12"), or a GPU or MIG UUID ("GPU-" or "MIG-" followed by hex
// digits and dashes).
bool IsGpuIndexOrUuid(const std::string& entry) {
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (!entry.empty() && std::all_of(entry.begin(), entry.end(), digit)) return entry == "0" || entry[0] != '0';
  for (std::string_view prefix : {std::string_view("GPU-"), std::string_view("MIG-")}) {
    if (entry.size() <= prefix.size() || entry.rfind(prefix, 0) != 0) continue;
    return std::all_of(entry.begin() + prefix.size(), entry.end(),
                       [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) || c == '-'; });
  }
  return false;
}

Check<std::string> GpuIndexOrUuid() {
  return Rule<std::string>(
      "A UUID is `GPU-` or `MIG-` followed by hex digits and dashes; an index is a decimal number without leading "
      "zeros.",
      [](const std::string& entry, const Field&, const ConfigReader&) -> std::string {
        if (IsGpuIndexOrUuid(entry)) return "";
        return "\"" + entry +
               "\" is neither a GPU or MIG UUID like \"GPU-6f3c1a2b-...\" nor an index like \"1\"; copy them from "
               "nvidia-smi -L";
      });
}

// resource.cuda.critical-xids: an array of Xids (whole numbers 1 to 65535),
// possibly empty (no Xid makes a GPU unhealthy).
ValueType<std::vector<int>> XidListType() {
  ValueType<std::vector<int>> type;
  type.name = "array of integers";
  type.read = [](const Field& field, ConfigReader& reader) -> std::optional<std::vector<int>> {
    const toml::array* array = field.node->as_array();
    if (array == nullptr) {
      reader.Report(field, "expected an array of Xids like [48, 79], found " + TypeName(*field.node));
      return std::nullopt;
    }
    std::vector<int> xids;
    bool ok = true;
    for (size_t i = 0; i < array->size(); ++i) {
      const Field item{array->get(i), field.path + "[" + std::to_string(i) + "]"};
      const auto* number = item.node->as_integer();
      if (number == nullptr || number->get() < 1 || number->get() > 65535) {
        reader.Report(item, "expected an Xid, a whole number from 1 to 65535 as nvidia-smi and the kernel log "
                            "write it");
        ok = false;
        continue;
      }
      xids.push_back(static_cast<int>(number->get()));
    }
    if (!ok) return std::nullopt;
    std::sort(xids.begin(), xids.end());
    xids.erase(std::unique(xids.begin(), xids.end()), xids.end());
    return xids;
  };
  type.text = [](const std::vector<int>& xids) {
    std::string out;
    for (int xid : xids) out += (out.empty() ? "" : ", ") + std::to_string(xid);
    return "[" + out + "]";
  };
  return type;
}


KeyTable<CudaConfig> CudaKeys() {
  return {"resource.cuda", "[resource.cuda]", {
    StoredKey<CudaConfig, std::vector<std::string>>(
        "allowed-devices",
        ListType(GpuEntryType(), {GpuIndexOrUuid()}, "GPU UUIDs or indices like [\"GPU-6f3c1a2b-...\", \"1\"]",
                 "list at least one GPU, or leave allowed-devices out to use every visible GPU", "list each GPU once"),
        "Allow-list: the GPUs and MIG instances this agent may give to kernels; the others are left alone. Each "
        "entry is a GPU UUID (`\"GPU-6f3c1a2b-9d4e-4f5a-8b6c-7d8e9f0a1b2c\"`), a GPU index (`\"1\"`) or a MIG "
        "instance UUID (`\"MIG-5c1d...\"`), as `nvidia-smi -L` shows them. A GPU in MIG mode named by index or "
        "UUID gives the agent every MIG instance it has. Entries are strings: an index written as a bare integer is "
        "an error that says to quote it. An index that names no GPU stops the start, and the error lists the GPUs "
        "found; a UUID that names nothing on the node (a GPU that fell off the bus) is owned as a missing device, "
        "reported unhealthy and never allocated. Agents on one node need lists that do not share a GPU: a GPU and "
        "one of its MIG instances clash, two MIG instances of one GPU do not.",
        {},
        [](CudaConfig& cuda, std::vector<std::string>&& devices) {
          cuda.allowed_devices = std::move(devices);
          cuda.allowed_devices_explicit = true;
        },
        nullptr)
        .DefaultDoc("every GPU NVML reports"),
    MemberKey("nvml-library", &CudaConfig::nvml_library, StringType(),
              "The NVML library to load: a file name, searched for as the dynamic loader does, or an absolute "
              "path.",
              {NotEmpty(), LibraryNameOrAbsolutePath()}),
    MemberKey("attach", &CudaConfig::attach, EnumType({"device-requests", "env", "cdi"}),
              "How a kernel's container is given its GPUs: `device-requests` (a Docker device request for the "
              "GPUs' UUIDs, served by the NVIDIA Container Toolkit), `env` (only `NVIDIA_VISIBLE_DEVICES` and "
              "`CUDA_VISIBLE_DEVICES`, for a runtime that reads them) or `cdi` (CDI device names "
              "`nvidia.com/gpu=<uuid>`). Every mode also sets the two variables."),
    StoredKey<CudaConfig, std::vector<int>>(
        "critical-xids", XidListType(),
        "The Xid errors that make a GPU (or the MIG instance NVML names) unhealthy until the operator clears it "
        "(`slotctl device clear`). The default list is 48 (double-bit ECC error), 61 and 62 (internal "
        "micro-controller breakpoint or halt), 63 and 64 (ECC page retirement or row remapping event or failure), "
        "74 (NVLink error), 79 (fallen off the bus), 92 (high single-bit ECC error rate), 94 and 95 (contained and "
        "uncontained ECC error), 119 and 120 (GSP timeout or error) and 140 (unrecovered ECC error); Xids that an "
        "application causes (13, 31, 43, 45, 68, ...) are left out. An empty list turns Xid watching off; ECC "
        "counters, retired pages, row remapping and lost GPUs are polled all the same.",
        {},
        [](CudaConfig& cuda, std::vector<int>&& xids) { cuda.critical_xids = std::move(xids); },
        nullptr)
        .DefaultDoc("`" + XidListType().text(DefaultCriticalXids()) + "`"),
    MemberKey("on-unhealthy", &CudaConfig::on_unhealthy, EnumType({"report", "stop"}),
              "What becomes of a kernel that holds a device when it turns unhealthy: `report` leaves it running "
              "with a condition and a `kernel_condition` event; `stop` stops it, TERMINATED with reason "
              "`device unhealthy`."),
  }};
}

Result<std::unique_ptr<ResourcePlugin>> MakeCudaPlugin(const DeviceSection& section) {
  const auto& config = static_cast<const CudaConfig&>(section);
  auto nvml = LoadNvml(config.nvml_library);
  if (!nvml.ok()) return nvml.status().WithPrefix("resource.cuda");
  auto plugin = CudaPlugin::Create(config, std::move(*nvml));
  if (!plugin.ok()) return plugin.status();
  return std::unique_ptr<ResourcePlugin>(std::move(*plugin));
}

// The GPUs the plugin would own. Where NVML cannot be loaded (a check run
// on another machine than the GPU node), the allow-list is kept as written,
// or, without one, stands for every GPU, with a note saying so.
Result<CheckedDevices> CheckCudaDevices(const DeviceSection& section) {
  const auto& config = static_cast<const CudaConfig&>(section);
  CheckedDevices checked;
  auto nvml = LoadNvml(config.nvml_library);
  if (!nvml.ok()) {
    const std::string why = "because NVML cannot be loaded here: " + nvml.status().message();
    if (config.allowed_devices_explicit) {
      checked.ids = config.allowed_devices;
      checked.note =
          "resource.cuda.allowed-devices compared as written, not checked against this node's GPUs (an index and "
          "the UUID of the same GPU are not seen as one), " + why;
    } else {
      checked.every_device = true;
      checked.note = "resource.cuda has no allowed-devices, so it takes every GPU; they cannot be listed " + why;
    }
    return checked;
  }
  auto plugin = CudaPlugin::Create(config, std::move(*nvml));
  if (!plugin.ok()) return plugin.status();
  checked.ids = (*plugin)->ClaimedDevices();
  for (const auto& [id, state] : (*plugin)->Health()->Snapshot())
    if (state.reason.rfind("missing", 0) == 0)
      checked.note += (checked.note.empty() ? "" : "; ") + ("resource.cuda.allowed-devices: " + id +
                                                            " is not on this node; the agent would own it as missing");
  return checked;
}

}  // namespace

DeviceKind CudaKind() {
  return DeviceKind{
      kName,
      {{"NVIDIA_VISIBLE_DEVICES", "void"},  // the NVIDIA container runtime's "no GPU"
       {"CUDA_VISIBLE_DEVICES", ""}},
      DeviceSectionFor(kName, CudaKeys()),
      MakeCudaPlugin,
      CheckCudaDevices,
  };
}

}  // namespace slotd
