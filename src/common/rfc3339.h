// Times as RFC 3339 writes them, which is how container engines date what
// they report ("2024-05-01T12:34:56.123456789Z"; Podman writes the host's
// offset: "2024-05-01T14:34:56.1+02:00").
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace slotd {

// Milliseconds since the epoch (negative before it) of an RFC 3339
// date-time: "YYYY-MM-DDThh:mm:ss", 'T' or 't' (or a space) between date
// and time, an optional fraction of any length (its first three digits
// count, the rest are cut), then "Z", "z" or an offset "+hh:mm" / "-hh:mm",
// which is taken away to give UTC. Every field is checked against its
// range (February 29 only in a leap year; a leap second, 60, is read as
// 59.999). nullopt for anything else, a missing offset included.
std::optional<int64_t> ParseRfc3339Millis(std::string_view text);

}  // namespace slotd
