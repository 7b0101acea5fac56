#include "resources/mock/mock_plugin.h"

namespace slotd {
namespace {

std::vector<Device> MockDevices(const MockConfig& config) {
  std::vector<Device> devices;
  for (const auto& d : config.devices)
    devices.push_back({d.id, d.numa_node, {{"memory", d.memory_bytes}, {"processing_units", d.processing_units}}, ""});
  return devices;
}

}  // namespace

MockPlugin::MockPlugin(const MockConfig& config) : DevicePlugin("mock", MockDevices(config), config.allowed_devices) {}

void MockPlugin::Apply(const Allocation& alloc, ContainerSpec& spec) const {
  std::vector<std::string> ids = HeldIds(alloc);
  std::string list;
  for (const auto& id : ids) list += (list.empty() ? "" : ",") + id;
  spec.env.push_back("SLOTD_MOCK_DEVICES=" + list);
  spec.env.push_back("SLOTD_MOCK_DEVICE_COUNT=" + std::to_string(ids.size()));
}

}  // namespace slotd
