#include "common/service_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "common/unique_fd.h"

namespace slotd {
namespace {

// The unsigned decimal number `text` is, if it is one.
std::optional<uint64_t> DecimalOf(const char* text) {
  if (text == nullptr || *text == '\0') return std::nullopt;
  uint64_t value = 0;
  const char* end = text + std::strlen(text);
  auto [stop, error] = std::from_chars(text, end, value);
  if (error != std::errc() || stop != end) return std::nullopt;
  return value;
}

}  // namespace

ServiceNotifier ServiceNotifier::FromEnvironment() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  std::optional<std::chrono::microseconds> watchdog;
  const std::optional<uint64_t> usec = DecimalOf(std::getenv("WATCHDOG_USEC"));
  const char* pid_text = std::getenv("WATCHDOG_PID");
  const std::optional<uint64_t> pid = DecimalOf(pid_text);
  const bool for_this_process = pid_text == nullptr || (pid && *pid == static_cast<uint64_t>(getpid()));
  if (usec && *usec > 0 && for_this_process) watchdog = std::chrono::microseconds(*usec);
  return ServiceNotifier(socket == nullptr ? "" : socket, watchdog);
}

ServiceNotifier::ServiceNotifier(std::string socket_path, std::optional<std::chrono::microseconds> watchdog)
    : socket_path_(std::move(socket_path)), watchdog_(watchdog) {}

bool ServiceNotifier::Notify(std::string_view state) const {
  if (socket_path_.empty()) return false;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (socket_path_.size() >= sizeof(address.sun_path)) return false;
  std::memcpy(address.sun_path, socket_path_.data(), socket_path_.size());
  if (address.sun_path[0] == '@') address.sun_path[0] = '\0';  // abstract namespace
  const socklen_t length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + socket_path_.size());
  UniqueFd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return false;
  const ssize_t sent = ::sendto(fd.get(), state.data(), state.size(), MSG_NOSIGNAL,
                                reinterpret_cast<const sockaddr*>(&address), length);
  return sent == static_cast<ssize_t>(state.size());
}

std::string StatusLine(std::string_view text) {
  std::string line = "STATUS=";
  for (char c : text) line += (c == '\n' || c == '\r') ? ' ' : c;
  return line;
}

}  // namespace slotd
