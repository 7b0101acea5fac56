#include "resources/mock/mock_kind.h"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <limits>
#include <optional>

#include "resources/mock/mock_plugin.h"

namespace slotd {
namespace {

constexpr char kName[] = "mock";
constexpr int kMaxNumaNodes = 1024;  // Linux's largest MAX_NUMNODES; node numbers are below it

// True for [A-Za-z0-9][A-Za-z0-9._-]{0,63}.
bool IsValidMockDeviceId(const std::string& id) {
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  if (id.empty() || id.size() > 64 || !alnum(id[0])) return false;
  return std::all_of(id.begin(), id.end(), [&](char c) { return alnum(c) || c == '.' || c == '_' || c == '-'; });
}

Check<std::string> MockDeviceIdPattern() {
  return Rule<std::string>(
      "1 to 64 characters of `A-Z`, `a-z`, `0-9`, `.`, `_`, `-`, starting with a letter or digit: "
      "`[A-Za-z0-9][A-Za-z0-9._-]{0,63}`.",
      [](const std::string& id, const Field&, const ConfigReader&) -> std::string {
        if (IsValidMockDeviceId(id)) return "";
        return "\"" + id +
               "\" is not a valid device id; use 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-', starting "
               "with a letter or digit";
      });
}


// No two mock devices share an id; a later one names the first.
Check<std::vector<MockDevice>> UniqueDeviceIds() {
  return Check<std::vector<MockDevice>>{
      "", [](const std::vector<MockDevice>& devices, const Field& field, ConfigReader& reader) {
        bool unique = true;
        for (size_t i = 0; i < devices.size(); ++i) {
          if (devices[i].id.empty()) continue;  // no usable id: reported already
          auto first = std::find_if(devices.begin(), devices.begin() + static_cast<std::ptrdiff_t>(i),
                                    [&](const MockDevice& other) { return other.id == devices[i].id; });
          if (first == devices.begin() + static_cast<std::ptrdiff_t>(i)) continue;
          const toml::node* id = field.node->as_array()->get(i)->as_table()->get("id");
          reader.Report(Field{id, field.path + "[" + std::to_string(i) + "].id"},
                        "\"" + devices[i].id + "\" is also the id of resource.mock.devices[" +
                            std::to_string(first - devices.begin()) + "]; give each device its own id");
          unique = false;
        }
        return unique;
      }};
}

// The string ids of resource.mock.devices in the file, or nullopt when some
// device has none (or there are no devices), so an allow-list cannot be judged.
std::optional<std::vector<std::string>> DeclaredMockIds(const toml::table& root) {
  const toml::node* node = NodeAt(root, "resource.mock.devices");
  const toml::array* devices = node != nullptr ? node->as_array() : nullptr;
  if (devices == nullptr || devices->empty()) return std::nullopt;
  std::vector<std::string> ids;
  for (const toml::node& device : *devices) {
    const toml::table* table = device.as_table();
    const auto* id = table != nullptr ? table->get_as<std::string>("id") : nullptr;
    if (id == nullptr) return std::nullopt;
    ids.push_back(id->get());
  }
  return ids;
}

Check<std::string> DeclaredMockDevice() {
  return Rule<std::string>("", [](const std::string& id, const Field&, const ConfigReader& reader) -> std::string {
    const std::optional<std::vector<std::string>> declared = DeclaredMockIds(reader.root());
    if (!declared || std::find(declared->begin(), declared->end(), id) != declared->end()) return "";
    return "\"" + id + "\" is not a declared device; list ids from resource.mock.devices: " + JoinList(*declared);
  });
}


KeyTable<MockDevice> MockDeviceKeys() {
  return {"resource.mock.devices", "a mock device", {
    MemberKey("id", &MockDevice::id, StringType(),
              "The device's name in allocations and `slotctl`. Unique among the devices.", {MockDeviceIdPattern()})
        .Required("give every device an id, e.g. id = \"mock0\""),
    MemberKey("memory", &MockDevice::memory_bytes, SizeType(), "The device's memory, as reported by the API.",
              {AboveZero()})
        .Required("give every device its memory, e.g. memory = \"16g\""),
    MemberKey("processing-units", &MockDevice::processing_units, IntegerType(),
              "The device's processing units (streaming multiprocessors, for a GPU), as reported by the API.",
              {IntegerRange(1, std::numeric_limits<int>::max())}),
    MemberKey("numa-node", &MockDevice::numa_node, IntegerType(),
              "The NUMA node the device is attached to; a kernel gets cores of the same node when it can.",
              {IntegerRange(0, kMaxNumaNodes - 1)}),
  }};
}

KeyTable<MockConfig> MockKeys() {
  return {"resource.mock", "[resource.mock]", {
    MemberKey("devices", &MockConfig::devices,
              TableListType(MockDeviceKeys(), "device tables like [{ id = \"mock0\", memory = \"16g\" }]",
                            "declare at least one device, or remove [resource.mock] to turn the mock plugin off",
                            "{ id = \"mock0\", memory = \"16g\" }"),
              "Every mock device of the node, declared with the keys below. Write it as an array of inline tables "
              "(`devices = [{ id = \"mock0\", memory = \"16g\" }]`) or as `[[resource.mock.devices]]` tables.",
              {UniqueDeviceIds()})
        .Required("declare the mock devices, e.g. devices = [{ id = \"mock0\", memory = \"16g\" }]"),
    StoredKey<MockConfig, std::vector<std::string>>(
        "allowed-devices",
        ListType(StringType(), {DeclaredMockDevice()}, "device ids like [\"mock0\"]",
                 "list at least one device, or leave allowed-devices out to use every declared device",
                 "list each device once"),
        "Allow-list: the ids of the devices this agent may give to kernels. Each must be the `id` of a device in "
        "`devices`; the error lists the declared ids. Agents on one node need lists that do not share a device.",
        {},
        [](MockConfig& mock, std::vector<std::string>&& ids) {
          mock.allowed_devices = std::move(ids);
          mock.allowed_devices_explicit = true;
        },
        nullptr)
        .DefaultsTo("every declared device",
                    [](MockConfig& mock, ConfigReader&) {
                      for (const MockDevice& device : mock.devices) mock.allowed_devices.push_back(device.id);
                    }),
  }};
}

Result<std::unique_ptr<ResourcePlugin>> MakeMockPlugin(const DeviceSection& section) {
  return std::unique_ptr<ResourcePlugin>(std::make_unique<MockPlugin>(static_cast<const MockConfig&>(section)));
}

// The declared devices are the node's, so the allow-list is what it owns.
Result<CheckedDevices> CheckMockDevices(const DeviceSection& section) {
  return CheckedDevices{static_cast<const MockConfig&>(section).allowed_devices, false, ""};
}

}  // namespace

DeviceKind MockKind() {
  return DeviceKind{
      kName,
      {{"SLOTD_MOCK_DEVICES", ""}, {"SLOTD_MOCK_DEVICE_COUNT", "0"}},
      DeviceSectionFor(kName, MockKeys()),
      MakeMockPlugin,
      CheckMockDevices,
  };
}

}  // namespace slotd
