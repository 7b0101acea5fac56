#include "resources/cuda/cuda_plugin.h"

#include <algorithm>
#include <cctype>

#include <spdlog/spdlog.h>

#include "resources/cuda/gpu_meter.h"

namespace slotd {
namespace {

bool IsIndex(const std::string& entry) {
  return !entry.empty() && std::all_of(entry.begin(), entry.end(), [](unsigned char c) { return std::isdigit(c); });
}

// A GPU given whole.
Device WholeGpu(const GpuInfo& gpu) {
  return {gpu.uuid,
          gpu.numa_node,
          {{"index", gpu.index},
           {"name", gpu.name},
           {"memory", gpu.memory_bytes},
           {"minor", gpu.minor},
           {"pci_bus_id", gpu.pci_bus_id}},
          ""};
}

// A MIG instance of `gpu`.
Device MigDevice(const GpuInfo& gpu, const MigInstance& instance) {
  return {instance.uuid,
          gpu.numa_node,
          {{"index", gpu.index},
           {"name", gpu.name + " MIG " + instance.profile},
           {"profile", instance.profile},
           {"memory", instance.memory_bytes},
           {"parent", gpu.uuid},
           {"gpu_instance_id", instance.gpu_instance_id},
           {"compute_instance_id", instance.compute_instance_id},
           {"minor", gpu.minor},
           {"pci_bus_id", gpu.pci_bus_id}},
          MigSlot(instance.profile)};
}

}  // namespace

std::string MigSlot(const std::string& profile) {
  // "<g>g.<m>gb": digits, "g.", digits, "gb".
  const size_t dot = profile.find("g.");
  auto digits = [](const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
  };
  if (dot != std::string::npos && profile.size() > dot + 4 && profile.compare(profile.size() - 2, 2, "gb") == 0) {
    const std::string slices = profile.substr(0, dot), memory = profile.substr(dot + 2, profile.size() - dot - 4);
    if (digits(slices) && digits(memory)) return "cuda.mig-" + slices + "c" + memory + "g";
  }
  std::string slot = "cuda.mig-";
  for (char c : profile) {
    const char lower = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    slot += (std::isalnum(static_cast<unsigned char>(lower)) != 0) ? lower : '-';
  }
  return slot;
}

CudaPlugin::CudaPlugin(std::vector<Device> present, const std::vector<std::string>& allowed,
                       std::vector<std::string> claimed, std::vector<GpuInfo> gpus, const CudaConfig& config,
                       std::shared_ptr<NvmlApi> nvml, std::vector<GpuHealthMonitor::Gpu> watched)
    : DevicePlugin("cuda", std::move(present), allowed,
                   AbsentDevices{/*keep_listed=*/true, /*claim_unlisted=*/!config.allowed_devices_explicit}),
      attach_(config.attach),
      stop_on_unhealthy_(config.on_unhealthy == "stop"),
      claimed_(std::move(claimed)),
      gpus_(std::move(gpus)),
      nvml_(std::move(nvml)),
      meter_(std::make_shared<GpuMeter>(nvml_, OwnedDevices())),
      monitor_(std::make_unique<GpuHealthMonitor>(
          nvml_, std::move(watched), Health(),
          std::set<uint64_t>(config.critical_xids.begin(), config.critical_xids.end()))) {}

Result<std::unique_ptr<CudaPlugin>> CudaPlugin::Create(const CudaConfig& config, std::unique_ptr<NvmlApi> nvml) {
  auto gpus = nvml->Devices();
  if (!gpus.ok()) return gpus.status().WithPrefix("resource.cuda: discovering GPUs through " + nvml->LibraryPath());
  std::vector<Device> present;
  std::string found;
  for (const auto& gpu : *gpus) {
    found += (found.empty() ? "" : ", ") + std::to_string(gpu.index) + " " +
             (gpu.uuid.empty() ? std::string("(UUID unreadable)") : gpu.uuid) + " (" +
             (gpu.lost ? std::string("lost") : gpu.name) + (gpu.mig_enabled ? ", MIG mode" : "") + ")";
    if (gpu.uuid.empty()) continue;
    if (!gpu.mig_enabled) present.push_back(WholeGpu(gpu));
    for (const auto& instance : gpu.mig_instances) {
      present.push_back(MigDevice(gpu, instance));
      found += (found.empty() ? "" : ", ") + instance.uuid + " (" + instance.profile + " of GPU " +
               std::to_string(gpu.index) + ")";
    }
  }
  if (found.empty()) found = "none";

  std::vector<std::string> allowed, claimed;
  std::vector<GpuHealthMonitor::Gpu> watched;
  auto listed = [&](const std::string& uuid) { return std::find(claimed.begin(), claimed.end(), uuid) != claimed.end(); };
  auto twice = [&](const std::string& entry, const std::string& what) {
    return Status::InvalidArgument("resource.cuda.allowed-devices: \"" + entry + "\" names " + what +
                                   ", which is already listed; list each GPU and MIG instance once");
  };
  // Owns `gpu` whole: itself, or every MIG instance it has.
  auto own_gpu = [&](const GpuInfo& gpu, const std::string& entry) -> Status {
    const bool part_listed = std::any_of(claimed.begin(), claimed.end(), [&](const std::string& c) {
      return c.rfind(gpu.uuid + "/", 0) == 0;
    });
    if (listed(gpu.uuid) || part_listed) return twice(entry, "GPU " + gpu.uuid + (part_listed ? " (a MIG instance of it)" : ""));
    claimed.push_back(gpu.uuid);
    GpuHealthMonitor::Gpu watch{gpu.uuid, {}, {}, /*whole=*/true};
    if (!gpu.mig_enabled) {
      allowed.push_back(gpu.uuid);
      watch.devices.push_back(gpu.uuid);
    }
    for (const auto& instance : gpu.mig_instances) {
      allowed.push_back(instance.uuid);
      watch.devices.push_back(instance.uuid);
      watch.by_gpu_instance[instance.gpu_instance_id].push_back(instance.uuid);
    }
    watched.push_back(std::move(watch));
    return Status::Ok();
  };
  // Owns a UUID that NVML does not report, as a missing device.
  auto own_missing = [&](const std::string& entry) -> Status {
    if (listed(entry)) return twice(entry, entry);
    spdlog::warn("resource.cuda.allowed-devices: {} is not on this node (GPUs found: {}); it is owned as missing, "
                 "reported unhealthy and never allocated until it is back",
                 entry, found);
    allowed.push_back(entry);
    claimed.push_back(entry);
    if (entry.rfind("GPU-", 0) == 0) watched.push_back({entry, {entry}, {}, /*whole=*/true});
    return Status::Ok();
  };

  if (!config.allowed_devices_explicit) {
    for (const auto& gpu : *gpus)
      if (!gpu.uuid.empty()) (void)own_gpu(gpu, gpu.uuid);
  }
  for (const auto& entry : config.allowed_devices) {
    Status owned;
    if (IsIndex(entry)) {
      auto match = std::find_if(gpus->begin(), gpus->end(),
                                [&](const GpuInfo& gpu) { return std::to_string(gpu.index) == entry; });
      if (match == gpus->end())
        return Status::InvalidArgument("resource.cuda.allowed-devices: \"" + entry +
                                       "\" matches no GPU on this node (by index); GPUs found: " + found +
                                       ". List GPUs by their index or UUID as nvidia-smi -L shows them");
      if (match->uuid.empty())
        return Status::InvalidArgument("resource.cuda.allowed-devices: GPU " + entry +
                                       " is lost (NVML cannot read its UUID); list GPUs by UUID, so that the agent "
                                       "can start without a lost one");
      owned = own_gpu(*match, entry);
    } else {
      const GpuInfo* parent = nullptr;
      const MigInstance* instance = nullptr;
      for (const auto& gpu : *gpus) {
        if (gpu.uuid == entry) parent = &gpu;
        for (const auto& mig : gpu.mig_instances)
          if (mig.uuid == entry) parent = &gpu, instance = &mig;
      }
      if (parent == nullptr) {
        owned = own_missing(entry);
      } else if (instance == nullptr) {
        owned = own_gpu(*parent, entry);
      } else {
        const std::string claim = parent->uuid + "/" + instance->uuid;
        if (listed(parent->uuid)) owned = twice(entry, "a MIG instance of GPU " + parent->uuid);
        else if (listed(claim)) owned = twice(entry, "MIG instance " + instance->uuid);
        if (owned.ok()) {
          allowed.push_back(instance->uuid);
          claimed.push_back(claim);
          auto watch = std::find_if(watched.begin(), watched.end(),
                                    [&](const GpuHealthMonitor::Gpu& g) { return g.uuid == parent->uuid; });
          if (watch == watched.end()) watch = watched.insert(watched.end(), {parent->uuid, {}, {}, /*whole=*/false});
          watch->devices.push_back(instance->uuid);
          watch->by_gpu_instance[instance->gpu_instance_id].push_back(instance->uuid);
        }
      }
    }
    if (!owned.ok()) return owned;
  }
  return std::unique_ptr<CudaPlugin>(new CudaPlugin(std::move(present), allowed, std::move(claimed),
                                                    std::move(*gpus), config, std::move(nvml), std::move(watched)));
}

Result<std::vector<std::string>> CudaPlugin::ResolveDevice(const std::string& name) const {
  std::string uuid = name;
  if (IsIndex(name)) {
    auto gpu = std::find_if(gpus_.begin(), gpus_.end(), [&](const GpuInfo& g) { return std::to_string(g.index) == name; });
    if (gpu != gpus_.end()) uuid = gpu->uuid;
  }
  std::vector<std::string> ids;
  for (const std::string& id : OwnedDevices()) {
    const Device* device = Owned(id);
    if (id == uuid || device->properties.value("parent", "") == uuid) ids.push_back(id);
  }
  if (!ids.empty()) return ids;
  return DevicePlugin::ResolveDevice(name);
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
