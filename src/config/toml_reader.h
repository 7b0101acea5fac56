// The TOML side of agent.toml: reading the file, parsing it with toml++,
// finding sections and keys in the parsed tree, naming TOML types in
// messages, and collecting problems with their source positions so that
// they can be reported in file order. Knows nothing of the agent's keys.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "common/status.h"

namespace slotd {

// A value present in the file: its node and its full dotted path
// ("container.port-range", "resource.mock.devices[1].id").
struct Field {
  const toml::node* node;
  std::string path;
};

// The problems found in one file, each "<key path>: <what is wrong>" at a
// source position. Problems without a position come after the others.
class ProblemLog {
 public:
  // Records a problem at `where`, or without a line when `where` is null.
  void Report(const toml::source_region* where, const std::string& key_path, const std::string& what);
  void Report(const Field& field, const std::string& what) { Report(&field.node->source(), field.path, what); }

  bool empty() const { return problems_.empty(); }

  // Every problem, one per line, "<file>:<line>: <text>" (or "<file>: <text>"
  // without a line), sorted by position; equal positions keep report order.
  std::string Format(const std::string& file) const;

 private:
  struct Problem {
    uint32_t line = 0;  // 0: no line of its own (a missing key, a default that cannot be resolved)
    uint32_t column = 0;
    std::string text;
  };
  std::vector<Problem> problems_;
};

// `text` on one line: line breaks, tabs and the other control characters
// written as \n, \r, \t and \xNN, so that a problem that quotes the file
// (a key or string with a line break, toml++'s description of a syntax
// error) cannot spill onto a second line.
std::string OneLine(std::string_view text);

// "a table", "an integer", ...: the TOML type of `node` with its article.
std::string TypeName(const toml::node& node);

// A key as it appears in a dotted path: bare when TOML allows it, else quoted.
std::string KeyPart(std::string_view key);

// The node at dotted `path` ("resource.cuda") under `root`, or null when any
// part of it is absent or a part before the last is not a table.
const toml::node* NodeAt(const toml::table& root, std::string_view path);

// The key `key` of `table` (whose path is `table_path`), or nullopt when
// `table` is null or has no such key.
std::optional<Field> FindField(const toml::table* table, std::string_view table_path, std::string_view key);

// The whole of `path`, or "cannot read config file <path>: <reason>".
Result<std::string> ReadConfigFile(const std::string& path);

// Parses `text`; a syntax error is "<path>:<line>:<column>: invalid TOML: <what>".
Result<toml::table> ParseToml(const std::string& text, const std::string& path);

}  // namespace slotd
