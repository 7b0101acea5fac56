#include "cli/terminal.h"

#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>

namespace slotctl {
namespace {

std::atomic<bool> window_changed{false};

void OnWindowChange(int) { window_changed = true; }

}  // namespace

RawTerminal::RawTerminal(int fd) : fd_(fd) {
  termios current{};
  if (!::isatty(fd) || ::tcgetattr(fd, &current) != 0) return;
  saved_ = current;
  cfmakeraw(&current);
  ::tcsetattr(fd, TCSANOW, &current);
}

RawTerminal::~RawTerminal() {
  if (saved_) ::tcsetattr(fd_, TCSANOW, &*saved_);
}

std::optional<WindowSize> WindowSizeOf(int fd) {
  winsize size{};
  if (::ioctl(fd, TIOCGWINSZ, &size) != 0 || size.ws_row == 0 || size.ws_col == 0) return std::nullopt;
  return WindowSize{size.ws_row, size.ws_col};
}

void WatchWindowChanges() {
  struct sigaction action {};
  action.sa_handler = OnWindowChange;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: a wait in progress ends, and the change is noticed at once
  ::sigaction(SIGWINCH, &action, nullptr);
}

bool WindowChanged() { return window_changed.exchange(false); }

}  // namespace slotctl
