// The version slotd reports: in GET /v1/agent and in its etcd registration.
#pragma once

namespace slotd {

inline constexpr char kSlotdVersion[] = "0.1.0";

}  // namespace slotd
