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

// Stores the unsigned number that starts `text` (after blanks) in `value`;
// false, leaving `value` alone, when there is none.
bool ParseNumber(std::string_view text, uint64_t& value);

// Splits `line` at single spaces into at most `max` fields; returns the count.
size_t SplitFields(std::string_view line, std::string_view* fields, size_t max);

// pread(2) at `offset`, retried on EINTR.
ssize_t ReadSomeAt(int fd, char* buffer, size_t size, off_t offset);

// How a read shows that a file has been read to its end.
enum class FileEnd {
  kEmptyRead,  // a read returns nothing: any file
  // A read returns less than it asked for: a file the kernel generates whole
  // for each read from its start, as every cgroup measure file is (one
  // record of its seq_file); saves a read per file.
  kShortRead,
};

// Calls on_line(std::string_view) for each line of open file `fd`, read
// from its start with pread (so a file kept open reads afresh each time:
// /proc and cgroup files are generated at offset 0), without its newline,
// through a stack buffer; a line longer than the buffer is skipped. Returns
// 0, or the errno of a failed first read (ENODEV: the cgroup of a kept file
// was removed).
template <typename OnLine>
int ForEachLineAt(int fd, OnLine&& on_line, FileEnd end_shows = FileEnd::kEmptyRead) {
  char buffer[4096];
  size_t held = 0;         // bytes of an unfinished line at the buffer's start
  bool skipping = false;   // inside an overlong line: drop bytes until '\n'
  off_t offset = 0;
  for (;;) {
    const ssize_t n = ReadSomeAt(fd, buffer + held, sizeof(buffer) - held, offset);
    if (n < 0 && offset == 0) return errno;
    if (n <= 0) break;
    offset += n;
    const bool short_read = static_cast<size_t>(n) < sizeof(buffer) - held;
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
    if (short_read && end_shows == FileEnd::kShortRead) break;
  }
  if (held > 0 && !skipping) on_line(std::string_view(buffer, held));
  return 0;
}

// ForEachLineAt over the file at `path`, opened and closed around it.
// Returns 0, or the errno of a failed open or first read.
template <typename OnLine>
int ForEachLine(const char* path, OnLine&& on_line) {
  const int fd = OpenReadOnly(path);
  if (fd < 0) return errno;
  const int error = ForEachLineAt(fd, on_line);
  ::close(fd);
  return error;
}

}  // namespace slotd
