// slotctl's exit statuses (docs/cli.md "Exit status") through the real
// binaries: a real agent refusing requests in each way it can, an address
// where nothing listens, and a small HTTP server on 127.0.0.1 that answers
// in forms slotctl cannot read.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "integration/harness.h"
#include "testing/canned_server.h"

namespace slotd::testing {
namespace {

using nlohmann::json;

// The statuses of docs/cli.md, spelled out: the test checks the numbers, not the enum.
constexpr int kUsage = 2, kUnreachable = 3, kNotFound = 4, kConflict = 5, kNoRoom = 6, kRefused = 7,
              kBadRequest = 8, kAgentError = 9;

AgentOptions ExitAgent(const std::string& name) {
  AgentOptions o;
  o.id = "it-" + RunTag() + "-" + name;
  o.cores = "0";
  o.memory = "256m";
  o.port_first = 36000;
  o.port_last = 36009;
  return o;
}

// A TCP port on 127.0.0.1 where nothing listens: bound, then closed.
int ClosedPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

TEST(SlotctlExit, AnAgentThatCannotBeReachedIsThree) {
  const std::string nowhere = "http://127.0.0.1:" + std::to_string(ClosedPort());
  CommandResult r = Slotctl({"--agent", nowhere, "kernels"});
  EXPECT_EQ(r.exit_code, kUnreachable) << r.err;
  EXPECT_NE(r.err.find(nowhere), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("is slotd running there?"), std::string::npos) << r.err;

  TempDir dir;
  r = Slotctl({"--socket", dir.path() + "/no.sock", "info"});
  EXPECT_EQ(r.exit_code, kUnreachable) << r.err;
  EXPECT_NE(r.err.find(dir.path() + "/no.sock"), std::string::npos) << r.err;
  // logs streams its answer: the same status on that path.
  r = Slotctl({"--socket", dir.path() + "/no.sock", "logs", "k1"});
  EXPECT_EQ(r.exit_code, kUnreachable) << r.err;
}

TEST(SlotctlExit, EachRefusalOfARealAgentHasItsOwnStatus) {
  AgentOptions o = ExitAgent("refusals");
  o.token = "s3cret-" + RunTag();
  AgentProcess agent(o);
  ASSERT_TRUE(agent.Start()) << agent.log();
  const std::string socket = agent.socket_path();

  // Unknown kernel: 404 on every command that names one.
  for (const std::vector<std::string>& command : std::vector<std::vector<std::string>>{
           {"rm", "nosuch"}, {"restart", "nosuch"}, {"stats", "nosuch"}, {"logs", "nosuch"},
           {"exec", "nosuch", "--", "true"}}) {
    std::vector<std::string> args = {"--socket", socket};
    args.insert(args.end(), command.begin(), command.end());
    CommandResult r = Slotctl(args);
    EXPECT_EQ(r.exit_code, kNotFound) << command[0] << ": " << r.err;
    EXPECT_NE(r.err.find("nosuch"), std::string::npos) << command[0] << ": " << r.err;
  }

  // A create that conflicts with an existing kernel of the same id: 409.
  CommandResult r = Slotctl({"--socket", socket, "run", "--id", "c1", "--mem", "32m", kTestImage, "--", "sleep", "3600"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Slotctl({"--socket", socket, "run", "--id", "c1", "--mem", "32m", kTestImage, "--", "sleep", "60"});
  EXPECT_EQ(r.exit_code, kConflict) << r.err;
  EXPECT_NE(r.err.find("(HTTP 409)"), std::string::npos) << r.err;

  // More than the agent has: 422.
  r = Slotctl({"--socket", socket, "run", "--cpu", "2", kTestImage, "--", "true"});
  EXPECT_EQ(r.exit_code, kNoRoom) << r.err;
  EXPECT_NE(r.err.find("insufficient cpu: requested 2"), std::string::npos) << r.err;

  // A request the agent refuses as malformed: 400.
  r = Slotctl({"--socket", socket, "run", "--mem", "lots", kTestImage, "--", "true"});
  EXPECT_EQ(r.exit_code, kBadRequest) << r.err;
  EXPECT_NE(r.err.find("resources.mem: invalid size \"lots\""), std::string::npos) << r.err;
  r = Slotctl({"--socket", socket, "logs", "c1", "--tail", "-1"});
  EXPECT_EQ(r.exit_code, kBadRequest) << r.err;

  // TCP without the token, or with another one: 401.
  const std::string tcp = "http://127.0.0.1:" + std::to_string(agent.port());
  r = Slotctl({"--agent", tcp, "kernels"});
  EXPECT_EQ(r.exit_code, kRefused) << r.err;
  EXPECT_NE(r.err.find("(HTTP 401)"), std::string::npos) << r.err;
  TempDir dir;
  WriteFile(dir.path() + "/wrong", "not-the-token\n");
  r = Slotctl({"--agent", tcp, "--token-file", dir.path() + "/wrong", "kernels"});
  EXPECT_EQ(r.exit_code, kRefused) << r.err;
  r = Slotctl({"--agent", tcp, "--token-file", agent.dir() + "/token", "kernels"});
  EXPECT_EQ(r.exit_code, 0) << r.err;

  // rm of several: each is tried, the status is the first failure's.
  r = Slotctl({"--socket", socket, "rm", "nosuch", "c1"});
  EXPECT_EQ(r.exit_code, kNotFound) << r.err;
  EXPECT_NE(r.out.find("removed c1"), std::string::npos) << r.out;
}

TEST(SlotctlExit, AWrongCommandLineIsTwo) {
  // CLI11's own errors: an unknown flag, a missing argument, no subcommand.
  EXPECT_EQ(Slotctl({"--no-such-flag", "kernels"}).exit_code, kUsage);
  EXPECT_EQ(Slotctl({"rm"}).exit_code, kUsage);
  EXPECT_EQ(Slotctl({}).exit_code, kUsage);
  // Values slotctl checks itself, before it talks to any agent.
  const std::string nowhere = "http://127.0.0.1:" + std::to_string(ClosedPort());
  CommandResult r = Slotctl({"--agent", nowhere, "run", "--device", "mock.device=two", kTestImage});
  EXPECT_EQ(r.exit_code, kUsage) << r.err;
  EXPECT_NE(r.err.find("--device mock.device=two: COUNT must be a whole number"), std::string::npos) << r.err;
  r = Slotctl({"--agent", nowhere, "run", "--env", "NOEQUALS", kTestImage});
  EXPECT_EQ(r.exit_code, kUsage) << r.err;
  r = Slotctl({"--agent", nowhere, "top", "--interval", "0s"});
  EXPECT_EQ(r.exit_code, kUsage) << r.err;
  // --help is not an error, and lists the statuses.
  r = Slotctl({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("Exit status:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("9  agent error"), std::string::npos) << r.out;
}

// One command against a canned answer, and what slotctl must say of it.
struct MalformedCase {
  std::vector<std::string> command;  // after --agent URL
  int http_status;
  std::string body;
  int exit_code;
  std::string message;  // a part of stderr
};

TEST(SlotctlExit, AnAnswerSlotctlCannotReadIsNineAndNamesTheField) {
  CannedServer server;
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::vector<MalformedCase> cases = {
      {{"kernels"}, 200, R"({"kernels": {"k1": 1}})", kAgentError, "kernels is an object, expected an array"},
      {{"kernels"}, 200, R"({"kernels": [{"kernel_id": "k1"}]})", kAgentError, "kernels[0].allocations is missing"},
      {{"kernels"},
       200,
       R"({"kernels": [{"kernel_id": "k1", "state": 3, "exit_code": null, "image": "i", "container_id": null,
           "ports": [], "allocations": {"cpu": [0], "mem": 1, "devices": {}}}]})",
       kAgentError,
       "kernels[0].state is a number, expected a string"},
      {{"kernels"},
       200,
       R"({"kernels": [{"kernel_id": "k1", "state": "RUNNING", "exit_code": null, "image": "i", "container_id": null,
           "ports": [], "allocations": {"cpu": [-1], "mem": 1, "devices": {}}}]})",
       kAgentError,
       "kernels[0].allocations.cpu[0] is a number, expected a whole number of 0 or more"},
      {{"--json", "kernels"}, 200, R"({"kernel": []})", kAgentError, "kernels is missing"},
      {{"info"}, 200, "[1, 2]", kAgentError, "the body is an array, expected an object"},
      {{"info"},
       200,
       R"({"id": "a", "node": "n", "version": "v", "pid": 1, "api_address": "x", "unix_socket": "s",
           "port_range": [1], "resources": {}})",
       kAgentError,
       "port_range[1] is missing"},
      {{"info"},
       200,
       R"({"id": "a", "node": "n", "version": "v", "pid": 1, "api_address": "x", "unix_socket": "s",
           "port_range": [1, 2], "resources": {"mem": {"capacity": "lots", "used": 0, "free": 0}}})",
       kAgentError,
       "resources.mem.capacity is a string, expected a whole number of 0 or more"},
      {{"exec", "k1", "--", "true"},
       200,
       R"({"stdout": "", "stderr": "", "exit_code": "0"})",
       kAgentError,
       "exit_code is a string"},
      {{"exec", "k1", "--", "true"}, 200, R"({"stdout": 5})", kAgentError, "stdout is a number, expected a string"},
      {{"rm", "k1"}, 200, R"({"state": "TERMINATED"})", kAgentError, "exit_code is missing"},
      {{"run", "img"}, 201, "not json", kAgentError, "is not JSON"},
      {{"restart", "k1"}, 200, deep, kAgentError, "is not JSON (or nests deeper than 64 levels)"},
      {{"stats"}, 200, R"({"kernels": 5, "agent": {}})", kAgentError, "kernels is a number, expected an array"},
      {{"stats"}, 200, R"({"kernels": ["k1"], "agent": {}})", kAgentError, "kernels[0] is a string, expected an object"},
      {{"stats", "k1"}, 200, "true", kAgentError, "the body is a boolean, expected an object"},
      {{"top", "--iterations", "1"}, 200, R"({"kernels": [], "agent": 1})", kAgentError,
       "agent is a number, expected an object"},
      // Error answers of the wrong form still give the status's exit and a message.
      {{"rm", "k1"}, 404, R"({"error": {"message": 7}})", kNotFound, R"({"error": {"message": 7}} (HTTP 404))"},
      {{"kernels"}, 500, R"({"error": "boom"})", kAgentError, "(HTTP 500)"},
      {{"kernels"}, 503, "", kUnreachable, "no message (HTTP 503)"},
      {{"kernels"}, 413, "", kBadRequest, "(HTTP 413)"},
      {{"kernels"}, 302, "", kAgentError, "(HTTP 302)"},
  };
  for (const MalformedCase& c : cases) {
    server.Answer(c.http_status, c.body);
    std::vector<std::string> args = {"--agent", server.url()};
    args.insert(args.end(), c.command.begin(), c.command.end());
    CommandResult r = Slotctl(args);
    const std::string what = c.command[0] + " answered " + c.body.substr(0, 80);
    EXPECT_EQ(r.exit_code, c.exit_code) << what << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << what << "\nstderr: " << r.err;
    EXPECT_EQ(r.out, "") << what;
    if (c.exit_code == kAgentError && c.http_status < 300) {
      EXPECT_NE(r.err.find("the agent at " + server.url() + " answered "), std::string::npos) << r.err;
    }
  }
  // A kernel id is sent escaped: it can only ever name one kernel.
  server.Answer(404, R"({"error": {"message": "no kernel"}})");
  EXPECT_EQ(Slotctl({"--agent", server.url(), "rm", "a/b?c"}).exit_code, kNotFound);
  EXPECT_EQ(server.last_request(), "DELETE /v1/kernels/a%2Fb%3Fc HTTP/1.1");
}

}  // namespace
}  // namespace slotd::testing
