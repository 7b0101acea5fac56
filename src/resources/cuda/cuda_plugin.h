// The CUDA plugin ([resource.cuda]): whole NVIDIA GPUs discovered through
// NVML, owned from an allow-list of UUIDs or indices (normalised to UUIDs at
// start). Slot type "cuda.device".
#pragma once

#include <memory>

#include "resources/cuda/cuda_kind.h"
#include "resources/cuda/nvml.h"
#include "resources/device_plugin.h"

namespace slotd {

class CudaPlugin : public DevicePlugin {
 public:
  // Discovers the GPUs through `nvml` and resolves config.allowed_devices. An
  // entry that matches no GPU is kInvalidArgument naming it and listing the
  // GPUs found.
  static Result<std::unique_ptr<CudaPlugin>> Create(const CudaConfig& config, std::unique_ptr<NvmlApi> nvml);

  // Gives the container exactly its GPUs per `attach`: DeviceRequests
  // (driver nvidia), CDI names, or only the environment; in every mode
  // CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES name its GPUs by UUID
  // ("void"/empty for a kernel without GPUs, so an image's own
  // NVIDIA_VISIBLE_DEVICES=all cannot reach the node's GPUs).
  void Apply(const Allocation& alloc, ContainerSpec& spec) const override;

  // A GpuMeter over this plugin's NVML and owned GPUs.
  std::shared_ptr<DeviceMeter> Meter() const override { return meter_; }

 private:
  CudaPlugin(std::vector<Device> present, const std::vector<std::string>& allowed, std::string attach,
             std::shared_ptr<NvmlApi> nvml);

  const std::string attach_;
  const std::shared_ptr<NvmlApi> nvml_;  // shared with meter_; NVML stays initialised while either lives
  const std::shared_ptr<DeviceMeter> meter_;
};

}  // namespace slotd
