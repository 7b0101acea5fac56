// toml++ behind a small surface: no toml++ exception leaves this file.
#include "config/toml_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <limits>
#include <system_error>

namespace slotd {

std::string OneLine(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || byte == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    } else {
      out += c;
    }
  }
  return out;
}

void ProblemLog::Report(const toml::source_region* where, const std::string& key_path, const std::string& what) {
  Problem problem;
  if (where != nullptr) {
    problem.line = where->begin.line;
    problem.column = where->begin.column;
  }
  problem.text = OneLine(key_path + ": " + what);
  problems_.push_back(std::move(problem));
}

std::string ProblemLog::Format(const std::string& file) const {
  std::vector<Problem> sorted = problems_;
  std::stable_sort(sorted.begin(), sorted.end(), [](const Problem& a, const Problem& b) {
    const uint32_t a_line = a.line == 0 ? std::numeric_limits<uint32_t>::max() : a.line;
    const uint32_t b_line = b.line == 0 ? std::numeric_limits<uint32_t>::max() : b.line;
    return a_line != b_line ? a_line < b_line : a.column < b.column;
  });
  std::string message;
  for (const Problem& problem : sorted) {
    if (!message.empty()) message += '\n';
    message += file;
    if (problem.line != 0) message += ":" + std::to_string(problem.line);
    message += ": " + problem.text;
  }
  return message;
}

std::string TypeName(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a floating-point number";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

std::string KeyPart(std::string_view key) {
  bool bare = !key.empty() && std::all_of(key.begin(), key.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '_';
  });
  return bare ? std::string(key) : "\"" + std::string(key) + "\"";
}

const toml::node* NodeAt(const toml::table& root, std::string_view path) {
  const toml::node* node = &root;
  while (!path.empty()) {
    const toml::table* table = node->as_table();
    if (table == nullptr) return nullptr;
    const size_t dot = path.find('.');
    node = table->get(path.substr(0, dot));
    if (node == nullptr) return nullptr;
    path = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
  }
  return node;
}

std::optional<Field> FindField(const toml::table* table, std::string_view table_path, std::string_view key) {
  if (table == nullptr) return std::nullopt;
  const toml::node* node = table->get(key);
  if (node == nullptr) return std::nullopt;
  return Field{node, std::string(table_path) + "." + std::string(key)};
}

Result<std::string> ReadConfigFile(const std::string& path) {
  auto failure = [&](int err) {
    return Status::InvalidArgument("cannot read config file " + path + ": " + std::generic_category().message(err));
  };
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return failure(errno);
  std::string text;
  char buffer[64 * 1024];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      close(fd);
      return failure(err);
    }
    text.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

Result<toml::table> ParseToml(const std::string& text, const std::string& path) {
  try {
    return toml::parse(std::string_view(text), std::string_view(path));
  } catch (const toml::parse_error& error) {
    const toml::source_position& at = error.source().begin;
    return Status::InvalidArgument(path + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) +
                                   ": invalid TOML: " + OneLine(error.description()));
  } catch (const std::exception& error) {
    return Status::Internal("cannot parse config file " + path + ": " + error.what());
  }
}

}  // namespace slotd
