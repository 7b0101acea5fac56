#include "resources/cuda/cuda_plugin.h"

#include <algorithm>
#include <cctype>

#include "resources/cuda/gpu_meter.h"

namespace slotd {

CudaPlugin::CudaPlugin(std::vector<Device> present, const std::vector<std::string>& allowed, std::string attach,
                       std::shared_ptr<NvmlApi> nvml)
    : DevicePlugin("cuda", std::move(present), allowed),
      attach_(std::move(attach)),
      nvml_(std::move(nvml)),
      meter_(std::make_shared<GpuMeter>(nvml_, OwnedDevices())) {}

Result<std::unique_ptr<CudaPlugin>> CudaPlugin::Create(const CudaConfig& config, std::unique_ptr<NvmlApi> nvml) {
  auto gpus = nvml->Devices();
  if (!gpus.ok()) return gpus.status().WithPrefix("resource.cuda: discovering GPUs through " + nvml->LibraryPath());
  std::vector<Device> present;
  std::string found;
  for (const auto& gpu : *gpus) {
    present.push_back({gpu.uuid,
                       gpu.numa_node,
                       {{"index", gpu.index},
                        {"name", gpu.name},
                        {"memory", gpu.memory_bytes},
                        {"minor", gpu.minor},
                        {"pci_bus_id", gpu.pci_bus_id}}});
    found += (found.empty() ? "" : ", ") + std::to_string(gpu.index) + " " + gpu.uuid + " (" + gpu.name + ")";
  }
  if (found.empty()) found = "none";

  std::vector<std::string> allowed;
  if (!config.allowed_devices_explicit) {
    for (const auto& gpu : *gpus) allowed.push_back(gpu.uuid);
  }
  for (const auto& entry : config.allowed_devices) {
    bool is_index = !entry.empty() && std::all_of(entry.begin(), entry.end(), [](unsigned char c) { return std::isdigit(c); });
    auto match = std::find_if(gpus->begin(), gpus->end(), [&](const GpuInfo& gpu) {
      return is_index ? std::to_string(gpu.index) == entry : gpu.uuid == entry;
    });
    if (match == gpus->end())
      return Status::InvalidArgument("resource.cuda.allowed-devices: \"" + entry + "\" matches no GPU on this node (" +
                                     (is_index ? "by index" : "by UUID") + "); GPUs found: " + found +
                                     ". List GPUs by their index or UUID as nvidia-smi -L shows them");
    if (std::find(allowed.begin(), allowed.end(), match->uuid) != allowed.end())
      return Status::InvalidArgument("resource.cuda.allowed-devices: \"" + entry + "\" names GPU " + match->uuid +
                                     ", which is already listed; list each GPU once");
    allowed.push_back(match->uuid);
  }
  return std::unique_ptr<CudaPlugin>(new CudaPlugin(std::move(present), allowed, config.attach, std::move(nvml)));
}

void CudaPlugin::Apply(const Allocation& alloc, ContainerSpec& spec) const {
  std::vector<std::string> uuids = HeldIds(alloc);
  std::string list;
  for (const auto& uuid : uuids) list += (list.empty() ? "" : ",") + uuid;
  if (!uuids.empty() && attach_ == "device-requests") {
    spec.device_requests.push_back({"nvidia", uuids, {"gpu"}});
  } else if (attach_ == "cdi") {
    for (const auto& uuid : uuids) spec.cdi_devices.push_back("nvidia.com/gpu=" + uuid);
  }
  spec.env.push_back("NVIDIA_VISIBLE_DEVICES=" + (list.empty() ? std::string("void") : list));
  spec.env.push_back("CUDA_VISIBLE_DEVICES=" + list);
}

}  // namespace slotd
