// The cuda device kind: NVIDIA GPUs and MIG instances found through NVML,
// configured by [resource.cuda]. Slot types "cuda.device" (a whole GPU) and
// "cuda.mig-<g>c<m>g" (a MIG instance, by profile); a kernel's devices are
// named by UUID in NVIDIA_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "resources/cuda/gpu_health.h"
#include "resources/device_kinds.h"

namespace slotd {

// [resource.cuda]. Entries are normalised to UUIDs by the plugin at start,
// against the GPUs NVML reports.
struct CudaConfig : DeviceSectionBase<CudaConfig> {
  std::vector<std::string> allowed_devices;  // GPU or MIG UUIDs or GPU indices as written; empty: every visible GPU
  bool allowed_devices_explicit = false;
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string attach = "device-requests";    // device-requests | env | cdi
  std::vector<int> critical_xids = DefaultCriticalXids();  // the Xids that make a GPU unhealthy
  std::string on_unhealthy = "report";       // report | stop: what becomes of a kernel on an unhealthy device

  bool operator==(const CudaConfig&) const = default;
};

// The kind, for DeviceKinds().
DeviceKind CudaKind();

}  // namespace slotd
