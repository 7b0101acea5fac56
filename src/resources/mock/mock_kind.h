// The mock device kind: devices declared in [resource.mock], handed out whole
// through the same allocation, label, restore and claim paths as real
// accelerators, for tests and demos. Slot type "mock.device"; a kernel sees
// SLOTD_MOCK_DEVICES=mock0,mock2 and SLOTD_MOCK_DEVICE_COUNT=2.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "resources/device_kinds.h"

namespace slotd {

// One device of [resource.mock] devices.
struct MockDevice {
  std::string id;  // unique among the mock devices, e.g. "mock0"
  uint64_t memory_bytes = 0;
  int processing_units = 1;
  int numa_node = 0;

  bool operator==(const MockDevice&) const = default;
};

// [resource.mock].
struct MockConfig : DeviceSectionBase<MockConfig> {
  std::vector<MockDevice> devices;           // every declared device, in file order
  std::vector<std::string> allowed_devices;  // resolved: the allow-list, or every declared id
  bool allowed_devices_explicit = false;

  bool operator==(const MockConfig&) const = default;
};

// The kind, for DeviceKinds().
DeviceKind MockKind();

}  // namespace slotd
