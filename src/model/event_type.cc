#include "model/event_type.h"

namespace slotd {

const char* EventTypeName(EventType type) {
  switch (type) {
    case EventType::kKernelCreated: return "kernel_created";
    case EventType::kKernelStarted: return "kernel_started";
    case EventType::kKernelWarm: return "kernel_warm";
    case EventType::kKernelRestarted: return "kernel_restarted";
    case EventType::kKernelBackoff: return "kernel_backoff";
    case EventType::kKernelTerminated: return "kernel_terminated";
    case EventType::kKernelRemoved: return "kernel_removed";
    case EventType::kKernelReady: return "kernel_ready";
    case EventType::kKernelHealthy: return "kernel_healthy";
    case EventType::kKernelUnhealthy: return "kernel_unhealthy";
    case EventType::kKernelIdle: return "kernel_idle";
    case EventType::kKernelWarned: return "kernel_warned";
    case EventType::kKernelCondition: return "kernel_condition";
    case EventType::kImagePull: return "image_pull";
    case EventType::kImageRemoved: return "image_removed";
    case EventType::kDeviceLayout: return "device_layout";
    case EventType::kDeviceDrained: return "device_drained";
    case EventType::kDeviceUndrained: return "device_undrained";
    case EventType::kDeviceHealthy: return "device_healthy";
    case EventType::kDeviceUnhealthy: return "device_unhealthy";
    case EventType::kAgentDrained: return "agent_drained";
    case EventType::kAgentUndrained: return "agent_undrained";
  }
  return "unknown";
}

std::optional<EventType> ParseEventType(std::string_view name) {
  for (const EventType type : kEventTypes)
    if (name == EventTypeName(type)) return type;
  return std::nullopt;
}

}  // namespace slotd
