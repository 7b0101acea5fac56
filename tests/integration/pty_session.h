// PtySession: a program on a pseudo-terminal of its own (forkpty), driven
// from the master side as a person at a terminal would: keys typed, what the
// screen shows read back, the window resized, the exit status awaited.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace slotd::testing {

class PtySession {
 public:
  // Runs `argv` (argv[0] looked up in $PATH) on a new terminal of `rows` x `cols`.
  PtySession(std::vector<std::string> argv, int rows, int cols);
  ~PtySession();  // SIGKILLs the program if it still runs
  PtySession(const PtySession&) = delete;
  PtySession& operator=(const PtySession&) = delete;

  bool started() const { return pid_ > 0 && master_ >= 0; }
  // Everything the terminal has shown so far.
  const std::string& shown() const { return shown_; }

  // Types `keys`; false when the terminal is gone.
  bool Type(const std::string& keys);
  // Reads what the terminal shows until `text` has appeared after what
  // earlier calls matched, or `limit` passes; false then.
  bool WaitFor(const std::string& text, std::chrono::milliseconds limit = std::chrono::seconds(15));
  // Waits until the program has put its terminal in raw mode (no local
  // echo: what shows comes from the program); false after `limit`.
  bool WaitForRawMode(std::chrono::milliseconds limit = std::chrono::seconds(15));
  // Resizes the terminal: the program gets SIGWINCH, as from a resized window.
  bool Resize(int rows, int cols);
  // Waits for the program to exit, still reading the screen; its exit status, or -1 after `limit`.
  int Wait(std::chrono::milliseconds limit = std::chrono::seconds(20));

 private:
  // Reads what is there within `timeout_ms` into shown_; false when the terminal is gone.
  bool ReadSome(int timeout_ms);

  int master_ = -1;
  pid_t pid_ = -1;
  std::string shown_;
  size_t matched_ = 0;  // where the next WaitFor starts looking
};

}  // namespace slotd::testing
