#include "resources/cuda/cuda_plugin.h"

#include <algorithm>
#include <cctype>

#include <spdlog/spdlog.h>

#include "common/ascii.h"
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

// The devices of `gpus` as the plugin presents them: of each GPU with a
// UUID, the GPU whole when it is not in MIG mode, and each MIG instance.
std::vector<Device> PresentCudaDevices(const std::vector<GpuInfo>& gpus) {
  std::vector<Device> present;
  for (const auto& gpu : gpus) {
    if (gpu.uuid.empty()) continue;
    if (!gpu.mig_enabled) present.push_back(WholeGpu(gpu));
    for (const auto& instance : gpu.mig_instances) present.push_back(MigDevice(gpu, instance));
  }
  return present;
}

// "0 GPU-... (NVIDIA A100, MIG mode), MIG-... (1g.10gb of GPU 0)": each of
// `gpus` by index, UUID and name (or lost), and the MIG instances of those
// with a UUID; "none" when there are none.
std::string DescribeCudaGpus(const std::vector<GpuInfo>& gpus) {
  std::string found;
  for (const auto& gpu : gpus) {
    found += (found.empty() ? "" : ", ") + std::to_string(gpu.index) + " " +
             (gpu.uuid.empty() ? std::string("(UUID unreadable)") : gpu.uuid) + " (" +
             (gpu.lost ? std::string("lost") : gpu.name) + (gpu.mig_enabled ? ", MIG mode" : "") + ")";
    if (gpu.uuid.empty()) continue;
    for (const auto& instance : gpu.mig_instances)
      found += (found.empty() ? "" : ", ") + instance.uuid + " (" + instance.profile + " of GPU " +
               std::to_string(gpu.index) + ")";
  }
  if (found.empty()) found = "none";
  return found;
}

// What resource.cuda.allowed-devices owns, gathered entry by entry: the
// plugin's allow-list, its claims (as ClaimedDevices) and the GPUs its
// health monitor watches.
struct CudaOwnership {
  std::vector<std::string> allowed;
  std::vector<std::string> claimed;
  std::vector<GpuHealthMonitor::Gpu> watched;

  // Whether `claim` (a UUID, or "<GPU UUID>/<MIG UUID>") is claimed already.
  bool Claimed(const std::string& claim) const {
    return std::find(claimed.begin(), claimed.end(), claim) != claimed.end();
  }

  // The kInvalidArgument of an allow-list `entry` that names `what` again.
  static Status ListedTwice(const std::string& entry, const std::string& what) {
    return Status::InvalidArgument("resource.cuda.allowed-devices: \"" + entry + "\" names " + what +
                                   ", which is already listed; list each GPU and MIG instance once");
  }

  // Owns `gpu` whole: itself, or every MIG instance it has. Fails
  // (ListedTwice, naming `entry`) when it or a MIG instance of it is claimed.
  Status OwnGpu(const GpuInfo& gpu, const std::string& entry) {
    const bool part_listed = std::any_of(claimed.begin(), claimed.end(), [&](const std::string& c) {
      return c.rfind(gpu.uuid + "/", 0) == 0;
    });
    if (Claimed(gpu.uuid) || part_listed)
      return ListedTwice(entry, "GPU " + gpu.uuid + (part_listed ? " (a MIG instance of it)" : ""));
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
  }

  // Owns MIG instance `instance` of `gpu`, watched with the GPU. Fails
  // (ListedTwice, naming `entry`) when the GPU is claimed whole or the
  // instance is claimed.
  Status OwnMigInstance(const GpuInfo& gpu, const MigInstance& instance, const std::string& entry) {
    const std::string claim = gpu.uuid + "/" + instance.uuid;
    if (Claimed(gpu.uuid)) return ListedTwice(entry, "a MIG instance of GPU " + gpu.uuid);
    if (Claimed(claim)) return ListedTwice(entry, "MIG instance " + instance.uuid);
    allowed.push_back(instance.uuid);
    claimed.push_back(claim);
    auto watch = std::find_if(watched.begin(), watched.end(),
                              [&](const GpuHealthMonitor::Gpu& g) { return g.uuid == gpu.uuid; });
    if (watch == watched.end()) watch = watched.insert(watched.end(), {gpu.uuid, {}, {}, /*whole=*/false});
    watch->devices.push_back(instance.uuid);
    watch->by_gpu_instance[instance.gpu_instance_id].push_back(instance.uuid);
    return Status::Ok();
  }

  // Owns a UUID that NVML does not report, as a missing device, with a
  // warning that lists the GPUs `found`. Fails (ListedTwice) when it is
  // claimed already.
  Status OwnMissing(const std::string& entry, const std::string& found) {
    if (Claimed(entry)) return ListedTwice(entry, entry);
    spdlog::warn("resource.cuda.allowed-devices: {} is not on this node (GPUs found: {}); it is owned as missing, "
                 "reported unhealthy and never allocated until it is back",
                 entry, found);
    allowed.push_back(entry);
    claimed.push_back(entry);
    if (entry.rfind("GPU-", 0) == 0) watched.push_back({entry, {entry}, {}, /*whole=*/true});
    return Status::Ok();
  }

  // Owns what allow-list `entry` names among `gpus` (described as `found`):
  // a GPU by index or UUID, a MIG instance by UUID, else a missing device.
  // Fails (kInvalidArgument naming it) for an index that matches no GPU or a
  // lost one, and as the Own* calls do.
  Status OwnEntry(const std::vector<GpuInfo>& gpus, const std::string& entry, const std::string& found) {
    if (IsIndex(entry)) {
      auto match = std::find_if(gpus.begin(), gpus.end(),
                                [&](const GpuInfo& gpu) { return std::to_string(gpu.index) == entry; });
      if (match == gpus.end())
        return Status::InvalidArgument("resource.cuda.allowed-devices: \"" + entry +
                                       "\" matches no GPU on this node (by index); GPUs found: " + found +
                                       ". List GPUs by their index or UUID as nvidia-smi -L shows them");
      if (match->uuid.empty())
        return Status::InvalidArgument("resource.cuda.allowed-devices: GPU " + entry +
                                       " is lost (NVML cannot read its UUID); list GPUs by UUID, so that the agent "
                                       "can start without a lost one");
      return OwnGpu(*match, entry);
    }
    const GpuInfo* parent = nullptr;
    const MigInstance* instance = nullptr;
    for (const auto& gpu : gpus) {
      if (gpu.uuid == entry) parent = &gpu;
      for (const auto& mig : gpu.mig_instances)
        if (mig.uuid == entry) parent = &gpu, instance = &mig;
    }
    if (parent == nullptr) return OwnMissing(entry, found);
    if (instance == nullptr) return OwnGpu(*parent, entry);
    return OwnMigInstance(*parent, *instance, entry);
  }
};

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
    const char lower = AsciiLower(c);
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
  std::vector<Device> present = PresentCudaDevices(*gpus);
  const std::string found = DescribeCudaGpus(*gpus);

  CudaOwnership owned;
  if (!config.allowed_devices_explicit) {
    for (const auto& gpu : *gpus)
      if (!gpu.uuid.empty()) (void)owned.OwnGpu(gpu, gpu.uuid);
  }
  for (const auto& entry : config.allowed_devices)
    if (Status status = owned.OwnEntry(*gpus, entry, found); !status.ok()) return status;
  return std::unique_ptr<CudaPlugin>(new CudaPlugin(std::move(present), owned.allowed, std::move(owned.claimed),
                                                    std::move(*gpus), config, std::move(nvml),
                                                    std::move(owned.watched)));
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
