#include "stats/text_files.h"

#include <fcntl.h>

#include <charconv>

namespace slotd {

int OpenReadOnly(const char* path) {
  int fd;
  do {
    fd = ::open(path, O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

ssize_t ReadSomeAt(int fd, char* buffer, size_t size, off_t offset) {
  ssize_t n;
  do {
    n = ::pread(fd, buffer, size, offset);
  } while (n < 0 && errno == EINTR);
  return n;
}

bool ParseNumber(std::string_view text, uint64_t& value) {
  size_t i = 0;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  const char* first = text.data() + i;
  const char* last = text.data() + text.size();
  return std::from_chars(first, last, value).ec == std::errc();
}

size_t SplitFields(std::string_view line, std::string_view* fields, size_t max) {
  size_t count = 0;
  while (!line.empty() && count < max) {
    const size_t space = line.find(' ');
    fields[count++] = line.substr(0, space);
    if (space == std::string_view::npos) break;
    line.remove_prefix(space + 1);
  }
  return count;
}

}  // namespace slotd
