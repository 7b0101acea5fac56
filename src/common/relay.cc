#include "common/relay.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace slotd {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kTickMs = 100;
constexpr size_t kChunk = 64 * 1024;

// How a write ended.
enum class Written { kAll, kGone, kTimedOut, kStopped };

Written Write(int fd, const char* bytes, size_t size, std::chrono::milliseconds timeout,
              const std::atomic<bool>* stop) {
  const Clock::time_point deadline = Clock::now() + timeout;
  while (size > 0) {
    if (stop != nullptr && stop->load()) return Written::kStopped;
    const ssize_t n = ::send(fd, bytes, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == ENOTSOCK) {
      const ssize_t w = ::write(fd, bytes, size);  // a terminal or a pipe
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return Written::kGone;
      bytes += w;
      size -= static_cast<size_t>(w);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // The reader is behind: wait for room, in ticks, so that `stop` and the deadline are seen.
      int wait_ms = kTickMs;
      if (timeout.count() > 0) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) return Written::kTimedOut;
        wait_ms = static_cast<int>(std::min<int64_t>(left, kTickMs));
      }
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, wait_ms) < 0 && errno != EINTR) return Written::kGone;
      continue;
    }
    if (n <= 0) return Written::kGone;
    bytes += n;
    size -= static_cast<size_t>(n);
  }
  return Written::kAll;
}

// The relay's end for a write that did not finish.
RelayEnd EndOf(Written written) {
  switch (written) {
    case Written::kTimedOut: return RelayEnd::kWriteTimedOut;
    case Written::kStopped: return RelayEnd::kStopped;
    default: return RelayEnd::kOutputGone;
  }
}

}  // namespace

bool WriteAll(int fd, const char* bytes, size_t size, std::chrono::milliseconds timeout,
              const std::atomic<bool>* stop) {
  return Write(fd, bytes, size, timeout, stop) == Written::kAll;
}

RelayEnd Relay(int input, int output, int remote, const std::atomic<bool>& stop, const RelayOptions& options) {
  char buffer[kChunk];
  bool input_open = true;
  while (!stop.load()) {
    pollfd fds[2] = {{remote, POLLIN, 0}, {input_open ? input : -1, POLLIN, 0}};
    const int rc = ::poll(fds, 2, kTickMs);
    const int poll_errno = errno;  // before on_tick, whose calls may set errno
    if (options.on_tick) options.on_tick();
    if (rc < 0 && poll_errno != EINTR) return RelayEnd::kOutputGone;
    if (rc <= 0) continue;
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      const ssize_t n = ::read(remote, buffer, kChunk);
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return RelayEnd::kRemoteEnded;
      if (n > 0) {
        const Written w = Write(output, buffer, static_cast<size_t>(n), options.write_timeout, &stop);
        if (w != Written::kAll) return EndOf(w);
      }
    }
    if (input_open && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
      const ssize_t n = ::read(input, buffer, kChunk);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        if (options.input_end_ends) return RelayEnd::kInputEnded;
        input_open = false;
        ::shutdown(remote, SHUT_WR);
        continue;
      }
      const Written w = Write(remote, buffer, static_cast<size_t>(n), options.write_timeout, &stop);
      if (w != Written::kAll) return EndOf(w);
    }
  }
  return RelayEnd::kStopped;
}

}  // namespace slotd
