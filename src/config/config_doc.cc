// Renders the schema's key tables as markdown and splices them into
// docs/config.md between their marker lines, leaving the prose alone.
#include "config/config_doc.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace slotd {
namespace {

constexpr std::string_view kBegin = "<!-- generated:begin ";
constexpr std::string_view kEnd = "<!-- generated:end ";

// A table cell: a '|' would end it early.
std::string Cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

// The part name after `marker` on `line`, or "" when the line is not that marker.
std::string MarkerName(const std::string& line, std::string_view marker) {
  if (line.rfind(marker, 0) != 0) return "";
  const size_t start = marker.size();
  const size_t end = line.find(' ', start);
  return line.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

}  // namespace

std::string BeginMarker(const std::string& name) {
  return std::string(kBegin) + name +
         " (made from the key tables; do not edit, refresh with: build/bin/slotd-config-doc --write "
         "docs/config.md) -->";
}

std::string EndMarker(const std::string& name) { return std::string(kEnd) + name + " -->"; }

std::string RenderKeyTable(const DocTable& table) {
  std::string out = "| key | type | default | meaning and constraints |\n| --- | --- | --- | --- |\n";
  for (const DocRow& row : table.rows) {
    out += "| `" + row.key + "` | " + Cell(row.type) + " | " + Cell(row.default_) + " | " + Cell(row.doc) + " |\n";
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> GeneratedDocParts(const Schema& schema) {
  std::vector<std::pair<std::string, std::string>> parts;
  const std::vector<std::string> names = schema.SectionNames();
  std::string sections = "The accepted sections are ";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) sections += i + 1 == names.size() ? " and " : ", ";
    sections += "`[" + names[i] + "]`";
  }
  parts.emplace_back("sections", sections + ".\n");
  for (const Section& section : schema.sections()) {
    for (const DocTable& table : section.docs()) parts.emplace_back(table.name, RenderKeyTable(table));
  }
  return parts;
}

Result<std::string> RefreshGeneratedDocParts(const std::string& doc, const Schema& schema) {
  const std::vector<std::pair<std::string, std::string>> parts = GeneratedDocParts(schema);
  std::set<std::string> done;
  std::istringstream lines(doc);
  std::string out;
  std::string open;  // the part whose markers we are between; "" outside
  int line_number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++line_number;
    const std::string where = "line " + std::to_string(line_number) + ": ";
    if (std::string name = MarkerName(line, kBegin); !name.empty()) {
      if (!open.empty()) return Status::InvalidArgument(where + "generated part " + name + " begins inside " + open);
      auto part = std::find_if(parts.begin(), parts.end(), [&](const auto& p) { return p.first == name; });
      if (part == parts.end()) return Status::InvalidArgument(where + "no generated part is called " + name);
      if (!done.insert(name).second) return Status::InvalidArgument(where + "generated part " + name + " is there twice");
      out += BeginMarker(name) + "\n\n" + part->second + "\n";
      open = name;
      continue;
    }
    if (std::string name = MarkerName(line, kEnd); !name.empty()) {
      if (name != open) return Status::InvalidArgument(where + "end of generated part " + name + " without its begin");
      out += EndMarker(name) + "\n";
      open.clear();
      continue;
    }
    if (open.empty()) out += line + "\n";
  }
  if (!open.empty()) return Status::InvalidArgument("generated part " + open + " has no end marker");
  for (const auto& part : parts) {
    if (!done.count(part.first)) {
      return Status::InvalidArgument("generated part " + part.first + " is missing; add the lines \"" +
                                     std::string(kBegin) + part.first + " -->\" and \"" + EndMarker(part.first) +
                                     "\" where it belongs");
    }
  }
  if (!doc.empty() && doc.back() != '\n') out.pop_back();
  return out;
}

}  // namespace slotd
