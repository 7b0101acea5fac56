#include "resources/plugin.h"

#include "resources/cpu_plugin.h"
#include "resources/device_kinds.h"
#include "resources/memory_plugin.h"
#include "resources/port_plugin.h"

namespace slotd {

Result<std::vector<std::unique_ptr<ResourcePlugin>>> MakePlugins(const Config& config, const HostFacts& host) {
  std::vector<std::unique_ptr<ResourcePlugin>> plugins;
  for (const DeviceKind& kind : DeviceKinds()) {
    auto section = config.resource.devices.by_kind.find(kind.name);
    if (section == config.resource.devices.by_kind.end()) continue;
    auto plugin = kind.make_plugin(*section->second);
    if (!plugin.ok()) return plugin.status();
    plugins.push_back(std::move(*plugin));
  }
  plugins.push_back(std::make_unique<CpuPlugin>(config.resource.allowed_cores, host.core_numa_node,
                                                config.resource.shared_overcommit));
  plugins.push_back(std::make_unique<MemoryPlugin>(config.resource.memory_size));
  plugins.push_back(std::make_unique<PortPlugin>(config.container.port_range_start, config.container.port_range_end));
  return plugins;
}

}  // namespace slotd
