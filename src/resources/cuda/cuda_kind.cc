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

// True for a GPU as nvidia-smi -L names it: an index without leading zeros
// ("0", "12") or a UUID ("GPU-" followed by hex digits and dashes).
bool IsGpuIndexOrUuid(const std::string& entry) {
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (!entry.empty() && std::all_of(entry.begin(), entry.end(), digit)) return entry == "0" || entry[0] != '0';
  constexpr std::string_view kUuidPrefix = "GPU-";
  if (entry.size() <= kUuidPrefix.size() || entry.rfind(kUuidPrefix, 0) != 0) return false;
  return std::all_of(entry.begin() + kUuidPrefix.size(), entry.end(),
                     [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) || c == '-'; });
}

Check<std::string> GpuIndexOrUuid() {
  return Rule<std::string>(
      "A UUID is `GPU-` followed by hex digits and dashes; an index is a decimal number without leading zeros.",
      [](const std::string& entry, const Field&, const ConfigReader&) -> std::string {
        if (IsGpuIndexOrUuid(entry)) return "";
        return "\"" + entry +
               "\" is neither a GPU UUID like \"GPU-6f3c1a2b-...\" nor an index like \"1\"; copy them from "
               "nvidia-smi -L";
      });
}


KeyTable<CudaConfig> CudaKeys() {
  return {"resource.cuda", "[resource.cuda]", {
    StoredKey<CudaConfig, std::vector<std::string>>(
        "allowed-devices",
        ListType(GpuEntryType(), {GpuIndexOrUuid()}, "GPU UUIDs or indices like [\"GPU-6f3c1a2b-...\", \"1\"]",
                 "list at least one GPU, or leave allowed-devices out to use every visible GPU", "list each GPU once"),
        "Allow-list: the GPUs this agent may give to kernels; the others are left alone. Each entry is a GPU UUID "
        "(`\"GPU-6f3c1a2b-9d4e-4f5a-8b6c-7d8e9f0a1b2c\"`) or an index (`\"1\"`), as `nvidia-smi -L` shows them. "
        "Entries are strings: an index written as a bare integer is an error that says to quote it. Whether each "
        "entry names a GPU of this node is checked when the agent starts, and the error lists the GPUs found. "
        "Agents on one node need lists that do not share a GPU.",
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
  checked.ids = (*plugin)->OwnedDevices();
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
