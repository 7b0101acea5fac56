// The API under clients a well-behaved test would never be: slow, idle,
// many, oversized, or speaking bytes that are not UTF-8. Real slotd
// processes, real containers; raw sockets where a client must misbehave.
#include <signal.h>

#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "integration/harness.h"

namespace slotd::testing {
namespace {

using nlohmann::json;

// A two-core agent with `api_toml` in its [api].
AgentOptions ApiAgent(const std::string& name, const std::string& api_toml = "") {
  AgentOptions o = TwoCoreAgent(name);
  if (!api_toml.empty()) o.extra_toml = "[api]\n" + api_toml;
  return o;
}

// The JSON body of a raw answer (after the blank line).
json BodyOf(const std::string& answer) {
  const size_t blank = answer.find("\r\n\r\n");
  return json::parse(blank == std::string::npos ? "" : answer.substr(blank + 4), nullptr, false);
}

void ExpectJsonError(const HttpResponse& res, long status, const std::string& code) {
  EXPECT_EQ(res.status, status) << res.body;
  const json body = json::parse(res.body, nullptr, false);
  ASSERT_TRUE(body.is_object()) << res.body;
  ASSERT_TRUE(body.contains("error")) << res.body;
  EXPECT_EQ(body["error"]["code"], code) << res.body;
  EXPECT_FALSE(body["error"]["message"].get<std::string>().empty());
}

TEST(Api, SlowHeaderClientsEventStreamsAndLongExecsDoNotStopShortRequests) {
  AgentOptions o = ApiAgent("stall");
  o.token = "t-" + RunTag();
  AgentProcess agent(o);
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel(SleepKernel("k1"));

  // 200 clients that never finish their headers (and send no token).
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < 200; ++i) {
    held.push_back(std::make_unique<RawClient>(agent.port()));
    ASSERT_TRUE(held.back()->connected());
    held.back()->Send("GET /v1/kernels HTTP/1.1\r\nHost: x\r\n");
  }
  // 60 event subscribers on TCP, each answered and left open.
  for (int i = 0; i < 60; ++i) {
    held.push_back(std::make_unique<RawClient>(agent.port()));
    held.back()->Send("GET /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + o.token + "\r\n\r\n");
    EXPECT_EQ(StatusOf(held.back()->Read(std::chrono::seconds(5), nullptr, "\r\n\r\n")), 200);
  }
  // 40 execs that take a while.
  for (int i = 0; i < 40; ++i) {
    held.push_back(std::make_unique<RawClient>(agent.port()));
    const std::string body = R"({"command":["sleep","20"],"timeout_s":60})";
    held.back()->Send("POST /v1/kernels/k1/exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + o.token +
                      "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                      "\r\n\r\n" + body);
  }
  for (int round = 0; round < 5; ++round) {
    EXPECT_EQ(agent.Call("GET", "/health", "", /*tcp=*/true).status, 200);
    EXPECT_EQ(agent.Call("GET", "/v1/kernels", "", /*tcp=*/true, o.token).status, 200);
    EXPECT_EQ(agent.Call("GET", "/health").status, 200);
    EXPECT_EQ(agent.Call("GET", "/v1/kernels").status, 200);
  }
  held.clear();
}

TEST(Api, AClientThatSendsItsRequestTooSlowlyIsCutAtTheRequestTimeout) {
  AgentProcess agent(ApiAgent("slow", "request-timeout = \"500ms\"\n"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  RawClient slow(agent.port());
  ASSERT_TRUE(slow.connected());
  // One byte every 200 ms: never idle long, but never done.
  bool closed = false;
  const std::string request = "GET /health HTTP/1.1\r\nHost: localhost\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
  for (size_t i = 0; i < request.size() && !closed; ++i) {
    if (!slow.Send(request.substr(i, 1))) closed = true;
    slow.Read(std::chrono::milliseconds(200), &closed);
  }
  EXPECT_TRUE(closed) << "the server kept a client that took " << request.size() * 200 << " ms over its headers";

  // An idle connection is closed too.
  RawClient idle(agent.port());
  idle.Read(std::chrono::seconds(5), &closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(agent.Call("GET", "/health", "", /*tcp=*/true).status, 200);
}

TEST(Api, ConnectionsPastTheBoundAreRefusedWith503AndTheUnixSocketStillAnswers) {
  AgentOptions o = ApiAgent("bound", "max-connections = 8\nrequest-timeout = \"60s\"\n");
  o.token = "t-" + RunTag();
  AgentProcess agent(o);
  ASSERT_TRUE(agent.Start()) << agent.log();
  // Eight event streams: every place taken by a connection that is busy, not
  // waiting for a request's headers (those make room, see HostileClient).
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < 8; ++i) {
    held.push_back(std::make_unique<RawClient>(agent.port()));
    held.back()->Send("GET /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + o.token + "\r\n\r\n");
    ASSERT_EQ(StatusOf(held.back()->Read(std::chrono::seconds(10), nullptr, "\r\n\r\n")), 200);
  }
  RawClient ninth(agent.port());
  ASSERT_TRUE(ninth.connected());
  bool closed = false;
  const std::string answer = ninth.Read(std::chrono::seconds(5), &closed);
  EXPECT_EQ(StatusOf(answer), 503) << answer;
  EXPECT_TRUE(closed);
  const json body = BodyOf(answer);
  ASSERT_TRUE(body.is_object()) << answer;
  EXPECT_NE(body["error"]["message"].get<std::string>().find("max-connections"), std::string::npos);
  EXPECT_EQ(agent.Call("GET", "/v1/kernels").status, 200);  // the unix socket has its own bound

  held.clear();  // once clients leave, TCP serves again
  HttpResponse res;
  for (int i = 0; i < 100 && res.status != 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    res = agent.Call("GET", "/health", "", /*tcp=*/true);
  }
  EXPECT_EQ(res.status, 200);
}

TEST(Api, BodiesOverTheLimitAre413AndOversizedFieldsAre400) {
  AgentProcess agent(ApiAgent("body", "max-body-size = \"4k\"\n"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  json big = SleepKernel("big");
  big["labels"] = {{"note", std::string(8000, 'x')}};
  ExpectJsonError(agent.Call("POST", "/v1/kernels", big.dump()), 413, "payload_too_large");
  ExpectJsonError(agent.Call("POST", "/v1/kernels", big.dump(), /*tcp=*/true), 413, "payload_too_large");
  EXPECT_EQ(agent.CallJson("GET", "/v1/kernels", nullptr, 200)["kernels"].size(), 0u);

  // Under the default limit (1 MiB), a label the engine would store twice is still bounded.
  AgentProcess roomy(ApiAgent("fields"));
  ASSERT_TRUE(roomy.Start()) << roomy.log();
  big["labels"] = {{"note", std::string(100'000, 'x')}};
  HttpResponse res = roomy.Call("POST", "/v1/kernels", big.dump());
  ExpectJsonError(res, 400, "invalid_argument");
  EXPECT_NE(res.body.find("labels.note"), std::string::npos) << res.body;
  json env = SleepKernel("env");
  env["env"] = {{"BIG", std::string(40'000, 'y')}};
  ExpectJsonError(roomy.Call("POST", "/v1/kernels", env.dump()), 400, "invalid_argument");
  big["labels"] = {{"note", std::string(2'000'000, 'x')}};
  ExpectJsonError(roomy.Call("POST", "/v1/kernels", big.dump()), 413, "payload_too_large");
}

TEST(Api, EveryErrorAnswerHasTheJsonErrorBody) {
  AgentOptions o = ApiAgent("errors");
  o.token = "t-" + RunTag();
  AgentProcess agent(o);
  ASSERT_TRUE(agent.Start()) << agent.log();
  ExpectJsonError(agent.Call("GET", "/v1/nothing"), 404, "not_found");
  ExpectJsonError(agent.Call("GET", "/v1/kernels/none"), 404, "not_found");
  ExpectJsonError(agent.Call("POST", "/v1/kernels", "{not json"), 400, "invalid_argument");
  ExpectJsonError(agent.Call("GET", "/v1/kernels/" + std::string(9000, 'a')), 414, "uri_too_long");

  // A wrong method names the ones the path takes.
  RawClient raw(agent.socket_path());
  raw.Send("DELETE /v1/agent HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  const std::string answer = raw.Read(std::chrono::seconds(5), nullptr, "}");
  EXPECT_EQ(StatusOf(answer), 405) << answer;
  EXPECT_NE(answer.find("\r\nAllow: GET\r\n"), std::string::npos) << answer;
  EXPECT_EQ(BodyOf(answer)["error"]["code"], "method_not_allowed");
  ExpectJsonError(agent.Call("PUT", "/v1/kernels"), 405, "method_not_allowed");

  // The bearer scheme is case-insensitive; a wrong token is 401 with the body.
  for (const std::string scheme : {"Bearer", "bearer", "BEARER"}) {
    RawClient tcp(agent.port());
    tcp.Send("GET /v1/kernels HTTP/1.1\r\nHost: x\r\nAuthorization: " + scheme + " " + o.token + "\r\n\r\n");
    EXPECT_EQ(StatusOf(tcp.Read(std::chrono::seconds(5), nullptr, "\r\n\r\n")), 200) << scheme;
  }
  ExpectJsonError(agent.Call("GET", "/v1/kernels", "", /*tcp=*/true, o.token + "x"), 401, "unauthorized");
  ExpectJsonError(agent.Call("GET", "/v1/kernels", "", /*tcp=*/true), 401, "unauthorized");
}

TEST(Api, BytesThatAreNotUtf8NeverTurnIntoA500) {
  AgentProcess agent(ApiAgent("bytes"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel({{"kernel_id", "raw"},
                      {"image", kTestImage},
                      {"command", {"sh", "-c", "printf '\\377\\376log\\n'; sleep 3600"}},
                      {"resources", {{"cpu", 1}, {"mem", "32m"}}}});
  HttpResponse res = agent.Call("POST", "/v1/kernels/raw/exec",
                                json{{"command", {"sh", "-c", "printf 'a\\377b'; printf '\\376' >&2; exit 3"}}}.dump());
  ASSERT_EQ(res.status, 200) << res.body;
  const json out = json::parse(res.body);
  EXPECT_EQ(out["exit_code"], 3);
  EXPECT_EQ(out["stdout_base64"], "Yf9i");  // a \377 b
  EXPECT_EQ(out["stderr_base64"], "/g==");  // \376
  EXPECT_EQ(out["stdout"], "a\xEF\xBF\xBD" "b");

  // The logs come as the engine keeps them (its json-file driver stores
  // U+FFFD for such bytes; the local driver keeps them), never as a 500.
  HttpResponse logs;
  for (int i = 0; i < 50 && logs.body.empty(); ++i) {
    logs = agent.Call("GET", "/v1/kernels/raw/logs");
    if (logs.body.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(logs.status, 200);
  EXPECT_TRUE(logs.body.ends_with("log\n")) << logs.body;

  // An id that is not UTF-8 is simply not found.
  ExpectJsonError(agent.Call("GET", "/v1/kernels/%FF%FE"), 404, "not_found");
  ExpectJsonError(agent.Call("DELETE", "/v1/kernels/%FF"), 404, "not_found");
  ExpectJsonError(agent.Call("POST", "/v1/kernels", "{\"kernel_id\":\"\xFF\"}"), 400, "invalid_argument");
}

TEST(Api, LogsFollowStreamsNewOutputUntilTheKernelEnds) {
  AgentProcess agent(ApiAgent("follow"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel({{"kernel_id", "ticker"},
                      {"image", kTestImage},
                      {"command", {"sh", "-c", "for i in 1 2 3; do echo tick$i; sleep 1; done"}},
                      {"resources", {{"cpu", 1}, {"mem", "32m"}}}});
  std::string seen;
  std::atomic<bool> stop{false};
  Status s = HttpClient::Unix(agent.socket_path())
                 .Stream("GET", "/v1/kernels/ticker/logs?follow=1", "", [] {},
                         [&](std::string_view piece) {
                           seen.append(piece);
                           return true;
                         },
                         stop, /*end_is_ok=*/true);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(seen, "tick1\ntick2\ntick3\n");

  CommandResult r = Slotctl({"--socket", agent.socket_path(), "logs", "-f", "--tail", "2", "ticker"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "tick2\ntick3\n");
  ExpectJsonError(agent.Call("GET", "/v1/kernels/ticker/logs?follow=maybe"), 400, "invalid_argument");
  ExpectJsonError(agent.Call("GET", "/v1/kernels/gone/logs?follow=1"), 404, "not_found");
}

TEST(Api, MemoryReturnsToItsBaselineAfterLargeRequests) {
  AgentProcess agent(ApiAgent("memory"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  // Warm up every path once, then take the baseline.
  agent.CreateKernel(SleepKernel("warm"));
  agent.CallJson("DELETE", "/v1/kernels/warm", nullptr, 200);
  const long baseline = ProcStatusField(agent.pid(), "VmRSS");
  ASSERT_GT(baseline, 0);
  json big = SleepKernel("x");
  big["labels"] = {{"note", std::string(900'000, 'x')}};  // refused: over the label limit
  json roomy = SleepKernel("y");
  for (int i = 0; i < 60; ++i) roomy["env"]["V" + std::to_string(i)] = std::string(4000, 'e');  // accepted: 240 KB
  for (int round = 0; round < 5; ++round) {
    EXPECT_EQ(agent.Call("POST", "/v1/kernels", big.dump()).status, 400);
    agent.CreateKernel(roomy);
    agent.CallJson("DELETE", "/v1/kernels/y", nullptr, 200);
  }
  const long after = ProcStatusField(agent.pid(), "VmRSS");
  EXPECT_LT(after - baseline, 8 * 1024) << "RSS grew from " << baseline << " KiB to " << after << " KiB";
}

// A client that makes many calls at once makes the agent make as many engine
// calls at once. Each kept a connection to the engine (and curl's socket pair
// beside it) open for ever after, up to 8 idle ones: 24 descriptors a burst
// left behind. Once the burst has passed they are closed again.
TEST(Api, ABurstOfParallelExecsLeavesNoEngineConnectionsOpen) {
  AgentProcess agent(ApiAgent("burst"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel(SleepKernel("busy"));
  agent.CallJson("POST", "/v1/kernels/busy/exec", {{"command", {"true"}}}, 200);
  // What the agent holds when nothing happens: the idle connections left
  // from the start are closed after a few seconds, the engine probe's kept.
  std::this_thread::sleep_for(std::chrono::seconds(8));
  const std::map<std::string, long> before = OpenFileKinds(agent.pid());

  constexpr int kRounds = 5, kAtOnce = 16;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::jthread> clients;
    for (int i = 0; i < kAtOnce; ++i)
      clients.emplace_back([&] {
        const HttpResponse res = agent.Call("POST", "/v1/kernels/busy/exec", R"({"command":["echo","burst"]})");
        EXPECT_EQ(res.status, 200) << res.body;
      });
  }
  std::map<std::string, long> after;
  auto settled = [&] {
    after = OpenFileKinds(agent.pid());
    return after["socket unix"] <= before.at("socket unix") + 3;  // one kept connection's worth of slack
  };
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!settled() && std::chrono::steady_clock::now() < give_up) std::this_thread::sleep_for(std::chrono::milliseconds(250));
  EXPECT_LE(after["socket unix"], before.at("socket unix") + 3)
      << "30 s after " << kRounds << " bursts of " << kAtOnce << " parallel execs the agent holds more than before: "
      << GrownFileKinds(before, after);
}

}  // namespace
}  // namespace slotd::testing
