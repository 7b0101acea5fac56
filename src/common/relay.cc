#include "common/relay.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace slotd {
namespace {

constexpr int kTickMs = 100;
constexpr size_t kChunk = 64 * 1024;

// Reads once from `from` and writes it all to `to`. False at the end of
// `from` or when either side failed.
bool CopyOnce(int from, int to, char* buffer) {
  const ssize_t n = ::read(from, buffer, kChunk);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) return false;
  return WriteAll(to, buffer, static_cast<size_t>(n));
}

}  // namespace

bool WriteAll(int fd, const char* bytes, size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, bytes, size, MSG_NOSIGNAL);
    if (n < 0 && errno == ENOTSOCK) {
      const ssize_t w = ::write(fd, bytes, size);  // a terminal or a pipe
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      bytes += w;
      size -= static_cast<size_t>(w);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

void Relay(int input, int output, int remote, const std::atomic<bool>& stop, const std::function<void()>& on_tick) {
  char buffer[kChunk];
  bool input_open = true;
  while (!stop.load()) {
    pollfd fds[2] = {{remote, POLLIN, 0}, {input_open ? input : -1, POLLIN, 0}};
    const int rc = ::poll(fds, 2, kTickMs);
    const int poll_errno = errno;  // before on_tick, whose calls may set errno
    if (on_tick) on_tick();
    if (rc < 0 && poll_errno != EINTR) return;
    if (rc <= 0) continue;
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      if (!CopyOnce(remote, output, buffer)) return;  // the session ended, or its reader is gone
    }
    if (input_open && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
      const ssize_t n = ::read(input, buffer, kChunk);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        input_open = false;
        ::shutdown(remote, SHUT_WR);
        continue;
      }
      if (!WriteAll(remote, buffer, static_cast<size_t>(n))) return;
    }
  }
}

}  // namespace slotd
