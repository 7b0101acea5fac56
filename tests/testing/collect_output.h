// CollectOutput: the whole of a streamed output (StreamLogs of the engine or
// of the agent) as one string, for tests that check what was streamed.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace slotd {

// Calls `stream(on_output, stop)` and returns everything it handed to
// on_output, or its error.
inline Result<std::string> CollectOutput(
    const std::function<Status(const std::function<bool(std::string_view)>&, const std::atomic<bool>&)>& stream) {
  std::string text;
  const std::atomic<bool> stop{false};
  const Status s = stream(
      [&](std::string_view piece) {
        text.append(piece);
        return true;
      },
      stop);
  if (!s.ok()) return s;
  return text;
}

}  // namespace slotd
