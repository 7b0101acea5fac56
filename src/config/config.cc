// LoadConfig and ParseConfig: the file through toml_reader, then through
// the agent's schema (agent_schema.cc). No exception leaves this file.
#include "config/config.h"

#include "config/agent_schema.h"
#include "config/toml_reader.h"

namespace slotd {

Result<Config> LoadConfig(const std::string& path, const HostFacts& host) {
  Result<std::string> text = ReadConfigFile(path);
  if (!text.ok()) return text.status();
  return ParseConfig(*text, path, host);
}

Result<Config> ParseConfig(const std::string& text, const std::string& path, const HostFacts& host) {
  Result<toml::table> root = ParseToml(text, path);
  if (!root.ok()) return root.status();
  try {
    return AgentSchema().Read(*root, path, host);
  } catch (const std::exception& error) {
    return Status::Internal("cannot parse config file " + path + ": " + error.what());
  }
}

}  // namespace slotd
