// The mock accelerator plugin ([resource.mock]): devices declared in the
// config, handed out whole through the same allocation, label, restore and
// claim paths as real accelerators. Slot type "mock.device". A kernel sees
// SLOTD_MOCK_DEVICES=mock0,mock2 and SLOTD_MOCK_DEVICE_COUNT=2.
#pragma once

#include "resources/device_plugin.h"

namespace slotd {

class MockPlugin : public DevicePlugin {
 public:
  explicit MockPlugin(const MockConfig& config);
  // Sets SLOTD_MOCK_DEVICES and SLOTD_MOCK_DEVICE_COUNT (empty and 0 without devices).
  void Apply(const Allocation& alloc, ContainerSpec& spec) const override;
};

}  // namespace slotd
