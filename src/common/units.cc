#include "common/units.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdint>
#include <iterator>
#include <set>

#include "common/ascii.h"

namespace slotd {
namespace {

// Parses all of `text` as a decimal uint64; false on any other character or overflow.
bool ParseUnsigned(const std::string& text, uint64_t& out) {
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

// `s` without leading and trailing white space.
std::string Trim(const std::string& s) {
  auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  auto begin = std::find_if_not(s.begin(), s.end(), space);
  auto end = std::find_if_not(s.rbegin(), std::make_reverse_iterator(begin), space).base();
  return std::string(begin, end);
}

}  // namespace

Result<uint64_t> ParseSize(const std::string& text) {
  const std::string bad = "invalid size \"" + text +
                          "\": expected a number of bytes with an optional suffix k, m, g or t "
                          "(binary, e.g. 512m)";
  std::string s = AsciiLowered(text);
  // An optional "b" or "ib" after the unit letter: "512mb", "2GiB".
  auto is_unit = [](char c) { return c == 'k' || c == 'm' || c == 'g' || c == 't'; };
  if (s.size() > 2 && s.compare(s.size() - 2, 2, "ib") == 0 && is_unit(s[s.size() - 3])) s.resize(s.size() - 2);
  else if (s.size() > 1 && s.back() == 'b' && is_unit(s[s.size() - 2])) s.pop_back();
  uint64_t shift = 0;
  if (!s.empty()) {
    switch (s.back()) {
      case 'k': shift = 10; break;
      case 'm': shift = 20; break;
      case 'g': shift = 30; break;
      case 't': shift = 40; break;
      default: break;
    }
    if (shift) s.pop_back();
  }
  uint64_t n = 0;
  if (!ParseUnsigned(s, n)) return Status::InvalidArgument(bad);
  if (shift && n > (UINT64_MAX >> shift)) return Status::InvalidArgument("size \"" + text + "\" is too large");
  return n << shift;
}

std::string FormatSize(uint64_t bytes) {
  static const char* kSuffix[] = {"", "k", "m", "g", "t"};
  int i = 0;
  while (i < 4 && bytes != 0 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++i;
  }
  return std::to_string(bytes) + kSuffix[i];
}

std::string DescribeSize(uint64_t bytes) {
  std::string exact = FormatSize(bytes);
  if (bytes < kGiB || bytes % kGiB == 0) return exact;
  char rounded[32];
  std::snprintf(rounded, sizeof rounded, "%.1f", static_cast<double>(bytes) / static_cast<double>(kGiB));
  return exact + " (about " + rounded + "g)";
}

Result<std::chrono::milliseconds> ParseDuration(const std::string& text) {
  const std::string bad = "invalid duration \"" + text + "\": expected a number with ms, s, m or h (e.g. 10s)";
  std::string s = AsciiLowered(text);
  uint64_t factor = 0;
  if (s.size() > 2 && s.compare(s.size() - 2, 2, "ms") == 0) {
    factor = 1;
    s.resize(s.size() - 2);
  } else if (!s.empty()) {
    switch (s.back()) {
      case 's': factor = 1000; break;
      case 'm': factor = 60'000; break;
      case 'h': factor = 3'600'000; break;
      default: return Status::InvalidArgument(bad);
    }
    s.pop_back();
  }
  uint64_t n = 0;
  if (!ParseUnsigned(s, n)) return Status::InvalidArgument(bad);
  if (n > static_cast<uint64_t>(INT64_MAX) / factor) {
    return Status::InvalidArgument("duration \"" + text + "\" is too long");
  }
  return std::chrono::milliseconds(static_cast<int64_t>(n * factor));
}

std::string FormatDuration(std::chrono::milliseconds duration) {
  const int64_t ms = duration.count();
  if (ms > 0 && ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms > 0 && ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  if (ms > 0 && ms % 1'000 == 0) return std::to_string(ms / 1'000) + "s";
  return std::to_string(ms) + "ms";
}

Result<std::vector<int>> ParseCoreList(const std::string& text) {
  const std::string prefix = "invalid core list \"" + text + "\": ";
  std::set<int> cores;
  size_t pos = 0;
  if (text.empty()) return Status::InvalidArgument(prefix + "it is empty; write cores like 0-3,8");
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    item = Trim(item);
    if (item.empty()) return Status::InvalidArgument(prefix + "empty item; write cores like 0-3,8");
    size_t dash = item.find('-');
    uint64_t lo = 0, hi = 0;
    bool ok = dash == std::string::npos
                  ? (ParseUnsigned(item, lo) && (hi = lo, true))
                  : (ParseUnsigned(Trim(item.substr(0, dash)), lo) && ParseUnsigned(Trim(item.substr(dash + 1)), hi));
    if (!ok) return Status::InvalidArgument(prefix + "\"" + item + "\" is not a core number or range like 0-3");
    if (hi < lo) return Status::InvalidArgument(prefix + "range \"" + item + "\" ends before it starts");
    if (hi >= kCoreLimit)
      return Status::InvalidArgument(prefix + "core " + std::to_string(hi) + " is above " + std::to_string(kCoreLimit - 1));
    for (uint64_t c = lo; c <= hi; ++c) cores.insert(static_cast<int>(c));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return std::vector<int>(cores.begin(), cores.end());
}

std::string FormatMillicores(int64_t millis) { return std::to_string(millis) + "m"; }

std::string FormatCoreList(const std::vector<int>& cores) {
  std::string out;
  for (size_t i = 0; i < cores.size();) {
    size_t j = i;
    while (j + 1 < cores.size() && cores[j + 1] == cores[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cores[i]);
    if (j > i) out += '-' + std::to_string(cores[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace slotd
