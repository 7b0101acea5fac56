// The terminal side of `slotctl exec -it`: raw mode while a session runs,
// the window size, and window-size changes.
#pragma once

#include <termios.h>

#include <optional>

namespace slotctl {

// Puts the terminal on `fd` into raw mode (every byte passed on as typed, no
// local echo: the kernel's terminal echoes) until destroyed, then restores
// it. Does nothing when `fd` is not a terminal.
class RawTerminal {
 public:
  explicit RawTerminal(int fd);
  ~RawTerminal();
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

 private:
  int fd_;
  std::optional<termios> saved_;  // set when raw mode was entered
};

// Rows and columns of the terminal on `fd`; nullopt when it is not one.
struct WindowSize {
  int rows = 0;
  int cols = 0;
};
std::optional<WindowSize> WindowSizeOf(int fd);

// Starts noticing SIGWINCH; WindowChanged() then says, once per change,
// whether the window changed since it was last asked.
void WatchWindowChanges();
bool WindowChanged();

}  // namespace slotctl
