// ASCII case for protocol text (HTTP header names and tokens, engine
// fields, device names): bytes outside A-Z are left as they are, whatever
// the locale, and bytes above 127 (a hostile header's) are safe to pass.
#pragma once

#include <string>
#include <string_view>

namespace slotd {

// `c` in lower case when it is an ASCII capital; otherwise `c`.
constexpr char AsciiLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// `text` with its ASCII capitals in lower case.
inline std::string AsciiLowered(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = AsciiLower(c);
  return out;
}

// Whether `a` and `b` are equal but for the case of ASCII letters.
constexpr bool EqualsIgnoringAsciiCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (AsciiLower(a[i]) != AsciiLower(b[i])) return false;
  return true;
}

// Whether `text` begins with `prefix`, but for the case of ASCII letters.
constexpr bool StartsWithIgnoringAsciiCase(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && EqualsIgnoringAsciiCase(text.substr(0, prefix.size()), prefix);
}

}  // namespace slotd
