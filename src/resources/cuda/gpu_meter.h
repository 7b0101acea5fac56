// GpuMeter: the CUDA plugin's DeviceMeter. It reads the usage and process
// list of each GPU this agent owns through NVML.
//
// Thread-safety: every method may be called from any thread; the meter holds
// only immutable state and an NvmlApi, which is itself thread-safe. It shares
// the plugin's NVML initialisation, which lasts while either holds it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "resources/cuda/nvml.h"
#include "resources/device_meter.h"

namespace slotd {

class GpuMeter : public DeviceMeter {
 public:
  // Measures the GPUs `owned` (UUIDs, in allow-list order) through `nvml`.
  GpuMeter(std::shared_ptr<NvmlApi> nvml, std::vector<std::string> owned);

  std::string Plugin() const override { return "cuda"; }
  std::vector<std::string> Devices() const override { return owned_; }
  // NvmlApi::Usage and NvmlApi::Processes of GPU `id`. kNotFound when `id` is
  // not one of Devices(); kUnavailable naming the GPU and NVML's error when
  // either call fails (a GPU that NVML no longer knows included).
  Result<DeviceReading> Measure(const std::string& id) override;

 private:
  const std::shared_ptr<NvmlApi> nvml_;
  const std::vector<std::string> owned_;
};

}  // namespace slotd
