// slotd-config-doc: the generated parts of docs/config.md (the accepted
// sections and every key table), from the same tables slotd reads
// agent.toml with. Needs no agent and no host facts.
#include <iostream>
#include <sstream>
#include <string>

#include "common/atomic_file.h"
#include "common/version.h"
#include "config/config_doc.h"
#include "config/toml_reader.h"
#include "resources/agent_config.h"

namespace {

constexpr const char* kUsage =
    "usage: slotd-config-doc                print the generated parts of docs/config.md\n"
    "       slotd-config-doc --check FILE   exit 1 when FILE's generated parts are not what the tables say\n"
    "       slotd-config-doc --write FILE   rewrite FILE's generated parts from the tables\n"
    "       slotd-config-doc --man          print the agent.toml(5) manual page (roff) made from the tables\n"
    "The parts sit between <!-- generated:begin NAME --> and <!-- generated:end NAME --> lines;\n"
    "the key tables are declared in src/config/agent_schema.cc and in each device plugin's folder under src/resources/.\n";

int Print() {
  for (const auto& [name, text] : slotd::GeneratedDocParts(slotd::AgentSchema())) {
    std::cout << slotd::BeginMarker(name) << "\n\n" << text << "\n" << slotd::EndMarker(name) << "\n\n";
  }
  return 0;
}

int CheckOrWrite(const std::string& mode, const std::string& path) {
  slotd::Result<std::string> doc = slotd::ReadConfigFile(path);
  if (!doc.ok()) {
    std::cerr << "slotd-config-doc: " << doc.status().message() << "\n";
    return 2;
  }
  slotd::Result<std::string> fresh = slotd::RefreshGeneratedDocParts(*doc, slotd::AgentSchema());
  if (!fresh.ok()) {
    std::cerr << "slotd-config-doc: " << path << ": " << fresh.status().message() << "\n";
    return 2;
  }
  if (*fresh == *doc) return 0;
  if (mode == "--check") {
    std::istringstream have(*doc), want(*fresh);
    std::string have_line, want_line;
    int line = 0;
    while (true) {
      ++line;
      const bool more_have = static_cast<bool>(std::getline(have, have_line));
      const bool more_want = static_cast<bool>(std::getline(want, want_line));
      if (!more_have || !more_want || have_line != want_line) break;
    }
    std::cerr << path << ":" << line << ": the generated parts differ from the config tables\n"
              << "  in the file: " << have_line << "\n  generated:   " << want_line << "\n"
              << "Run: build/bin/slotd-config-doc --write " << path << "\n";
    return 1;
  }
  if (slotd::Status written = slotd::WriteFileAtomically(path, *fresh); !written.ok()) {
    std::cerr << "slotd-config-doc: " << written.message() << "\n";
    return 2;
  }
  std::cout << "slotd-config-doc: refreshed " << path << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (argc == 1) return Print();
  if (argc == 2 && (mode == "--help" || mode == "-h")) {
    std::cout << kUsage;
    return 0;
  }
  if (argc == 2 && mode == "--man") {
    std::cout << slotd::RenderManPage(slotd::AgentSchema(), slotd::kSlotdVersion);
    return 0;
  }
  if (argc == 3 && (mode == "--check" || mode == "--write")) return CheckOrWrite(mode, argv[2]);
  std::cerr << kUsage;
  return 2;
}
