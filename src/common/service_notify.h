// Telling the service manager that started the agent (systemd with
// Type=notify) how its life goes: READY=1 once it serves, STATUS= lines
// while it waits (for the engine), STOPPING=1 when it stops, WATCHDOG=1
// while it is alive. The sd_notify(3) protocol, one datagram to the unix
// socket named by $NOTIFY_SOCKET, spoken directly (no libsystemd). Without
// $NOTIFY_SOCKET (started by hand, by a test, by another manager) every call
// does nothing.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace slotd {

class ServiceNotifier {
 public:
  // Reads $NOTIFY_SOCKET, and $WATCHDOG_USEC where $WATCHDOG_PID is unset
  // or this process's pid.
  static ServiceNotifier FromEnvironment();
  // A notifier that sends to `socket_path` ("@name": an abstract socket;
  // empty: none) and expects pings within `watchdog` when it is set.
  ServiceNotifier(std::string socket_path, std::optional<std::chrono::microseconds> watchdog);

  // Whether a service manager listens.
  bool active() const { return !socket_path_.empty(); }
  // Sends `state`, newline-separated assignments ("READY=1\nSTATUS=serving").
  // False when no manager listens or the datagram could not be sent; never
  // blocks (a full socket drops the message).
  bool Notify(std::string_view state) const;
  // How often the manager wants WATCHDOG=1 at the least (WatchdogSec=), when it asked.
  std::optional<std::chrono::microseconds> watchdog_interval() const { return watchdog_; }

 private:
  std::string socket_path_;
  std::optional<std::chrono::microseconds> watchdog_;
};

// "STATUS=" with `text` on one line (newlines become spaces), for Notify.
std::string StatusLine(std::string_view text);

}  // namespace slotd
