// Fuzz target: the body of POST /kernels (ParseCreateRequest), as the API
// receives it: any bytes, parsed as JSON first.
// Invariants for a request that is accepted: its ids are valid; its label
// form (RequestLabel) serialises, and reads back (RequestFromLabel) to a
// request with the same label form; and a kernel of it survives the
// round trip through container labels (KernelLabels, KernelFromContainer).
// A refused request is kInvalidArgument with a message, or
// kResourceExhausted (422) when its shm is more than its mem.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "model/kernel.h"
#include "model/label_codec.h"
#include "model/create_request.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using nlohmann::json;
  using slotd::Status;
  const json body = json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return 0;

  auto request = slotd::ParseCreateRequest(body);
  if (!request.ok()) {
    FUZZ_CHECK(request.status().code() == Status::Code::kInvalidArgument ||
                   (request.status().code() == Status::Code::kResourceExhausted &&
                    request.status().message().rfind("resources.shm: ", 0) == 0),
               request.status().message());
    FUZZ_CHECK(!request.status().message().empty(), "a refusal without a message");
    return 0;
  }
  FUZZ_CHECK(slotd::IsValidKernelId(request->kernel_id), "kernel id \"" + request->kernel_id + "\"");
  FUZZ_CHECK(slotd::IsValidKernelId(request->session_id), "session id \"" + request->session_id + "\"");

  const json canonical = RequestLabel(*request);
  const std::string text = canonical.dump();
  auto restored = slotd::RequestFromLabel(json::parse(text));
  FUZZ_CHECK(restored.ok(), "the canonical form " + text + " is refused: " + restored.status().message());
  FUZZ_CHECK(RequestLabel(*restored) == canonical,
             "the canonical form changes on restore: " + text + " -> " + RequestLabel(*restored).dump());

  slotd::Kernel kernel;
  kernel.request = *request;
  kernel.agent_id = "fuzz-agent";
  slotd::ContainerInfo info;
  info.id = "c1";
  info.name = slotd::ContainerName(kernel.agent_id, kernel.id());
  info.labels = slotd::KernelLabels(kernel);
  auto adopted = slotd::KernelFromContainer(info);
  FUZZ_CHECK(adopted.ok(), "the labels of " + text + " are refused: " + adopted.status().message());
  FUZZ_CHECK(RequestLabel(adopted->request) == canonical && adopted->agent_id == kernel.agent_id &&
                 adopted->allocation == kernel.allocation,
             "the kernel of " + text + " changes through its labels");
  return 0;
}
