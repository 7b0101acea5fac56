#include "fleet/agent_document.h"

#include <optional>

#include "common/json_reader.h"
#include "config/config.h"

namespace slotd {

using json = nlohmann::json;

namespace {

constexpr size_t kMaxText = 1024;       // any one string of a document
constexpr size_t kMaxEntries = 100000;  // slots or devices of one document

int64_t CountOf(const json& object, const char* name) {
  auto it = object.find(name);
  return it != object.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

// A string of the document: at most kMaxText bytes.
std::string Text(const JsonField& field) {
  std::string text = field.String();
  if (text.size() > kMaxText) {
    field.Problem("is longer than " + std::to_string(kMaxText) + " bytes");
    return "";
  }
  return text;
}

// A string that may be absent or null (an older agent's document): "" then.
std::string OptionalText(const JsonField& field) { return field.IsNull() ? "" : Text(field); }

// The elements or members of `field`, unless there are more than kMaxEntries.
bool WithinEntries(const JsonField& field) {
  if (field.raw().size() <= kMaxEntries) return true;
  field.Problem("has more than " + std::to_string(kMaxEntries) + " entries");
  return false;
}

}  // namespace

void AgentDocument::SetResources(const json& described) {
  slots.clear();
  devices.clear();
  if (!described.is_object()) return;
  for (const auto& [slot, use] : described.items()) {
    if (!use.is_object()) continue;
    slots[slot] = {CountOf(use, "capacity"), CountOf(use, "used"), CountOf(use, "free")};
    auto listed = use.find("devices");
    if (listed == use.end() || !listed->is_array()) continue;
    for (const json& d : *listed) {
      if (!d.is_object()) continue;
      devices.push_back({d.value("id", std::string()), slot, d.value("health", std::string("healthy")),
                         d.value("drained", false), d.contains("held_by") && !d["held_by"].is_null()});
    }
  }
}

json AgentDocument::ToJson() const {
  json slot_list = json::object();
  for (const auto& [name, use] : slots)
    slot_list[name] = {{"capacity", use.capacity}, {"used", use.used}, {"free", use.free}};
  json device_list = json::array();
  for (const RegisteredDevice& d : devices)
    device_list.push_back(
        {{"id", d.id}, {"slot", d.slot}, {"health", d.health}, {"drained", d.drained}, {"held", d.held}});
  return {{"id", id},
          {"node", node},
          {"address", address},
          {"scheme", scheme},
          {"version", version},
          {"scaling_group", scaling_group},
          {"draining", draining},
          {"drain_deadline", drain_deadline ? json(*drain_deadline) : json(nullptr)},
          {"slots", slot_list},
          {"devices", device_list},
          {"kernels", kernels},
          {"warm", warm}};
}

Result<AgentDocument> AgentDocument::FromJson(std::string_view text) {
  std::optional<json> parsed = ParseJsonWithin(text);
  if (!parsed || !parsed->is_object()) return Status::InvalidArgument("not a JSON object");
  const JsonReader reader(std::move(*parsed));
  const JsonField root = reader.Root();
  AgentDocument doc;
  doc.id = Text(root["id"]);
  if (!IsValidAgentId(doc.id))
    root["id"].Problem("\"" + doc.id + "\" is not an agent id ([a-z0-9][a-z0-9._-]{0,63})");
  doc.node = Text(root["node"]);
  doc.address = Text(root["address"]);
  if (const JsonField scheme = root.Optional("scheme"); !scheme.IsNull()) {
    doc.scheme = Text(scheme);
    if (doc.scheme != "http" && doc.scheme != "https")
      scheme.Problem("is \"" + doc.scheme + "\", expected \"http\" or \"https\"");
  }
  doc.version = OptionalText(root.Optional("version"));
  doc.scaling_group = OptionalText(root.Optional("scaling_group"));
  doc.draining = root.Optional("draining").Bool();
  if (!root.Optional("drain_deadline").IsNull()) doc.drain_deadline = root["drain_deadline"].Int();
  doc.kernels = root.Optional("kernels").Int();
  doc.warm = root.Optional("warm").Int();
  if (const JsonField slots = root.Optional("slots"); WithinEntries(slots)) {
    for (const auto& [name, use] : slots.Members()) {
      if (name.size() > kMaxText) use.Problem("has a name longer than " + std::to_string(kMaxText) + " bytes");
      doc.slots[name] = {use.Optional("capacity").Int(), use.Optional("used").Int(), use.Optional("free").Int()};
    }
  }
  if (const JsonField devices = root.Optional("devices"); WithinEntries(devices)) {
    for (const JsonField& d : devices.Elements())
      doc.devices.push_back({Text(d["id"]), Text(d["slot"]), OptionalText(d.Optional("health")),
                             d.Optional("drained").Bool(), d.Optional("held").Bool()});
  }
  if (!reader.problem().empty()) return Status::InvalidArgument(reader.problem());
  return doc;
}

}  // namespace slotd
