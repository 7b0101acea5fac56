#include "model/allocation.h"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace slotd {

bool Allocation::operator==(const Allocation& o) const {
  auto port_eq = [](const PortBinding& a, const PortBinding& b) {
    return a.container_port == b.container_port && a.host_port == b.host_port;
  };
  return cores == o.cores && shared_cpu_millis == o.shared_cpu_millis && mem_bytes == o.mem_bytes && devices == o.devices && numa_node == o.numa_node &&
         std::equal(ports.begin(), ports.end(), o.ports.begin(), o.ports.end(), port_eq);
}

nlohmann::json Allocation::ToJson() const {
  nlohmann::json ports_json = nlohmann::json::array();
  for (const auto& p : ports) ports_json.push_back({{"container", p.container_port}, {"host", p.host_port}});
  nlohmann::json devices_json = nlohmann::json::object();
  for (const auto& [plugin, ids] : devices) devices_json[plugin] = ids;
  nlohmann::json j = {{"cpu", cores}, {"mem", mem_bytes}, {"devices", devices_json}, {"ports", ports_json}};
  if (numa_node) j["numa_node"] = *numa_node;
  if (shared_cpu_millis > 0) j["cpu_shared"] = shared_cpu_millis;
  return j;
}


}  // namespace slotd
