#include "fleet/agent_document.h"

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

// Reads the documents' fields, remembering the first problem, which names the field.
class FieldReader {
 public:
  explicit FieldReader(const json& object) : object_(object) {}

  std::string Text(const char* name, bool required) {
    auto it = object_.find(name);
    if (it == object_.end() || it->is_null()) {
      if (required) Fail(std::string(name) + ": missing");
      return "";
    }
    if (!it->is_string() || it->get_ref<const std::string&>().size() > kMaxText) {
      Fail(std::string(name) + ": expected a string of at most 1024 bytes");
      return "";
    }
    return it->get<std::string>();
  }
  int64_t Count(const char* name) {
    auto it = object_.find(name);
    if (it == object_.end()) return 0;
    if (!it->is_number_integer()) Fail(std::string(name) + ": expected a whole number");
    return it->is_number_integer() ? it->get<int64_t>() : 0;
  }
  bool Flag(const char* name) {
    auto it = object_.find(name);
    if (it == object_.end()) return false;
    if (!it->is_boolean()) Fail(std::string(name) + ": expected true or false");
    return it->is_boolean() && it->get<bool>();
  }
  void Fail(std::string problem) {
    if (problem_.empty()) problem_ = std::move(problem);
  }
  const std::string& problem() const { return problem_; }

 private:
  const json& object_;
  std::string problem_;
};

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
          {"version", version},
          {"scaling_group", scaling_group},
          {"draining", draining},
          {"slots", slot_list},
          {"devices", device_list},
          {"kernels", kernels}};
}

Result<AgentDocument> AgentDocument::FromJson(std::string_view text) {
  const json root = json::parse(text, nullptr, false);
  if (!root.is_object()) return Status::InvalidArgument("not a JSON object");
  FieldReader read(root);
  AgentDocument doc;
  doc.id = read.Text("id", true);
  if (read.problem().empty() && !IsValidAgentId(doc.id))
    read.Fail("id: \"" + doc.id + "\" is not an agent id ([a-z0-9][a-z0-9._-]{0,63})");
  doc.node = read.Text("node", true);
  doc.address = read.Text("address", true);
  doc.version = read.Text("version", false);
  doc.scaling_group = read.Text("scaling_group", false);
  doc.draining = read.Flag("draining");
  doc.kernels = read.Count("kernels");
  if (auto slots = root.find("slots"); slots != root.end()) {
    if (!slots->is_object() || slots->size() > kMaxEntries) {
      read.Fail("slots: expected an object of slot types");
    } else {
      for (const auto& [name, use] : slots->items()) {
        if (!use.is_object() || name.size() > kMaxText) {
          read.Fail("slots." + name.substr(0, 64) + ": expected {capacity, used, free}");
          continue;
        }
        FieldReader slot(use);
        doc.slots[name] = {slot.Count("capacity"), slot.Count("used"), slot.Count("free")};
        if (!slot.problem().empty()) read.Fail("slots." + name + "." + slot.problem());
      }
    }
  }
  if (auto devices = root.find("devices"); devices != root.end()) {
    if (!devices->is_array() || devices->size() > kMaxEntries) {
      read.Fail("devices: expected an array");
    } else {
      for (const json& d : *devices) {
        if (!d.is_object()) {
          read.Fail("devices: expected objects");
          continue;
        }
        FieldReader device(d);
        doc.devices.push_back({device.Text("id", true), device.Text("slot", true), device.Text("health", false),
                               device.Flag("drained"), device.Flag("held")});
        if (!device.problem().empty()) read.Fail("devices[]." + device.problem());
      }
    }
  }
  if (!read.problem().empty()) return Status::InvalidArgument(read.problem());
  return doc;
}

}  // namespace slotd
