#include "integration/pty_session.h"

#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

namespace slotd::testing {

PtySession::PtySession(std::vector<std::string> argv, int rows, int cols) {
  winsize size{};
  size.ws_row = static_cast<unsigned short>(rows);
  size.ws_col = static_cast<unsigned short>(cols);
  pid_ = ::forkpty(&master_, nullptr, nullptr, &size);
  if (pid_ == 0) {
    std::vector<char*> c_argv;
    for (auto& a : argv) c_argv.push_back(a.data());
    c_argv.push_back(nullptr);
    ::execvp(c_argv[0], c_argv.data());
    ::_exit(127);
  }
}

PtySession::~PtySession() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (master_ >= 0) ::close(master_);
}

bool PtySession::Type(const std::string& keys) {
  return ::write(master_, keys.data(), keys.size()) == static_cast<ssize_t>(keys.size());
}

bool PtySession::ReadSome(int timeout_ms) {
  pollfd p{master_, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0) return true;
  char buffer[4096];
  const ssize_t n = ::read(master_, buffer, sizeof buffer);
  if (n <= 0) return false;
  shown_.append(buffer, static_cast<size_t>(n));
  return true;
}

bool PtySession::WaitFor(const std::string& text, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (shown_.find(text, matched_) == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !ReadSome(static_cast<int>(left.count()))) return false;
  }
  matched_ = shown_.find(text, matched_) + text.size();
  return true;
}

bool PtySession::WaitForRawMode(std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    termios mode{};
    if (::tcgetattr(master_, &mode) == 0 && (mode.c_lflag & ECHO) == 0) return true;
    if (!ReadSome(10)) return false;
  }
  return false;
}

bool PtySession::Resize(int rows, int cols) {
  winsize size{};
  size.ws_row = static_cast<unsigned short>(rows);
  size.ws_col = static_cast<unsigned short>(cols);
  return ::ioctl(master_, TIOCSWINSZ, &size) == 0;
}

int PtySession::Wait(std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    ReadSome(50);
  }
  return -1;
}

}  // namespace slotd::testing
