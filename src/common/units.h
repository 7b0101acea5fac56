// Parsing and formatting of the value syntaxes shared by agent.toml and the
// API: binary sizes ("512m", "2g"), durations ("250ms", "10s") and CPU core
// lists ("0-3,8").
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace slotd {

inline constexpr uint64_t kMiB = 1ull << 20;  // bytes in a mebibyte
inline constexpr uint64_t kGiB = 1ull << 30;  // bytes in a gibibyte

// Parses a size: a non-negative integer with an optional binary suffix
// k, m, g, t (case-insensitive, optional trailing "b"/"ib"); a bare number is
// bytes. On failure the message says what is accepted.
Result<uint64_t> ParseSize(const std::string& text);

// Formats bytes with the largest exact binary suffix ("256m", "1536k", "17").
std::string FormatSize(uint64_t bytes);

// Formats bytes for messages: FormatSize, plus a rounded figure in GiB when
// that is hard to read ("24684084k (about 23.5g)").
std::string DescribeSize(uint64_t bytes);

// Parses a duration: a non-negative integer with suffix ms, s, m or h.
Result<std::chrono::milliseconds> ParseDuration(const std::string& text);

// Formats a duration in its largest exact unit, as ParseDuration reads it
// ("1s", "250ms", "5m", "1h"; "0ms").
std::string FormatDuration(std::chrono::milliseconds duration);

// One more than the highest core number slotd handles (ParseCoreList's bound,
// the size of the affinity masks it reads).
inline constexpr int kCoreLimit = 4096;

// Parses a core list ("0-3,8") into sorted, unique core numbers. Rejects empty
// items, reversed ranges and numbers of kCoreLimit or above.
Result<std::vector<int>> ParseCoreList(const std::string& text);

// A CPU quota in millicores as requests and messages write it: "250m".
std::string FormatMillicores(int64_t millis);

// Formats sorted core numbers as a compact list ("0-3,8").
std::string FormatCoreList(const std::vector<int>& cores);

}  // namespace slotd
