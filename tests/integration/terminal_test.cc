// `slotctl exec -it` driven from a real pseudo-terminal, as a person at a
// terminal would: keystrokes in, the kernel's terminal out, window resizes
// and the exit status, over the unix socket and over TCP with the token.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "integration/harness.h"

namespace slotd::testing {
namespace {

using nlohmann::json;

// slotctl running on a pseudo-terminal of its own; the test is the person
// at the other end.
class TerminalSlotctl {
 public:
  TerminalSlotctl(const std::vector<std::string>& args, int rows, int cols) {
    winsize size{};
    size.ws_row = static_cast<unsigned short>(rows);
    size.ws_col = static_cast<unsigned short>(cols);
    std::vector<std::string> argv = {std::string(SLOTD_BIN_DIR) + "/slotctl"};
    argv.insert(argv.end(), args.begin(), args.end());
    pid_ = ::forkpty(&master_, nullptr, nullptr, &size);
    if (pid_ == 0) {
      std::vector<char*> c_argv;
      for (auto& a : argv) c_argv.push_back(a.data());
      c_argv.push_back(nullptr);
      ::execv(c_argv[0], c_argv.data());
      ::_exit(127);
    }
  }
  ~TerminalSlotctl() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (master_ >= 0) ::close(master_);
  }

  bool started() const { return pid_ > 0 && master_ >= 0; }
  const std::string& shown() const { return shown_; }

  // Types `keys` on the terminal.
  void Type(const std::string& keys) { ASSERT_EQ(::write(master_, keys.data(), keys.size()), static_cast<ssize_t>(keys.size())); }

  // Reads what the terminal shows until `text` has appeared after what was
  // already matched, or `limit` passes.
  bool WaitFor(const std::string& text, std::chrono::milliseconds limit = std::chrono::seconds(15)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (shown_.find(text, matched_) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{master_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buffer[4096];
      const ssize_t n = ::read(master_, buffer, sizeof buffer);
      if (n <= 0) return false;
      shown_.append(buffer, static_cast<size_t>(n));
    }
    matched_ = shown_.find(text, matched_) + text.size();
    return true;
  }

  // Resizes the terminal: slotctl gets SIGWINCH, as from a resized window.
  void Resize(int rows, int cols) {
    winsize size{};
    size.ws_row = static_cast<unsigned short>(rows);
    size.ws_col = static_cast<unsigned short>(cols);
    ASSERT_EQ(::ioctl(master_, TIOCSWINSZ, &size), 0);
  }

  // Waits for slotctl to exit, reading what it still shows; its exit status.
  int Wait(std::chrono::milliseconds limit = std::chrono::seconds(20)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      pollfd p{master_, POLLIN, 0};
      if (::poll(&p, 1, 50) > 0) {
        char buffer[4096];
        const ssize_t n = ::read(master_, buffer, sizeof buffer);
        if (n > 0) shown_.append(buffer, static_cast<size_t>(n));
      }
    }
    return -1;
  }

 private:
  int master_ = -1;
  pid_t pid_ = -1;
  std::string shown_;
  size_t matched_ = 0;
};

AgentOptions TerminalAgent(const std::string& name) {
  AgentOptions o;
  o.id = "it-" + RunTag() + "-" + name;
  o.cores = "0-1";
  return o;
}

void CreateShellKernel(const AgentProcess& agent, const std::string& id) {
  agent.CreateKernel({{"kernel_id", id},
                      {"image", kTestImage},
                      {"command", {"sleep", "3600"}},
                      {"resources", {{"cpu", 1}, {"mem", "32m"}}}});
}

TEST(Terminal, AnInteractiveShellThroughTheAgentWithResizesAndItsExitStatus) {
  AgentProcess agent(TerminalAgent("tty"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  CreateShellKernel(agent, "shell");
  {
    TerminalSlotctl term({"--socket", agent.socket_path(), "exec", "-it", "shell", "--", "sh"}, 24, 80);
    ASSERT_TRUE(term.started());
    term.Type("echo hi-$((6*7))\r");
    ASSERT_TRUE(term.WaitFor("hi-42")) << term.shown();  // typed "$((6*7))", shown computed: the shell ran it
    term.Type("exit 3\r");
    EXPECT_EQ(term.Wait(), 3) << term.shown();
  }
  {
    // The size of the kernel's terminal follows this one's.
    TerminalSlotctl term({"--socket", agent.socket_path(), "exec", "-it", "shell", "--", "sh", "-c",
                          "while read line; do [ \"$line\" = quit ] && exit 4; stty size; done"},
                         24, 80);
    ASSERT_TRUE(term.started());
    term.Type("size\r");
    EXPECT_TRUE(term.WaitFor("24 80")) << term.shown();
    term.Resize(33, 101);
    // The resize travels on a call of its own, so it may land after the next keystrokes.
    bool resized = false;
    for (int attempt = 0; attempt < 50 && !resized; ++attempt) {
      term.Type("size\r");
      resized = term.WaitFor("33 101", std::chrono::milliseconds(200));
    }
    EXPECT_TRUE(resized) << term.shown();
    term.Type("quit\r");
    EXPECT_EQ(term.Wait(), 4) << term.shown();
  }
  // The terminal sessions left the kernel as it was.
  EXPECT_EQ(agent.CallJson("GET", "/v1/kernels/shell", nullptr, 200)["state"], "RUNNING");
  agent.CallJson("DELETE", "/v1/kernels/shell", nullptr, 200);
}

TEST(Terminal, OverTcpWithTheTokenAndRefusedWithoutIt) {
  AgentOptions options = TerminalAgent("tty-tcp");
  options.token = "terminal-token-" + RunTag();
  AgentProcess agent(options);
  ASSERT_TRUE(agent.Start()) << agent.log();
  CreateShellKernel(agent, "shell");
  const std::string url = "http://127.0.0.1:" + std::to_string(agent.port());
  TempDir dir;
  WriteFile(dir.path() + "/token", options.token + "\n");
  TerminalSlotctl term({"--agent", url, "--token-file", dir.path() + "/token", "exec", "-it", "shell", "--", "sh", "-c",
                        "read line; echo got:$line; exit 5"},
                       24, 80);
  ASSERT_TRUE(term.started());
  term.Type("abc\r");
  EXPECT_TRUE(term.WaitFor("got:abc")) << term.shown();
  EXPECT_EQ(term.Wait(), 5) << term.shown();

  TerminalSlotctl refused({"--agent", url, "exec", "-it", "shell", "--", "sh"}, 24, 80);
  EXPECT_EQ(refused.Wait(), 7) << refused.shown();  // 401: kRefused
  const CommandResult half = Slotctl({"--socket", agent.socket_path(), "exec", "-i", "shell", "--", "sh"});
  EXPECT_EQ(half.exit_code, 2) << half.err;
  EXPECT_NE(half.err.find("-i and -t go together"), std::string::npos) << half.err;
  agent.CallJson("DELETE", "/v1/kernels/shell", nullptr, 200);
}

}  // namespace
}  // namespace slotd::testing
