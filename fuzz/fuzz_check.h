// What the fuzz targets share. FUZZ_CHECK states an invariant: when it does
// not hold, the target prints what was expected and aborts, which libFuzzer
// reports as a crash and keeps the input as a reproducer.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace slotd::fuzz {

[[noreturn]] inline void Fail(const char* file, int line, const char* condition, const std::string& detail) {
  std::fprintf(stderr, "%s:%d: invariant broken: %s\n  %s\n", file, line, condition, detail.c_str());
  std::abort();
}

}  // namespace slotd::fuzz

// Aborts with `detail` (a std::string expression, evaluated only on failure) unless `condition` holds.
#define FUZZ_CHECK(condition, detail) \
  do {                                 \
    if (!(condition)) ::slotd::fuzz::Fail(__FILE__, __LINE__, #condition, (detail)); \
  } while (0)
