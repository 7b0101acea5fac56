// Reading the small text files of /proc and of cgroups without allocating:
// open/read that retry on EINTR, a line iterator over a stack buffer, and
// the number and field parsing their lines need. Shared by CgroupReader and
// the stats collector.
//
// Thread-safety: free functions without state; safe from any thread.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace slotd {

// open(path, O_RDONLY | O_CLOEXEC), retried on EINTR; -1 with errno on failure.
int OpenReadOnly(const char* path);

// read(2), retried on EINTR.
ssize_t ReadSome(int fd, char* buffer, size_t size);

// Stores the unsigned number that starts `text` (after blanks) in `value`;
// false, leaving `value` alone, when there is none.
bool ParseNumber(std::string_view text, uint64_t& value);

// Splits `line` at single spaces into at most `max` fields; returns the count.
size_t SplitFields(std::string_view line, std::string_view* fields, size_t max);

// Calls on_line(std::string_view) for each line of the file at `path`,
// without its newline, through a stack buffer; a line longer than the buffer
// is skipped. Returns 0, or the errno of a failed open.
template <typename OnLine>
int ForEachLine(const char* path, OnLine&& on_line) {
  const int fd = OpenReadOnly(path);
  if (fd < 0) return errno;
  char buffer[4096];
  size_t held = 0;         // bytes of an unfinished line at the buffer's start
  bool skipping = false;   // inside an overlong line: drop bytes until '\n'
  for (;;) {
    const ssize_t n = ReadSome(fd, buffer + held, sizeof(buffer) - held);
    if (n <= 0) break;
    const size_t end = held + static_cast<size_t>(n);
    size_t start = 0;
    for (size_t i = held; i < end; ++i) {
      if (buffer[i] != '\n') continue;
      if (!skipping) on_line(std::string_view(buffer + start, i - start));
      skipping = false;
      start = i + 1;
    }
    held = end - start;
    if (held == sizeof(buffer)) {  // a line fills the whole buffer
      skipping = true;
      held = 0;
    } else if (held > 0 && start > 0) {
      std::memmove(buffer, buffer + start, held);
    }
  }
  if (held > 0 && !skipping) on_line(std::string_view(buffer, held));
  ::close(fd);
  return 0;
}

}  // namespace slotd
