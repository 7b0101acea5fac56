// The kinds of event the agent announces on GET /v1/events (docs/api.md
// "Events"), each with its one name on the wire.
#pragma once

#include <optional>
#include <string_view>

namespace slotd {

enum class EventType {
  // A kernel's lifecycle (KernelTable's transitions).
  kKernelCreated,
  kKernelStarted,
  kKernelWarm,
  kKernelRestarted,
  kKernelBackoff,
  kKernelTerminated,
  kKernelRemoved,
  // What the agent learns of a running kernel.
  kKernelReady,
  kKernelHealthy,
  kKernelUnhealthy,
  kKernelIdle,
  kKernelWarned,
  kKernelCondition,
  // Images.
  kImagePull,
  kImageRemoved,
  // Devices and the agent's drain.
  kDeviceLayout,
  kDeviceDrained,
  kDeviceUndrained,
  kDeviceHealthy,
  kDeviceUnhealthy,
  kAgentDrained,
  kAgentUndrained,
};

// Every EventType, in declaration order.
inline constexpr EventType kEventTypes[] = {
    EventType::kKernelCreated,  EventType::kKernelStarted,   EventType::kKernelWarm,
    EventType::kKernelRestarted, EventType::kKernelBackoff,  EventType::kKernelTerminated,
    EventType::kKernelRemoved,  EventType::kKernelReady,     EventType::kKernelHealthy,
    EventType::kKernelUnhealthy, EventType::kKernelIdle,     EventType::kKernelWarned,
    EventType::kKernelCondition, EventType::kImagePull,      EventType::kImageRemoved,
    EventType::kDeviceLayout,   EventType::kDeviceDrained,   EventType::kDeviceUndrained,
    EventType::kDeviceHealthy,  EventType::kDeviceUnhealthy, EventType::kAgentDrained,
    EventType::kAgentUndrained,
};

// Its name on the wire ("kernel_started"): the event's "type" field and
// its server-sent event name.
const char* EventTypeName(EventType type);
// The EventType named `name`; nullopt for a name that is none.
std::optional<EventType> ParseEventType(std::string_view name);

}  // namespace slotd
