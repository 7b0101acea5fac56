// The CUDA plugin ([resource.cuda]): NVIDIA GPUs discovered through NVML,
// owned from an allow-list of GPU indices, GPU UUIDs and MIG UUIDs. A whole
// GPU is a device of slot type "cuda.device"; a GPU in MIG mode is not: each
// of its MIG instances is a device of the slot type of its profile,
// "cuda.mig-<g>c<m>g" (MigSlot). Owning a GPU in MIG mode (by index or UUID)
// owns every instance it has. The plugin never changes MIG mode or instances.
#pragma once

#include <memory>

#include "resources/cuda/cuda_kind.h"
#include "resources/cuda/gpu_health.h"
#include "resources/cuda/nvml.h"
#include "resources/device_plugin.h"

namespace slotd {

// The slot type of MIG profile `profile`, after Backend.AI's "cuda.mig-2c10g":
// "<g>g.<m>gb" (compute slices, memory) is "cuda.mig-<g>c<m>g"; any other
// profile ("1c.3g.71gb", "1g.18gb+me") is "cuda.mig-" and the profile with
// each character other than a-z and 0-9 replaced by "-".
std::string MigSlot(const std::string& profile);

class CudaPlugin : public DevicePlugin {
 public:
  // Discovers the GPUs and their MIG instances through `nvml` and resolves
  // config.allowed_devices. An index that matches no GPU, or an entry named
  // twice (a MIG instance of a GPU listed whole included), is
  // kInvalidArgument naming it and listing the GPUs found. A UUID that
  // matches nothing is owned as a missing device (a GPU that fell off the
  // bus must not stop the agent), logged as a warning.
  static Result<std::unique_ptr<CudaPlugin>> Create(const CudaConfig& config, std::unique_ptr<NvmlApi> nvml);

  // Gives the container exactly its GPUs and MIG instances per `attach`:
  // DeviceRequests (driver nvidia), CDI names, or only the environment; in
  // every mode CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES name them by
  // UUID ("void"/empty for a kernel without any, so an image's own
  // NVIDIA_VISIBLE_DEVICES=all cannot reach the node's GPUs).
  void Apply(const Allocation& alloc, ContainerSpec& spec) const override;

  // A GPU owned whole is claimed by its UUID; a MIG instance as
  // "<GPU UUID>/<MIG UUID>"; a GPU in MIG mode listed whole by its UUID.
  std::vector<std::string> ClaimedDevices() const override { return claimed_; }
  // An index or a GPU UUID names the GPU or every owned MIG instance of it; a
  // MIG UUID names that instance.
  Result<std::vector<std::string>> ResolveDevice(const std::string& name) const override;
  void StartHealthMonitor() override { monitor_->Start(); }
  bool StopsKernelsOnUnhealthy() const override { return stop_on_unhealthy_; }

  // A GpuMeter over this plugin's NVML and owned GPUs and MIG instances.
  std::shared_ptr<DeviceMeter> Meter() const override { return meter_; }

 private:
  CudaPlugin(std::vector<Device> present, const std::vector<std::string>& allowed, std::vector<std::string> claimed,
             std::vector<GpuInfo> gpus, const CudaConfig& config, std::shared_ptr<NvmlApi> nvml,
             std::vector<GpuHealthMonitor::Gpu> watched);

  const std::string attach_;
  const bool stop_on_unhealthy_;
  const std::vector<std::string> claimed_;
  const std::vector<GpuInfo> gpus_;      // as discovered at start
  const std::shared_ptr<NvmlApi> nvml_;  // shared with meter_ and monitor_; NVML stays initialised while any lives
  const std::shared_ptr<DeviceMeter> meter_;
  std::unique_ptr<GpuHealthMonitor> monitor_;
};

}  // namespace slotd
