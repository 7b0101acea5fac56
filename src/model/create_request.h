// The API's create request: POST /v1/kernels's body, read within the API's
// bounds (docs/api.md, "Limits"). Only requests that arrive through the API
// meet these bounds; kernels restored from their labels never do
// (model/label_codec.h).
#pragma once

#include <nlohmann/json.hpp>

#include "model/kernel.h"
#include "common/status.h"

namespace slotd {

// What the API lets one create request store on its container: at most 64
// labels (keys of 128 bytes, values of 4 KiB), 1024 environment variables
// (names of 256 bytes, values of 32 KiB, 256 KiB in all), 1024 command
// arguments (256 KiB in all), 32 mounts and a max_lifetime of 366 days.
inline constexpr RequestLimits kApiRequestLimits{
    .labels = 64, .label_key = 128, .label_value = 4 << 10,
    .env_vars = 1024, .env_name = 256, .env_value = 32 << 10, .env_total = 256 << 10,
    .command_args = 1024, .command_total = 256 << 10,
    .mounts = 32,
    .max_lifetime = std::chrono::hours(24 * 366)};

// Parses and validates an API create body within kApiRequestLimits.
// kInvalidArgument names the field: "resources.mem: invalid size ..." /
// "kernel_id: must match ...".
Result<CreateRequest> ParseCreateRequest(const nlohmann::json& body);

}  // namespace slotd
