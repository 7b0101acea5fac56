#include "resources/plugin.h"

#include "resources/cpu_plugin.h"
#include "resources/memory_plugin.h"
#include "resources/port_plugin.h"

namespace slotd {

std::vector<std::unique_ptr<ResourcePlugin>> MakePlugins(const Config& config) {
  std::vector<std::unique_ptr<ResourcePlugin>> plugins;
  plugins.push_back(std::make_unique<CpuPlugin>(config.resource.allowed_cores));
  plugins.push_back(std::make_unique<MemoryPlugin>(config.resource.memory_size));
  plugins.push_back(std::make_unique<PortPlugin>(config.container.port_range_start, config.container.port_range_end));
  return plugins;
}

}  // namespace slotd
