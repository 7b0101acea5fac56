// The cuda device kind: whole NVIDIA GPUs found through NVML, configured by
// [resource.cuda]. Slot type "cuda.device"; a kernel's GPUs are named by UUID
// in NVIDIA_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "resources/device_kinds.h"

namespace slotd {

// [resource.cuda]. Entries are normalised to UUIDs by the plugin at start,
// against the GPUs NVML reports.
struct CudaConfig : DeviceSectionBase<CudaConfig> {
  std::vector<std::string> allowed_devices;  // UUIDs or decimal indices as written; empty: every visible GPU
  bool allowed_devices_explicit = false;
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string attach = "device-requests";    // device-requests | env | cdi

  bool operator==(const CudaConfig&) const = default;
};

// The kind, for DeviceKinds().
DeviceKind CudaKind();

}  // namespace slotd
