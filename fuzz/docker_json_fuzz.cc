// Fuzz target: the Docker engine's JSON answers as the agent parses them
// (docker_answers.h). Byte 0 chooses the answer, the rest is its body:
//   0 (mod 4) the container list, 1 an inspect, 2 a stats reading,
//   3 an event stream (lines, as GET /events sends them).
// Invariants: no parser throws or crashes; a list has one entry per element
// of the array; "running" follows the state; a container read from the
// engine can be given to the label restore (KernelFromContainer) safely.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "model/kernel.h"
#include "model/label_codec.h"
#include "engine/docker/docker_answers.h"
#include "fuzz_check.h"

namespace {

using slotd::ContainerInfo;
using slotd::Status;

void CheckError(const Status& status, const char* answer) {
  FUZZ_CHECK(!status.message().empty(), std::string(answer) + ": an error without a message");
  FUZZ_CHECK(status.message().rfind(answer, 0) == 0,
             std::string(answer) + ": the error does not name the call: " + status.message());
}

void ParseList(const std::string& body) {
  auto list = slotd::ParseContainerList(body, "list containers");
  if (!list.ok()) {
    FUZZ_CHECK(list.status().code() == Status::Code::kInternal, list.status().message());
    CheckError(list.status(), "list containers");
    return;
  }
  const nlohmann::json parsed = nlohmann::json::parse(body, nullptr, false);
  FUZZ_CHECK(parsed.is_array() && parsed.size() == list->size(),
             "the list has " + std::to_string(list->size()) + " containers for a body of " +
                 std::to_string(parsed.size()) + " elements");
  for (const ContainerInfo& info : *list) {
    FUZZ_CHECK(info.running == (info.state == "running"), "state \"" + info.state + "\" and running disagree");
    (void)slotd::KernelFromContainer(info);
  }
}

void ParseInspect(const std::string& body) {
  auto info = slotd::ParseContainerInspect(body, "inspect container c1");
  if (!info.ok()) {
    FUZZ_CHECK(info.status().code() == Status::Code::kInternal, info.status().message());
    CheckError(info.status(), "inspect container c1");
    return;
  }
  (void)slotd::KernelFromContainer(*info);
}

void ParseStats(const std::string& body) {
  auto stats = slotd::ParseContainerStats(body, "stats of container c1");
  if (!stats.ok()) {
    FUZZ_CHECK(stats.status().code() == Status::Code::kInternal ||
                   stats.status().code() == Status::Code::kFailedPrecondition,
               stats.status().message());
    CheckError(stats.status(), "stats of container c1");
  }
}

// As DockerEngine::StreamEvents reads the stream: line by line, blank lines skipped.
void ParseEvents(std::string_view stream) {
  while (!stream.empty()) {
    const size_t nl = stream.find('\n');
    const std::string_view line = stream.substr(0, nl);
    if (line.find_first_not_of(" \r\t") != std::string_view::npos) {
      auto event = slotd::ParseEngineEvent(line);
      if (event) {
        const nlohmann::json parsed = nlohmann::json::parse(line, nullptr, false);
        FUZZ_CHECK(parsed.is_object(), "an event from a line that is not a JSON object");
      }
    }
    if (nl == std::string_view::npos) break;
    stream.remove_prefix(nl + 1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: ParseList(body); break;
    case 1: ParseInspect(body); break;
    case 2: ParseStats(body); break;
    case 3: ParseEvents(body); break;
  }
  return 0;
}
