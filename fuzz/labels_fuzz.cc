// Fuzz target: adopting a container from its labels after a restart
// (MigrateLabels, KernelFromContainer). Anyone who can reach the engine can
// make a container with any labels, so they are untrusted.
//
// Input: a JSON object. With a "labels" object in it (the form of
// tests/fixtures/labels-v1.json), those are the labels and "name" the
// container name; otherwise the object itself is the labels. A value that
// is not a string becomes its JSON text, so that the allocation and request
// labels can be written as plain JSON.
// Invariants: migration sets the current format and changes nothing else,
// and migrating again changes nothing; an adopted kernel's owner and
// allocation are what the labels say, and it survives the round trip
// through KernelLabels.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/kernel.h"
#include "model/label_codec.h"
#include "fuzz_check.h"

namespace {

using nlohmann::json;
namespace label = slotd::label;

slotd::ContainerInfo ContainerFrom(const json& input) {
  slotd::ContainerInfo info;
  info.id = "c1";
  info.name = "slotd-fuzz";
  const json* labels = &input;
  if (auto it = input.find("labels"); it != input.end() && it->is_object()) {
    labels = &*it;
    if (auto name = input.find("name"); name != input.end() && name->is_string()) info.name = name->get<std::string>();
  }
  for (const auto& item : labels->items()) {
    info.labels[item.key()] = item.value().is_string() ? item.value().get<std::string>() : item.value().dump();
  }
  return info;
}

void CheckMigration(const slotd::ContainerInfo& info) {
  auto migrated = slotd::MigrateLabels(info.labels, info.name);
  if (!migrated.ok()) {
    const auto code = migrated.status().code();
    FUZZ_CHECK(code == slotd::Status::Code::kInvalidArgument || code == slotd::Status::Code::kFailedPrecondition,
               migrated.status().message());
    FUZZ_CHECK(migrated.status().message().find(info.name) != std::string::npos,
               "the error does not name the container: " + migrated.status().message());
    return;
  }
  const std::string current = std::to_string(label::kCurrentFormat);
  FUZZ_CHECK(migrated->at(label::kFormat) == current, "format after migration: " + migrated->at(label::kFormat));
  for (const auto& entry : info.labels) {
    if (entry.first == label::kFormat) continue;
    auto it = migrated->find(entry.first);
    FUZZ_CHECK(it != migrated->end() && it->second == entry.second, "migration changed label " + entry.first);
  }
  FUZZ_CHECK(migrated->size() == info.labels.size() + (info.labels.count(label::kFormat) ? 0 : 1),
             "migration added labels");
  auto again = slotd::MigrateLabels(*migrated, info.name);
  FUZZ_CHECK(again.ok() && *again == *migrated, "migrating twice is not migrating once");
}

// Whether `allocation` holds what the label text `text` says, field by field.
void CheckAllocationIsTheLabel(const slotd::Allocation& allocation, const std::string& text) {
  const json label = json::parse(text);
  const json read = slotd::AllocationLabel(allocation);
  if (label.contains("cpu")) {
    std::vector<int64_t> cores;
    for (const json& c : label["cpu"]) cores.push_back(c.get<int64_t>());
    std::sort(cores.begin(), cores.end());
    FUZZ_CHECK(json(cores) == read["cpu"], "label cpu " + label["cpu"].dump() + " was read as " + read["cpu"].dump());
  }
  for (const char* key : {"mem", "numa_node"}) {
    if (label.contains(key))
      FUZZ_CHECK(label[key] == read[key],
                 std::string("label ") + key + " " + label[key].dump() + " was read as " + read.value(key, json()).dump());
  }
  if (label.contains("ports")) {
    FUZZ_CHECK(label["ports"].size() == read["ports"].size(), "label ports " + label["ports"].dump());
    for (size_t i = 0; i < read["ports"].size(); ++i) {
      for (const char* key : {"container", "host"})
        FUZZ_CHECK(label["ports"][i][key] == read["ports"][i][key],
                   "label ports " + label["ports"].dump() + " were read as " + read["ports"].dump());
    }
  }
  if (label.contains("devices")) {
    json devices = json::object();  // a plugin with no devices holds none: it need not be kept
    for (const auto& item : label["devices"].items()) {
      if (!item.value().empty()) devices[item.key()] = item.value();
    }
    FUZZ_CHECK(devices == read["devices"], "label devices " + label["devices"].dump() + " were read as " + read["devices"].dump());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const json input = json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (!input.is_object()) return 0;
  const slotd::ContainerInfo info = ContainerFrom(input);
  CheckMigration(info);

  auto kernel = slotd::KernelFromContainer(info);
  if (!kernel.ok()) {
    FUZZ_CHECK(!kernel.status().message().empty(), "a refusal without a message");
    return 0;
  }
  FUZZ_CHECK(kernel->agent_id == info.labels.at(label::kOwner), "owner " + kernel->agent_id);
  CheckAllocationIsTheLabel(kernel->allocation, info.labels.at(label::kAllocations));

  slotd::ContainerInfo again = info;
  again.labels = slotd::KernelLabels(*kernel);
  auto readopted = slotd::KernelFromContainer(again);
  FUZZ_CHECK(readopted.ok(), "the labels the agent writes are refused: " + readopted.status().message());
  FUZZ_CHECK(RequestLabel(readopted->request) == RequestLabel(kernel->request) && readopted->agent_id == kernel->agent_id &&
                 readopted->allocation == kernel->allocation,
             "the kernel changes through the labels the agent writes");
  return 0;
}
