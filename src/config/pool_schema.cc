#include "config/pool_schema.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace slotd {

namespace {

// A pool's name: lower-case letters, digits and '-', 1 to 32, starting with a letter or digit.
Check<std::string> PoolName() {
  return Rule<std::string>("Lower-case letters, digits and `-`, 1 to 32, not starting with `-`.",
                           [](const std::string& name, const Field&, const ConfigReader&) {
                             const bool ok = !name.empty() && name.size() <= 32 && name[0] != '-' &&
                                             std::all_of(name.begin(), name.end(), [](char c) {
                                               return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
                                             });
                             return ok ? std::string()
                                       : "\"" + name + "\" is not a pool name; use lower-case letters, digits and "
                                         "'-', like \"notebook-small\"";
                           });
}

// A cpu amount as a request's resources.cpu writes it: 2, 0.5 or "250m",
// kept as written ("2", "0.5", "250m"); the agent reads it as a request would.
ValueType<std::string> CpuAmountType() {
  ValueType<std::string> type;
  type.name = "number or string";
  type.quoted = false;
  type.read = [](const Field& field, ConfigReader& reader) -> std::optional<std::string> {
    if (const auto* whole = field.node->as_integer()) return std::to_string(whole->get());
    if (const auto* fraction = field.node->as_floating_point()) {
      char text[32];
      std::snprintf(text, sizeof text, "%.6g", fraction->get());
      return std::string(text);
    }
    if (const auto* millicores = field.node->as_string()) return millicores->get();
    reader.Report(field, "expected cores (2 exclusive, 0.5 shared) or millicores (\"250m\"), found " +
                             TypeName(*field.node));
    return std::nullopt;
  };
  type.text = [](const std::string& value) { return value; };
  return type;
}

// Device counts by slot: { "cuda.device" = 1 }.
ValueType<std::map<std::string, int64_t>> DeviceCountsType() {
  ValueType<std::map<std::string, int64_t>> type;
  type.name = "table of integers";
  type.read = [](const Field& field, ConfigReader& reader) -> std::optional<std::map<std::string, int64_t>> {
    const toml::table* table = field.node->as_table();
    if (table == nullptr) {
      reader.Report(field, "expected a table of device counts like { \"cuda.device\" = 1 }, found " +
                               TypeName(*field.node));
      return std::nullopt;
    }
    std::map<std::string, int64_t> counts;
    bool ok = true;
    for (auto&& [slot, node] : *table) {
      const auto* count = node.as_integer();
      if (count == nullptr || count->get() < 1 || count->get() > 1024) {
        reader.Report(Field{&node, field.path + "." + std::string(slot.str())}, "expected a device count, 1 to 1024");
        ok = false;
        continue;
      }
      counts[std::string(slot.str())] = count->get();
    }
    if (!ok) return std::nullopt;
    return counts;
  };
  type.text = [](const std::map<std::string, int64_t>& counts) {
    std::string text = "{";
    for (const auto& [slot, count] : counts) text += (text.size() > 1 ? ", " : " ") + slot + " = " + std::to_string(count);
    return text + (counts.empty() ? "}" : " }");
  };
  return type;
}

// A command: a non-empty array of strings, as a request's `command`.
ValueType<std::vector<std::string>> CommandType() {
  ValueType<std::vector<std::string>> type;
  type.name = "array of strings";
  type.read = [](const Field& field, ConfigReader& reader) -> std::optional<std::vector<std::string>> {
    std::optional<std::vector<Field>> items =
        ArrayItems(field, "strings like [\"sleep\", \"infinity\"]", "leave it out to run the image's command", reader);
    if (!items) return std::nullopt;
    std::vector<std::string> args;
    for (const Field& item : *items) {
      const auto* arg = item.node->as_string();
      if (arg == nullptr) {
        reader.Report(item, "expected a string, found " + TypeName(*item.node));
        return std::nullopt;
      }
      args.push_back(arg->get());
    }
    return args;
  };
  type.text = [](const std::vector<std::string>& args) {
    std::string text = "[";
    for (const std::string& arg : args) text += (text.size() > 1 ? ", \"" : "\"") + arg + "\"";
    return text + "]";
  };
  return type;
}

}  // namespace

KeyTable<PoolConfig> PoolKeys() {
  return {"pool", "a [[pool]] entry", {
    MemberKey("name", &PoolConfig::name, StringType(),
              "The pool's name, unique among the pools. Its kernels carry it in a label; `GET /v1/agent` counts "
              "them under it.",
              {PoolName()})
        .Required("give every pool a name, e.g. name = \"notebook-small\""),
    MemberKey("image", &PoolConfig::image, StringType(),
              "The image its kernels run. It must be on the node (or pullable under `[container] auto-pull`).",
              {NotEmpty()})
        .Required("give every pool its image, e.g. image = \"slotd-test/busybox:latest\""),
    MemberKey("command", &PoolConfig::command, CommandType(),
              "What its kernels run, as a request's `command`. A create is served from the pool only when it asks "
              "for this command (for none, when this is left out).")
        .DefaultDoc("none: the image's command"),
    MemberKey("cpu", &PoolConfig::cpu, CpuAmountType(),
              "Each kernel's cpu, as a request's `resources.cpu`: whole exclusive cores (`2`), or a share of the "
              "shared pool (`0.5`, `\"250m\"`)."),
    MemberKey("mem", &PoolConfig::mem, SizeType(),
              "Each kernel's memory, as a request's `resources.mem`; `0`: as a request without `mem`."),
    MemberKey("devices", &PoolConfig::devices, DeviceCountsType(),
              "Each kernel's devices by slot, as a request's device slots: `{ \"cuda.device\" = 1 }`."),
    MemberKey("count", &PoolConfig::count, IntegerType(),
              "How many started kernels the agent keeps ready in this pool. Each holds its resources as a running "
              "kernel does.",
              {IntegerRange(1, 1000)}),
  }};
}

}  // namespace slotd
