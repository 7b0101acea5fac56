#include "resources/plugin.h"

#include "resources/cpu_plugin.h"
#include "resources/cuda_plugin.h"
#include "resources/memory_plugin.h"
#include "resources/mock_plugin.h"
#include "resources/port_plugin.h"

namespace slotd {

Result<std::vector<std::unique_ptr<ResourcePlugin>>> MakePlugins(const Config& config, const HostFacts& host) {
  std::vector<std::unique_ptr<ResourcePlugin>> plugins;
  if (config.resource.cuda) {
    auto nvml = LoadNvml(config.resource.cuda->nvml_library);
    if (!nvml.ok()) return nvml.status().WithPrefix("resource.cuda");
    auto cuda = CudaPlugin::Create(*config.resource.cuda, std::move(*nvml));
    if (!cuda.ok()) return cuda.status();
    plugins.push_back(std::move(*cuda));
  }
  if (config.resource.mock) plugins.push_back(std::make_unique<MockPlugin>(*config.resource.mock));
  plugins.push_back(std::make_unique<CpuPlugin>(config.resource.allowed_cores, host.core_numa_node));
  plugins.push_back(std::make_unique<MemoryPlugin>(config.resource.memory_size));
  plugins.push_back(std::make_unique<PortPlugin>(config.container.port_range_start, config.container.port_range_end));
  return plugins;
}

}  // namespace slotd
