// Clients of the API that mean harm: bad names that would reach other engine
// routes, bodies sent before a token, floods of interactive sessions, output
// that grows when escaped, clients that never read or vanish. Real slotd
// processes, real containers; raw sockets where a client must misbehave.
#include <signal.h>

#include <filesystem>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "integration/harness.h"
#include "testing/eventually.h"

namespace slotd::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// A two-core agent with `api_toml` in its [api].
AgentOptions Options(const std::string& name, const std::string& api_toml = "") {
  AgentOptions o = TwoCoreAgent(name);
  if (!api_toml.empty()) o.extra_toml = "[api]\n" + api_toml;
  return o;
}

// The message of a JSON error answer; "" when it is none.
std::string ErrorMessage(const HttpResponse& res) {
  const json body = json::parse(res.body, nullptr, false);
  if (!body.is_object() || !body.contains("error") || !body["error"].is_object()) return "";
  return body["error"].value("message", "");
}

// A raw request for `path` with a JSON `body`, as bytes.
std::string RawRequest(const std::string& method, const std::string& path, const std::string& body,
                       const std::string& extra_headers = "") {
  return method + " " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra_headers +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// An interactive exec of `command` in `kernel`, on the unix socket: the
// client after the agent's answer, and that answer's head in `head`.
std::unique_ptr<RawClient> OpenTerminal(const AgentProcess& agent, const std::string& kernel,
                                        const std::vector<std::string>& command, std::string* head) {
  auto client = std::make_unique<RawClient>(agent.socket_path());
  client->Send(RawRequest("POST", "/v1/kernels/" + kernel + "/exec", json{{"command", command}}.dump(),
                          "Connection: Upgrade\r\nUpgrade: tcp\r\n"));
  *head = client->Read(30s, nullptr, "\r\n\r\n");
  return client;
}

TEST(HostileClient, InvalidImageReferencesAre400OnEveryRouteNever500) {
  AgentProcess agent(Options("badref"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  for (const std::string bad : {"127.0.0.1:5055/", "BUSYBOX", "slotd-test/Busybox", "busy box", "../containers/x"}) {
    const HttpResponse pulled = agent.Call("POST", "/v1/images/pull", json{{"image", bad}}.dump());
    EXPECT_EQ(pulled.status, 400) << bad << ": " << pulled.body;
    EXPECT_NE(ErrorMessage(pulled).find("image: "), std::string::npos) << pulled.body;
    json create = SleepKernel("k-bad", "64m");
    create["image"] = bad;
    create["pull"] = "digest";
    const HttpResponse created = agent.Call("POST", "/v1/kernels", create.dump());
    EXPECT_EQ(created.status, 400) << bad << ": " << created.body;
    EXPECT_NE(ErrorMessage(created).find("is not an image reference"), std::string::npos) << created.body;
  }
}

TEST(HostileClient, ADuplicateKeyInARequestBodyIs400NamingTheKey) {
  AgentProcess agent(Options("dupkey"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  const HttpResponse top = agent.Call(
      "POST", "/v1/kernels", R"({"kernel_id":"k1","image":"slotd-test/busybox:latest","image":"other/image"})");
  EXPECT_EQ(top.status, 400) << top.body;
  EXPECT_NE(ErrorMessage(top).find("image: given twice"), std::string::npos) << top.body;
  const HttpResponse nested = agent.Call(
      "POST", "/v1/kernels",
      R"({"kernel_id":"k1","image":"slotd-test/busybox:latest","resources":{"cpu":1,"mem":"32m","cpu":2}})");
  EXPECT_EQ(nested.status, 400) << nested.body;
  EXPECT_NE(ErrorMessage(nested).find("resources.cpu: given twice"), std::string::npos) << nested.body;
  EXPECT_EQ(agent.CallJson("GET", "/v1/kernels", nullptr, 200)["kernels"].size(), 0u);
}

TEST(HostileClient, ExecIdsAndImageNamesNeverReachAnotherEngineRoute) {
  AgentProcess agent(Options("routes"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel(SleepKernel("k1", "64m"));
  for (const std::string exec : {"..%2f..%2fcontainers%2fjson", "%2e%2e", "a%2fb", "x%00y"}) {
    const HttpResponse res = agent.Call("GET", "/v1/kernels/k1/exec/" + exec);
    EXPECT_EQ(res.status, 400) << exec << ": " << res.body;
    EXPECT_NE(ErrorMessage(res).find("exec id"), std::string::npos) << res.body;
    const HttpResponse resized = agent.Call("POST", "/v1/kernels/k1/exec/" + exec + "/resize", R"({"rows":5,"cols":5})");
    EXPECT_EQ(resized.status, 400) << exec << ": " << resized.body;
  }
  const std::string container = agent.CallJson("GET", "/v1/kernels/k1", nullptr, 200)["container_id"];
  const HttpResponse pulled = agent.Call("POST", "/v1/images/pull", json{{"image", "../containers/" + container}}.dump());
  EXPECT_EQ(pulled.status, 400) << pulled.body;
}

TEST(HostileClient, AnUnauthenticatedRequestIsRefusedWith401BeforeItsBodyIsRead) {
  AgentOptions o = Options("early401", "request-timeout = \"120s\"\n");
  o.token = "t-" + RunTag();
  AgentProcess agent(o);
  ASSERT_TRUE(agent.Start()) << agent.log();
  // Headers that announce a body of almost 1 MiB, and no byte of it: a server
  // that read the body first would wait for it until the request timeout.
  for (const std::string auth : {"", "Authorization: Bearer wrong\r\n"}) {
    RawClient client(agent.port());
    ASSERT_TRUE(client.connected());
    client.Send("POST /v1/kernels HTTP/1.1\r\nHost: x\r\n" + auth +
                "Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{\"image\":");
    bool closed = false;
    const std::string answer = client.Read(60s, &closed, "\r\n\r\n");
    EXPECT_EQ(StatusOf(answer), 401) << "no answer before the body came: " << answer;
  }
  // With the token, the same request waits for its body, then is served.
  RawClient good(agent.port());
  const std::string body = SleepKernel("k1", "64m").dump();
  good.Send(RawRequest("POST", "/v1/kernels", body, "Authorization: Bearer " + o.token + "\r\n"));
  EXPECT_EQ(StatusOf(good.Read(60s, nullptr, "\r\n\r\n")), 201);
}

TEST(HostileClient, AFloodOfUnfinishedHeadersLocksNoTokenHolderOut) {
  AgentOptions o = Options("flood", "request-timeout = \"120s\"\n");
  o.token = "t-" + RunTag();
  AgentProcess agent(o);
  ASSERT_TRUE(agent.Start()) << agent.log();
  // Connections that each send part of a request's headers, no token, and
  // wait: with the default max-connections (1024) and a request timeout of
  // two minutes, enough to hold every place of the TCP listener.
  std::vector<std::unique_ptr<RawClient>> flood;
  auto open_flood = [&](int count, std::vector<std::string> from) {
    for (int i = 0; i < count; ++i) {
      flood.push_back(std::make_unique<RawClient>(agent.port(), from[i % from.size()]));
      ASSERT_TRUE(flood.back()->connected()) << "flood connection " << flood.size();
      flood.back()->Send("GET /v1/kernels HTTP/1.1\r\nHost: x\r\nX-Padding: aaaa");
    }
  };
  // The token holder, from the flood's own address and from another, and
  // a client of the unix socket: each answered, within a generous bound.
  auto expect_served = [&](const std::string& when) {
    for (const std::string from : {"127.0.0.1", "127.0.0.2"}) {
      RawClient holder(agent.port(), from);
      ASSERT_TRUE(holder.connected()) << when;
      holder.Send("GET /v1/kernels HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + o.token +
                  "\r\nConnection: close\r\n\r\n");
      const std::string answer = holder.Read(30s, nullptr, "\r\n\r\n");
      EXPECT_EQ(StatusOf(answer), 200) << when << ", the token holder on " << from << " got: " << answer;
    }
    EXPECT_EQ(agent.Call("GET", "/v1/kernels").status, 200) << when;
  };
  open_flood(1100, {"127.0.0.1"});
  expect_served("after 1,100 unfinished requests from 127.0.0.1");
  // 1,000 more, spread over four addresses: under each address's share (a
  // quarter of max-connections), past the listener's bound together.
  open_flood(1000, {"127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6"});
  expect_served("after 1,000 more from four addresses");
}

TEST(HostileClient, InteractiveExecsPastMaxExecSessionsAre503AndAPlaceFreesWhenOneEnds) {
  AgentProcess agent(Options("sessions", "max-exec-sessions = 3\n"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel(SleepKernel("k1", "64m"));
  std::vector<std::unique_ptr<RawClient>> open;
  for (int i = 0; i < 3; ++i) {
    std::string head;
    open.push_back(OpenTerminal(agent, "k1", {"sh"}, &head));
    ASSERT_EQ(StatusOf(head), 101) << head;
  }
  std::string head;
  auto refused = OpenTerminal(agent, "k1", {"sh"}, &head);
  EXPECT_EQ(StatusOf(head), 503) << head;
  if (head.find("}}") == std::string::npos) head += refused->Read(10s, nullptr, "}}");
  EXPECT_NE(head.find("max-exec-sessions"), std::string::npos) << head;
  EXPECT_EQ(agent.Call("GET", "/health").status, 200);
  EXPECT_EQ(agent.CallJson("POST", "/v1/kernels/k1/exec", json{{"command", {"true"}}}, 200)["exit_code"], 0);

  open.front()->Send("exit\n");
  open.erase(open.begin());
  EXPECT_TRUE(Eventually([&] {
    std::string again;
    auto client = OpenTerminal(agent, "k1", {"sh"}, &again);
    if (StatusOf(again) != 101) return false;
    open.push_back(std::move(client));
    return true;
  }, 30s));
}

TEST(HostileClient, AnExecPrintingMegabytesThatNeedEscapesGetsABoundedAnswerFlaggedTruncated) {
  AgentProcess agent(Options("amplify"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel(SleepKernel("k1", "64m"));
  // 17 MB of NUL bytes: each is six bytes of JSON ("\u0000").
  const HttpResponse res = agent.Call("POST", "/v1/kernels/k1/exec",
                                      json{{"command", {"head", "-c", "17000000", "/dev/zero"}}}.dump());
  ASSERT_EQ(res.status, 200) << res.body.substr(0, 500);
  EXPECT_LT(res.body.size(), 8u << 20) << "an answer of " << res.body.size() << " bytes";
  const json body = json::parse(res.body, nullptr, false);
  ASSERT_TRUE(body.is_object());
  EXPECT_EQ(body["exit_code"], 0);
  EXPECT_EQ(body.value("stdout_truncated", false), true);
  EXPECT_EQ(body["stdout"].get<std::string>().size(), 1u << 20);
}

// How many processes named `name` run in kernel `kernel` (busybox ps), or -1.
int ProcessesNamed(const AgentProcess& agent, const std::string& kernel, const std::string& name) {
  const HttpResponse res =
      agent.Call("POST", "/v1/kernels/" + kernel + "/exec", json{{"command", {"ps", "-o", "comm"}}}.dump());
  const json body = json::parse(res.body, nullptr, false);
  if (res.status != 200 || !body.is_object()) return -1;
  int count = 0;
  const std::string out = body.value("stdout", "");
  for (size_t at = 0; at < out.size();) {
    const size_t end = std::min(out.find('\n', at), out.size());
    if (out.substr(at, end - at) == name) ++count;
    at = end + 1;
  }
  return count;
}

TEST(HostileClient, AnInteractiveExecWhoseClientClosesResetsOrHalfClosesLeavesNoProcessBehind) {
  AgentProcess agent(Options("leftover"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel(SleepKernel("k1", "64m"));
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < 6; ++i) {
    std::string head;
    clients.push_back(OpenTerminal(agent, "k1", {"sh"}, &head));
    ASSERT_EQ(StatusOf(head), 101) << head;
  }
  ASSERT_TRUE(Eventually([&] { return ProcessesNamed(agent, "k1", "sh") == 6; }, 30s))
      << ProcessesNamed(agent, "k1", "sh");
  clients[0]->ShutdownSend();
  clients[1]->ShutdownSend();
  clients[2]->Reset();
  clients[3]->Reset();
  clients.resize(2);  // 4 and 5 close in order; 0 and 1 stay half-closed, still reading
  EXPECT_TRUE(Eventually([&] { return ProcessesNamed(agent, "k1", "sh") == 0; }, 60s))
      << ProcessesNamed(agent, "k1", "sh") << " sh left in the kernel\n" << agent.log();
}

// How many entries /proc/<pid>/`what` has ("task": threads, "fd": open descriptors).
int ProcEntries(pid_t pid, const std::string& what) {
  std::error_code ec;
  int n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/" + what, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

// How many processes of `container` run exactly `args` (busybox ps), asked of
// the engine itself: the agent may be at its bound of execs. -1 when unknown.
int ProcessesRunning(const std::string& container, const std::string& args) {
  auto listed = Engine().Exec(container, {"ps", "-o", "args"}, 10s, nullptr, nullptr);
  if (!listed.ok() || listed->exit_code != 0) return -1;
  int count = 0;
  const std::string& out = listed->stdout_text;
  for (size_t at = 0; at < out.size();) {
    const size_t end = std::min(out.find('\n', at), out.size());
    std::string line = out.substr(at, end - at);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    if (line == args) ++count;
    at = end + 1;
  }
  return count;
}

// The finding: 300 one-shot execs whose clients left after 3 s held 300
// threads and 1,200 descriptors of the agent, and their commands, for their
// whole timeout_s. A one-shot exec whose client goes away now ends its wait
// and its command, and one-shot execs are bounded as interactive ones are.
TEST(HostileClient, OneShotExecsWhoseClientsLeaveEndTheirCommandsAndHoldNothingAndOnePastTheBoundIs503) {
  constexpr int kExecs = 24;
  AgentProcess agent(Options("abandoned", "max-oneshot-execs = " + std::to_string(kExecs) + "\n"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  const std::string container = agent.CreateKernel(SleepKernel("k1", "64m"))["container_id"];
  // What the agent holds at rest, after execs have warmed its engine connections.
  std::vector<std::future<std::string>> warming;
  for (int i = 0; i < 8; ++i)
    warming.push_back(std::async(std::launch::async, [&] { return RunIn(agent, "k1", "true"); }));
  for (auto& done : warming) done.get();
  const int threads_before = ProcEntries(agent.pid(), "task");
  const int fds_before = ProcEntries(agent.pid(), "fd");

  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < kExecs; ++i) {
    clients.push_back(std::make_unique<RawClient>(agent.socket_path()));
    ASSERT_TRUE(clients.back()->Send(RawRequest(
        "POST", "/v1/kernels/k1/exec", json{{"command", {"sleep", "60"}}, {"timeout_s", 600}}.dump())));
  }
  ASSERT_TRUE(Eventually([&] {
    if (ProcessesRunning(container, "sleep 60") == kExecs) return true;
    std::this_thread::sleep_for(200ms);
    return false;
  }, 60s)) << ProcessesRunning(container, "sleep 60") << " of " << kExecs << " execs run\n" << agent.log();
  const int threads_held = ProcEntries(agent.pid(), "task");
  const int fds_held = ProcEntries(agent.pid(), "fd");
  RecordProperty("threads", std::to_string(threads_before) + " at rest, " + std::to_string(threads_held) +
                                " with the execs");
  RecordProperty("fds", std::to_string(fds_before) + " at rest, " + std::to_string(fds_held) + " with the execs");

  // One more is refused before any command starts, saying which bound.
  const HttpResponse refused = agent.Call("POST", "/v1/kernels/k1/exec", json{{"command", {"true"}}}.dump());
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_NE(ErrorMessage(refused).find("[api] max-oneshot-execs"), std::string::npos) << refused.body;

  // The clients go: half of them close, half reset.
  for (size_t i = 0; i < clients.size(); ++i)
    if (i % 2 == 1) clients[i]->Reset();
  clients.clear();
  EXPECT_TRUE(Eventually([&] {
    if (ProcessesRunning(container, "sleep 60") == 0) return true;
    std::this_thread::sleep_for(200ms);
    return false;
  }, 40s)) << ProcessesRunning(container, "sleep 60") << " commands left running\n" << agent.log();
  // Their threads and descriptors are given back; a few of the engine's
  // connections may stay open for later calls.
  EXPECT_TRUE(Eventually([&] { return ProcEntries(agent.pid(), "task") <= threads_before + 2; }, 30s))
      << ProcEntries(agent.pid(), "task") << " threads; " << threads_before << " at rest, " << threads_held
      << " with the execs";
  EXPECT_TRUE(Eventually([&] { return ProcEntries(agent.pid(), "fd") <= fds_before + 8; }, 30s))
      << ProcEntries(agent.pid(), "fd") << " descriptors; " << fds_before << " at rest, " << fds_held
      << " with the execs";
  EXPECT_EQ(agent.CallJson("POST", "/v1/kernels/k1/exec", json{{"command", {"true"}}}, 200)["exit_code"], 0);
}

TEST(HostileClient, SigtermEndsTheAgentWhileInteractiveClientsNeverRead) {
  AgentProcess agent(Options("noreader"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel(SleepKernel("k1", "64m"));
  // Three terminals that print without end to clients that never read: the
  // agent's writes to them fill the sockets and wait.
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < 3; ++i) {
    std::string head;
    clients.push_back(OpenTerminal(agent, "k1", {"sh", "-c", "while :; do cat /proc/self/maps; done"}, &head));
    ASSERT_EQ(StatusOf(head), 101) << head;
  }
  const pid_t pid = agent.pid();
  auto stopped = std::async(std::launch::async, [&agent] { agent.Kill(SIGTERM); });
  const bool exited = stopped.wait_for(60s) == std::future_status::ready;
  EXPECT_TRUE(exited) << "the agent did not end on SIGTERM while its interactive clients never read\n" << agent.log();
  if (!exited) ::kill(pid, SIGKILL);
  stopped.wait();
  if (exited) {
    EXPECT_EQ(agent.exit_code(), 0) << agent.log();
  }
}

}  // namespace
}  // namespace slotd::testing
