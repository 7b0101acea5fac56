#include "resources/cuda/gpu_meter.h"

#include <algorithm>

namespace slotd {

GpuMeter::GpuMeter(std::shared_ptr<NvmlApi> nvml, std::vector<std::string> owned)
    : nvml_(std::move(nvml)), owned_(std::move(owned)) {}

Result<DeviceReading> GpuMeter::Measure(const std::string& id) {
  if (std::find(owned_.begin(), owned_.end(), id) == owned_.end())
    return Status::NotFound("cuda: GPU " + id + " is not one of this agent's GPUs");
  Result<GpuUsage> usage = nvml_->Usage(id);
  if (!usage.ok()) return Status::Unavailable("cuda: measuring GPU " + id + ": " + usage.status().message());
  Result<std::vector<GpuProcess>> processes = nvml_->Processes(id);
  if (!processes.ok())
    return Status::Unavailable("cuda: listing the processes of GPU " + id + ": " + processes.status().message());

  DeviceReading reading;
  reading.memory_used_bytes = usage->memory_used_bytes;
  reading.memory_total_bytes = usage->memory_total_bytes;
  reading.utilization_percent = usage->gpu_util_percent;
  reading.memory_utilization_percent = usage->memory_util_percent;
  for (const GpuProcess& process : *processes)
    reading.processes.push_back({process.pid, process.used_memory_bytes});
  return reading;
}

}  // namespace slotd
