// The mock accelerator plugin (see mock_kind.h): the declared devices on the
// shared DevicePlugin.
#pragma once

#include "resources/device_plugin.h"
#include "resources/mock/mock_kind.h"

namespace slotd {

class MockPlugin : public DevicePlugin {
 public:
  explicit MockPlugin(const MockConfig& config);
  // Sets SLOTD_MOCK_DEVICES and SLOTD_MOCK_DEVICE_COUNT (empty and 0 without devices).
  void Apply(const Allocation& alloc, ContainerSpec& spec) const override;
};

}  // namespace slotd
