#include "resources/agent_config.h"

#include "config/agent_schema.h"
#include "resources/device_kinds.h"

namespace slotd {

const Schema& AgentSchema() {
  static const Schema schema = [] {
    Schema s;
    AddCoreSections(s);
    for (const DeviceKind& kind : DeviceKinds()) s.Add(kind.section);
    return s;
  }();
  return schema;
}

Result<Config> LoadConfig(const std::string& path, const HostFacts& host) { return AgentSchema().Load(path, host); }

Result<Config> ParseConfig(const std::string& text, const std::string& path, const HostFacts& host) {
  return AgentSchema().Parse(text, path, host);
}

}  // namespace slotd
