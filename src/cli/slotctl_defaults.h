// The defaults slotctl shares with slotd, in one place. They must match what
// slotd states (src/config: rpc-listen-addr 127.0.0.1:6001, node.claims-dir
// /run/slotd/node) until slotctl reads them from a header the two share.
#pragma once

namespace slotctl {

// The agent slotctl talks to when neither --socket, --agent nor --config names one.
inline constexpr char kDefaultAgentUrl[] = "http://127.0.0.1:6001";

// The claims directory `slotctl node` reads when neither --claims-dir nor --config names one.
inline constexpr char kDefaultClaimsDir[] = "/run/slotd/node";

}  // namespace slotctl
