// packaging/completion/slotd.bash against a real agent: for a slotctl
// subcommand that takes a kernel id, the completion offers the ids of the
// agent the command line names (--socket, --config), read with the real
// slotctl; packaging.bash_completion (tests/completion_test.sh) covers the
// rest without an agent.
#include <gtest/gtest.h>

#include "integration/harness.h"

namespace slotd::testing {
namespace {

// What the completion offers for the words of `line`, the last one being
// completed: COMPREPLY, one word a line, as a bash that sourced the script
// sees it, with build/bin first in PATH.
std::string Complete(const std::vector<std::string>& line) {
  std::string words;
  for (const std::string& word : line) words += " '" + word + "'";
  const std::string script = "export PATH='" + std::string(SLOTD_BIN_DIR) + "':$PATH; source '" +
                             std::string(SLOTD_SOURCE_DIR) + "/packaging/completion/slotd.bash'; COMP_WORDS=(" +
                             words + "); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _slotctl; printf '%s\\n' " +
                             "\"${COMPREPLY[@]}\"";
  const CommandResult result = RunCommand({"bash", "-c", script});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  return result.out;
}

TEST(Completion, KernelIdsComeFromTheAgentTheLineNames) {
  AgentOptions options;
  options.id = "it-" + RunTag() + "-completion";
  options.cores = "0-1";  // one core each
  options.memory = "256m";
  options.port_first = 36100;
  options.port_last = 36109;
  AgentProcess agent(options);
  ASSERT_TRUE(agent.Start()) << agent.log();
  for (const char* id : {"alpha1", "beta1"})
    agent.CreateKernel({{"kernel_id", id},
                        {"image", kTestImage},
                        {"command", {"sleep", "3600"}},
                        {"resources", {{"cpu", 1}, {"mem", "32m"}}}});

  EXPECT_EQ(Complete({"slotctl", "--socket", agent.socket_path(), "rm", ""}), "alpha1\nbeta1\n");
  EXPECT_EQ(Complete({"slotctl", "--socket", agent.socket_path(), "logs", "al"}), "alpha1\n");
  EXPECT_EQ(Complete({"slotctl", "--config", agent.config_path(), "restart", "b"}), "beta1\n");
  // Where the command takes no kernel id, and past `--`, no id is offered.
  EXPECT_EQ(Complete({"slotctl", "--socket", agent.socket_path(), "pull", ""}), "\n");
  EXPECT_EQ(Complete({"slotctl", "--socket", agent.socket_path(), "exec", "alpha1", "--", ""}), "\n");
}

}  // namespace
}  // namespace slotd::testing
