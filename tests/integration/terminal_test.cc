// `slotctl exec -it` driven from a real pseudo-terminal, as a person at a
// terminal would: keystrokes in, the kernel's terminal out, window resizes
// and the exit status, over the unix socket and over TCP with the token.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "integration/harness.h"
#include "integration/pty_session.h"

namespace slotd::testing {
namespace {

using nlohmann::json;

// The command line of build/bin/slotctl with `args`, to run on a pseudo-terminal.
std::vector<std::string> SlotctlCommand(std::vector<std::string> args) {
  args.insert(args.begin(), std::string(SLOTD_BIN_DIR) + "/slotctl");
  return args;
}

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
    PtySession term(SlotctlCommand({"--socket", agent.socket_path(), "exec", "-it", "shell", "--", "sh"}), 24, 80);
    ASSERT_TRUE(term.started());
    ASSERT_TRUE(term.Type("echo hi-$((6*7))\r"));
    ASSERT_TRUE(term.WaitFor("hi-42")) << term.shown();  // typed "$((6*7))", shown computed: the shell ran it
    ASSERT_TRUE(term.Type("exit 3\r"));
    EXPECT_EQ(term.Wait(), 3) << term.shown();
  }
  {
    // The size of the kernel's terminal follows this one's.
    PtySession term(SlotctlCommand({"--socket", agent.socket_path(), "exec", "-it", "shell", "--", "sh", "-c",
                                    "while read line; do [ \"$line\" = quit ] && exit 4; stty size; done"}),
                    24, 80);
    ASSERT_TRUE(term.started());
    ASSERT_TRUE(term.Type("size\r"));
    EXPECT_TRUE(term.WaitFor("24 80")) << term.shown();
    ASSERT_TRUE(term.Resize(33, 101));
    // The resize travels on a call of its own, so it may land after the next keystrokes.
    bool resized = false;
    for (int attempt = 0; attempt < 50 && !resized; ++attempt) {
      ASSERT_TRUE(term.Type("size\r"));
      resized = term.WaitFor("33 101", std::chrono::milliseconds(200));
    }
    EXPECT_TRUE(resized) << term.shown();
    ASSERT_TRUE(term.Type("quit\r"));
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
  PtySession term(SlotctlCommand({"--agent", url, "--token-file", dir.path() + "/token", "exec", "-it", "shell", "--",
                                  "sh", "-c", "read line; echo got:$line; exit 5"}),
                  24, 80);
  ASSERT_TRUE(term.started());
  ASSERT_TRUE(term.Type("abc\r"));
  EXPECT_TRUE(term.WaitFor("got:abc")) << term.shown();
  EXPECT_EQ(term.Wait(), 5) << term.shown();

  PtySession refused(SlotctlCommand({"--agent", url, "exec", "-it", "shell", "--", "sh"}), 24, 80);
  EXPECT_EQ(refused.Wait(), 7) << refused.shown();  // 401: kRefused
  const CommandResult half = Slotctl({"--socket", agent.socket_path(), "exec", "-i", "shell", "--", "sh"});
  EXPECT_EQ(half.exit_code, 2) << half.err;
  EXPECT_NE(half.err.find("-i and -t go together"), std::string::npos) << half.err;
  agent.CallJson("DELETE", "/v1/kernels/shell", nullptr, 200);
}

// Over TLS the connection cannot be handed to the exec as a socket: the
// agent relays it through a socket pair, and slotctl through one of its own.
TEST(Terminal, OverTlsRelayedBothWaysToTheEnd) {
  AgentOptions options = TerminalAgent("tty-tls");
  options.token = "terminal-token-" + RunTag();
  options.agent_toml = "tls-self-signed = true\n";
  AgentProcess agent(options);
  ASSERT_TRUE(agent.Start()) << agent.log();
  CreateShellKernel(agent, "shell");
  const std::string fingerprint = agent.CallJson("GET", "/v1/agent", nullptr, 200)["tls"]["fingerprint_sha256"];
  const std::string url = "https://127.0.0.1:" + std::to_string(agent.port());
  TempDir dir;
  WriteFile(dir.path() + "/token", options.token + "\n");
  PtySession term(SlotctlCommand({"--agent", url, "--token-file", dir.path() + "/token", "--fingerprint", fingerprint,
                                  "exec", "-it", "shell", "--", "sh", "-c",
                                  "read line; echo got:$line; head -c 300000 /dev/zero | tr '\\0' x; echo; exit 5"}),
                  24, 80);
  ASSERT_TRUE(term.started());
  ASSERT_TRUE(term.Type("abc\r"));
  EXPECT_TRUE(term.WaitFor("got:abc")) << term.shown();
  EXPECT_EQ(term.Wait(), 5) << term.shown();
  EXPECT_GE(std::count(term.shown().begin(), term.shown().end(), 'x'), 300000) << "the relay lost output";
  agent.CallJson("DELETE", "/v1/kernels/shell", nullptr, 200);
}

}  // namespace
}  // namespace slotd::testing
