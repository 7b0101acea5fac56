#include "resources/allocation.h"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace slotd {

bool Allocation::operator==(const Allocation& o) const {
  auto port_eq = [](const PortBinding& a, const PortBinding& b) {
    return a.container_port == b.container_port && a.host_port == b.host_port;
  };
  return cores == o.cores && mem_bytes == o.mem_bytes && devices == o.devices && numa_node == o.numa_node &&
         std::equal(ports.begin(), ports.end(), o.ports.begin(), o.ports.end(), port_eq);
}

nlohmann::json Allocation::ToJson() const {
  nlohmann::json ports_json = nlohmann::json::array();
  for (const auto& p : ports) ports_json.push_back({{"container", p.container_port}, {"host", p.host_port}});
  nlohmann::json devices_json = nlohmann::json::object();
  for (const auto& [plugin, ids] : devices) devices_json[plugin] = ids;
  nlohmann::json j = {{"cpu", cores}, {"mem", mem_bytes}, {"devices", devices_json}, {"ports", ports_json}};
  if (numa_node) j["numa_node"] = *numa_node;
  return j;
}

namespace {

// Whether `v` is a whole number from 0 to INT_MAX: one that an int holds as
// written, not wrapped.
bool IsNonNegativeInt(const nlohmann::json& v) {
  return v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= std::numeric_limits<int>::max();
}

}  // namespace

Result<Allocation> Allocation::FromJson(const nlohmann::json& j) {
  auto bad = [](const std::string& field, const std::string& want) {
    return Status::InvalidArgument("allocations." + field + ": expected " + want);
  };
  if (!j.is_object()) return bad("", "a JSON object");
  Allocation a;
  if (j.contains("cpu")) {
    if (!j["cpu"].is_array()) return bad("cpu", "an array of core numbers");
    for (const auto& c : j["cpu"]) {
      if (!IsNonNegativeInt(c)) return bad("cpu", "an array of core numbers");
      a.cores.push_back(c.get<int>());
    }
    std::sort(a.cores.begin(), a.cores.end());
  }
  if (j.contains("mem")) {
    if (!j["mem"].is_number_integer() || j["mem"].get<int64_t>() < 0) return bad("mem", "a number of bytes");
    a.mem_bytes = j["mem"].get<uint64_t>();
  }
  if (j.contains("devices")) {
    if (!j["devices"].is_object()) return bad("devices", "an object of plugin -> device ids");
    for (const auto& [plugin, ids] : j["devices"].items()) {
      if (!ids.is_array()) return bad("devices." + plugin, "an array of device ids");
      for (const auto& id : ids) {
        if (!id.is_string()) return bad("devices." + plugin, "an array of device ids");
        a.devices[plugin].push_back(id.get<std::string>());
      }
    }
  }
  if (j.contains("ports")) {
    if (!j["ports"].is_array()) return bad("ports", "an array of {container, host}");
    for (const auto& p : j["ports"]) {
      if (!p.is_object() || !p.contains("container") || !p.contains("host") || !IsNonNegativeInt(p["container"]) ||
          !IsNonNegativeInt(p["host"]))
        return bad("ports", "an array of {container, host}");
      a.ports.push_back({p["container"].get<int>(), p["host"].get<int>()});
    }
  }
  if (j.contains("numa_node")) {
    if (!IsNonNegativeInt(j["numa_node"])) return bad("numa_node", "a node number");
    a.numa_node = j["numa_node"].get<int>();
  }
  return a;
}

}  // namespace slotd
