// The device kinds this build knows: each accelerator plugin declares, in
// one DeviceKind, every name the rest of slotd would otherwise have to know
// (its section, its slot, its environment variables) and how to build it.
// The request parser, the agent core, `slotd check`, stats and slotctl go
// through this list and name no plugin.
//
// Adding an accelerator is one folder under src/resources/ (its plugin, its
// section's key table, a function returning its DeviceKind) and one line in
// DeviceKinds() (device_kinds.cc).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "config/config.h"
#include "config/schema.h"
#include "resources/plugin.h"

namespace slotd {

// What `slotd check` learns of the devices an agent would own through one kind.
struct CheckedDevices {
  std::vector<std::string> ids;  // the device ids it would own, as allocations name them
  // It would take every device of the node (no allow-list), but they could
  // not be listed here: it clashes with any device of the same kind elsewhere.
  bool every_device = false;
  std::string note;  // what could not be checked here and why; empty when all was
};

struct DeviceKind {
  // The kind's name: its section is [resource.<name>], its slot type
  // "<name>.device", and allocations, labels and claims name its devices
  // under it.
  std::string name;
  // The environment variables its plugin sets in a kernel, each with the
  // value that selects none of its devices. A request may not set them, and
  // every kernel of every agent gets them (its plugin's values, else these),
  // so that an image's own values cannot reach a device it was not given.
  std::map<std::string, std::string> variables_selecting_none;
  // The key table of its section, bound into Config::resource.devices
  // (DeviceSectionFor).
  Section section;
  // Builds its plugin from its section (present in the config). Fails with a
  // message that names the section and says what to do.
  std::function<Result<std::unique_ptr<ResourcePlugin>>(const DeviceSection&)> make_plugin;
  // For `slotd check`: the devices an agent with this section would own on
  // this node. Fails like make_plugin when the section names a device the
  // node does not have.
  std::function<Result<CheckedDevices>(const DeviceSection&)> check_devices;
};

// Every kind, in the order their sections are documented and their plugins
// allocate. Built on first use, then shared.
const std::vector<DeviceKind>& DeviceKinds();

// Every kind's variables_selecting_none, merged.
const std::map<std::string, std::string>& DeviceVariablesSelectingNone();

}  // namespace slotd
