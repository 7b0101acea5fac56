// The generated parts of docs/config.md: the list of sections and the key
// table of each, rendered from the agent's schema. Each part sits between
// two marker lines that name it,
//   <!-- generated:begin agent ... -->
//   <!-- generated:end agent -->
// and the prose around them stays hand-written. slotd-config-doc
// (config_doc_main.cc) prints, checks and rewrites them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "config/schema.h"

namespace slotd {

// The marker lines around part `name`; the begin line says how to refresh it.
std::string BeginMarker(const std::string& name);
std::string EndMarker(const std::string& name);

// A markdown table of `table`'s keys: key, type, default, meaning.
std::string RenderKeyTable(const DocTable& table);

// Every generated part of the docs, in order, as {name, markdown}: "sections"
// (the sentence listing the accepted sections), then one key table per
// section and per table nested in a value ("resource.mock.devices").
std::vector<std::pair<std::string, std::string>> GeneratedDocParts(const Schema& schema);

// The agent.toml(5) manual page, in roff (man(7) macros), made from the
// same key tables as docs/config.md: one subsection per section and nested
// table, one entry per key with its type, default and meaning. `version`
// goes into the page's footer.
std::string RenderManPage(const Schema& schema, const std::string& version);

// `doc` with each pair of markers rewritten and the text between them
// replaced by a blank line, its part and a blank line.
// InvalidArgument naming the line when a marker is unpaired, names an
// unknown part or a part twice, or when a part has no markers in `doc`.
Result<std::string> RefreshGeneratedDocParts(const std::string& doc, const Schema& schema);

}  // namespace slotd
