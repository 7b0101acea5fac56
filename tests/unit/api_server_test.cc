// ApiServer's handlers against a FakeKernelService, in-process, over its
// unix socket: for every route, what the handler asked the service, what it
// refused before asking, and how it answered the service's errors. One table
// holds a case per route (or more), and a test holds the table to the
// server's own route table, so a route cannot be added without its case.
#include "api/server.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/event_hub.h"
#include "common/http_client.h"
#include "stats/collector.h"
#include "testing/fake_engine.h"
#include "testing/fake_kernel_service.h"
#include "model/image_ref.h"
#include "testing/temp_tree.h"

namespace slotd {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A kernel "id" as the fake keeps it.
Kernel KernelNamed(const std::string& id) {
  Kernel kernel;
  kernel.request.kernel_id = id;
  kernel.request.session_id = id;
  kernel.request.image = ParseImageRef("slotd-test/busybox:latest");
  kernel.request.command = {"sleep", "60"};
  kernel.agent_id = "fake";
  kernel.container_id = "c-" + id;
  return kernel;
}

// An ApiServer on a unix socket of its own, over a FakeKernelService.
class ServedApi {
 public:
  explicit ServedApi(int max_oneshot_execs = 4)
      : dir_("api_server_test"),
        collector_(StatsCollector::Options{.agent_id = "fake"}, [] { return std::vector<StatsTarget>{}; }, engine_,
                   {}),
        server_(service_, hub_, collector_, access_, http::ServerOptions{}, 2, max_oneshot_execs),
        client_(HttpClient::Unix(dir_.root() + "/agent.sock")) {
    const Status bound = server_.Bind("127.0.0.1", 0, dir_.root() + "/agent.sock");
    EXPECT_TRUE(bound.ok()) << bound.message();
    server_.Start();
  }
  ~ServedApi() { server_.Stop(); }

  FakeKernelService& service() { return service_; }
  EventHub& hub() { return hub_; }
  const HttpClient& client() const { return client_; }

  HttpResponse Call(const std::string& method, const std::string& path, const std::string& body = "") {
    Result<HttpResponse> answer = client_.Request(method, path, body, std::chrono::seconds(10));
    EXPECT_TRUE(answer.ok()) << method << " " << path << ": " << answer.status().message();
    return answer.ok() ? *answer : HttpResponse{};
  }

 private:
  TempTree dir_;
  FakeKernelService service_;
  EventHub hub_;
  FakeEngine engine_;
  StatsCollector collector_;
  ApiAccess access_{{}, std::nullopt, {}};  // the unix socket needs no credential
  ApiServer server_;
  HttpClient client_;
};

// The JSON of an answer; null when it is none.
json Body(const HttpResponse& answer) { return json::parse(answer.body, nullptr, false); }

// One exchange with one route: the service set up, the request, and what
// must come of it.
struct Case {
  std::string name;
  std::string route;  // "METHOD /pattern", as ApiServer::Routes() names it
  std::string method, path, body;
  std::function<void(FakeKernelService&)> setup;
  long status;
  std::vector<std::string> calls;  // the service's calls, exactly, in order
  std::function<void(const HttpResponse&)> check;
};

const Status kBusy = Status::Conflict("kernel k1 is being restarted by another call; retry when it is done");

std::vector<Case> Cases() {
  auto with_k1 = [](FakeKernelService& s) { s.Put(KernelNamed("k1")); };
  auto error_is = [](const std::string& code, const std::string& text) {
    return [code, text](const HttpResponse& answer) {
      const json error = Body(answer).value("error", json::object());
      EXPECT_EQ(error.value("code", ""), code) << answer.body;
      EXPECT_THAT(error.value("message", ""), HasSubstr(text)) << answer.body;
    };
  };
  const std::string create = R"({"kernel_id": "k1", "image": "slotd-test/busybox:latest", "command": ["sleep", "60"]})";
  return {
      {"health", "GET /health", "GET", "/health", "", nullptr, 200, {},
       [](const HttpResponse& a) {
         EXPECT_EQ(Body(a)["status"], "ok");
         EXPECT_EQ(Body(a)["agent_id"], "fake");
       }},
      {"health with the engine down", "GET /health", "GET", "/health", "",
       [](FakeKernelService& s) { s.SetEngineKnownDown(true); }, 503, {},
       [](const HttpResponse& a) { EXPECT_EQ(Body(a)["status"], "engine_unreachable"); }},
      {"agent", "GET /v1/agent", "GET", "/v1/agent", "", nullptr, 200, {},
       [](const HttpResponse& a) {
         EXPECT_EQ(Body(a)["id"], "fake");
         EXPECT_EQ(Body(a)["node"], "fakenode");
         EXPECT_EQ(Body(a)["draining"], false);
         EXPECT_EQ(Body(a)["resources"]["cpu"]["capacity"], "2");
       }},
      {"list", "GET /v1/kernels", "GET", "/v1/kernels", "", with_k1, 200, {"ListKernelRecords"},
       [](const HttpResponse& a) {
         ASSERT_EQ(Body(a)["kernels"].size(), 1u) << a.body;
         EXPECT_EQ(Body(a)["kernels"][0]["kernel_id"], "k1");
       }},
      {"list with warm kernels", "GET /v1/kernels", "GET", "/v1/kernels?warm=1", "", nullptr, 200,
       {"ListKernelRecords with-warm"}, nullptr},
      {"list with a bad flag", "GET /v1/kernels", "GET", "/v1/kernels?warm=maybe", "", nullptr, 400, {},
       error_is("invalid_argument", "warm: expected 1, true, 0 or false")},
      {"create", "POST /v1/kernels", "POST", "/v1/kernels", create, nullptr, 201, {"CreateKernel k1"},
       [](const HttpResponse& a) { EXPECT_EQ(Body(a)["kernel_id"], "k1"); }},
      {"create, repeated", "POST /v1/kernels", "POST", "/v1/kernels", create, with_k1, 200, {"CreateKernel k1"},
       nullptr},
      {"create with a bad field", "POST /v1/kernels", "POST", "/v1/kernels",
       R"({"image": "slotd-test/busybox:latest", "resources": {"mem": "lots"}})", nullptr, 400, {},
       error_is("invalid_argument", "resources.mem")},
      {"create with bytes that are not JSON", "POST /v1/kernels", "POST", "/v1/kernels", "{\xff\xfe", nullptr, 400,
       {}, nullptr},
      {"create of an unknown image", "POST /v1/kernels", "POST", "/v1/kernels", create,
       [](FakeKernelService& s) { s.FailNext("CreateKernel", Status::NotFound("image slotd-test/busybox:latest")); },
       400, {"CreateKernel k1"}, error_is("not_found", "image slotd-test/busybox:latest")},
      {"create while draining", "POST /v1/kernels", "POST", "/v1/kernels", create,
       [](FakeKernelService& s) {
         ASSERT_TRUE(s.SetDraining(true).ok());
         s.FailNext("CreateKernel", Status::Unavailable("agent fake is draining"));
       },
       503, {"CreateKernel k1"}, error_is("draining", "agent fake is draining")},
      {"create without room", "POST /v1/kernels", "POST", "/v1/kernels", create,
       [](FakeKernelService& s) { s.FailNext("CreateKernel", Status::ResourceExhausted("cpu: 1 asked, 0 free")); },
       422, {"CreateKernel k1"}, error_is("insufficient_resources", "cpu: 1 asked, 0 free")},
      {"get", "GET /v1/kernels/{id}", "GET", "/v1/kernels/k1", "", with_k1, 200, {"KernelRecord k1"},
       [](const HttpResponse& a) { EXPECT_EQ(Body(a)["container_id"], "c-k1"); }},
      {"get an unknown kernel", "GET /v1/kernels/{id}", "GET", "/v1/kernels/k9", "", with_k1, 404,
       {"KernelRecord k9"}, error_is("not_found", "kernel k9 not found")},
      {"delete", "DELETE /v1/kernels/{id}", "DELETE", "/v1/kernels/k1", "", with_k1, 200, {"DeleteKernel k1"},
       [](const HttpResponse& a) { EXPECT_EQ(Body(a)["kernel_id"], "k1"); }},
      {"delete of a busy kernel", "DELETE /v1/kernels/{id}", "DELETE", "/v1/kernels/k1", "",
       [](FakeKernelService& s) { s.FailNext("DeleteKernel", kBusy); }, 409, {"DeleteKernel k1"},
       error_is("conflict", "being restarted")},
      {"restart", "POST /v1/kernels/{id}/restart", "POST", "/v1/kernels/k1/restart", "", with_k1, 200,
       {"RestartKernel k1"}, nullptr},
      {"restart of an unknown kernel", "POST /v1/kernels/{id}/restart", "POST", "/v1/kernels/k2/restart", "",
       nullptr, 404, {"RestartKernel k2"}, nullptr},
      {"exec", "POST /v1/kernels/{id}/exec", "POST", "/v1/kernels/k1/exec",
       R"({"command": ["echo", "hi"], "timeout_s": 5})",
       [](FakeKernelService& s) {
         s.Put(KernelNamed("k1"));
         s.SetExecResult(ExecResult{.exit_code = 3, .stdout_text = "hi\n", .stderr_text = "\xff"});
       },
       200, {"Exec k1 5s echo hi"},
       [](const HttpResponse& a) {
         EXPECT_EQ(Body(a)["exit_code"], 3);
         EXPECT_EQ(Body(a)["stdout"], "hi\n");
         EXPECT_TRUE(Body(a).contains("stderr_base64")) << a.body;  // not UTF-8: given exactly, as base64
       }},
      {"exec without a command", "POST /v1/kernels/{id}/exec", "POST", "/v1/kernels/k1/exec", R"({"command": []})",
       with_k1, 400, {}, error_is("invalid_argument", "command: required")},
      {"exec with a bad timeout", "POST /v1/kernels/{id}/exec", "POST", "/v1/kernels/k1/exec",
       R"({"command": ["true"], "timeout_s": 0})", with_k1, 400, {}, error_is("invalid_argument", "timeout_s")},
      {"exec's state", "GET /v1/kernels/{id}/exec/{exec}", "GET", "/v1/kernels/k1/exec/e1", "",
       [](FakeKernelService& s) {
         s.Put(KernelNamed("k1"));
         s.SetExecInfo(ExecInfo{.container_id = "c-k1", .running = false, .exit_code = 7});
       },
       200, {"InspectExec k1 e1"},
       [](const HttpResponse& a) {
         EXPECT_EQ(Body(a)["running"], false);
         EXPECT_EQ(Body(a)["exit_code"], 7);
       }},
      {"exec's state, not this kernel's", "GET /v1/kernels/{id}/exec/{exec}", "GET", "/v1/kernels/k1/exec/e1", "",
       [](FakeKernelService& s) { s.FailNext("InspectExec", Status::NotFound("exec e1 is not kernel k1's")); }, 404,
       {"InspectExec k1 e1"}, nullptr},
      {"resize", "POST /v1/kernels/{id}/exec/{exec}/resize", "POST", "/v1/kernels/k1/exec/e1/resize",
       R"({"rows": 40, "cols": 120})", with_k1, 200, {"ResizeExec k1 e1 40x120"},
       [](const HttpResponse& a) { EXPECT_EQ(Body(a), json({{"rows", 40}, {"cols", 120}})); }},
      {"resize past the bound", "POST /v1/kernels/{id}/exec/{exec}/resize", "POST",
       "/v1/kernels/k1/exec/e1/resize", R"({"rows": 40, "cols": 100000})", with_k1, 400, {},
       error_is("invalid_argument", "cols: expected a whole number from 1 to 1000")},
      {"logs", "GET /v1/kernels/{id}/logs", "GET", "/v1/kernels/k1/logs?tail=5", "",
       [](FakeKernelService& s) {
         s.Put(KernelNamed("k1"));
         s.SetLogs({"one\n", "two\n"});
       },
       200, {"StreamLogs k1 tail=5"}, [](const HttpResponse& a) { EXPECT_EQ(a.body, "one\ntwo\n"); }},
      {"logs of an unknown kernel", "GET /v1/kernels/{id}/logs", "GET", "/v1/kernels/k9/logs", "", nullptr, 404,
       {"StreamLogs k9 tail=0"}, nullptr},
      {"logs with a bad tail", "GET /v1/kernels/{id}/logs", "GET", "/v1/kernels/k1/logs?tail=-1", "", with_k1, 400,
       {}, error_is("invalid_argument", "tail")},
      {"a kernel's stats", "GET /v1/kernels/{id}/stats", "GET", "/v1/kernels/k1/stats", "", with_k1, 200,
       {"GetKernel k1"}, [](const HttpResponse& a) { EXPECT_EQ(Body(a)["kernel_id"], "k1") << a.body; }},
      {"an unknown kernel's stats", "GET /v1/kernels/{id}/stats", "GET", "/v1/kernels/k9/stats", "", nullptr, 404,
       {"GetKernel k9"}, nullptr},
      {"stats", "GET /v1/stats", "GET", "/v1/stats", "", nullptr, 200, {},
       [](const HttpResponse& a) { EXPECT_EQ(Body(a)["agent_id"], "fake") << a.body; }},
      {"metrics", "GET /metrics", "GET", "/metrics", "", with_k1, 200, {"ListKernels"},
       [](const HttpResponse& a) { EXPECT_THAT(a.body, HasSubstr("slotd_kernels{")); }},
      {"drain with a deadline", "POST /v1/agent/drain", "POST", "/v1/agent/drain", R"({"deadline": "30m"})",
       nullptr, 200, {"SetDraining drain within=1800000ms"},
       [](const HttpResponse& a) {
         EXPECT_EQ(Body(a)["draining"], true);
         EXPECT_EQ(Body(a)["drain_deadline"], 1'700'000'000 + 1800);
       }},
      {"drain with an unknown field", "POST /v1/agent/drain", "POST", "/v1/agent/drain", R"({"when": "now"})",
       nullptr, 400, {}, error_is("invalid_argument", "when: unknown field; known: deadline")},
      {"drain that cannot be recorded", "POST /v1/agent/drain", "POST", "/v1/agent/drain", "{}",
       [](FakeKernelService& s) { s.FailNext("SetDraining", Status::Unavailable("state.json: disk full")); }, 503,
       {"SetDraining drain"}, error_is("unavailable", "state.json: disk full")},
      {"undrain", "POST /v1/agent/undrain", "POST", "/v1/agent/undrain", "", nullptr, 200, {"SetDraining undrain"},
       [](const HttpResponse& a) { EXPECT_EQ(Body(a)["draining"], false); }},
      {"drain a device", "POST /v1/devices/{id}/drain", "POST", "/v1/devices/gpu0/drain", "", nullptr, 200,
       {"DrainDevice gpu0 drain"},
       [](const HttpResponse& a) {
         EXPECT_EQ(Body(a)["drained"], true);
         EXPECT_EQ(Body(a)["devices"], json({"gpu0"}));
       }},
      {"drain an unknown device", "POST /v1/devices/{id}/drain", "POST", "/v1/devices/gpu9/drain", "",
       [](FakeKernelService& s) { s.FailNext("DrainDevice", Status::NotFound("no device gpu9")); }, 404,
       {"DrainDevice gpu9 drain"}, nullptr},
      {"undrain a device", "POST /v1/devices/{id}/undrain", "POST", "/v1/devices/gpu0/undrain", "", nullptr, 200,
       {"DrainDevice gpu0 undrain"}, [](const HttpResponse& a) { EXPECT_EQ(Body(a)["drained"], false); }},
      {"clear a device", "POST /v1/devices/{id}/clear", "POST", "/v1/devices/gpu0/clear", "", nullptr, 200,
       {"ClearDevice gpu0"}, [](const HttpResponse& a) { EXPECT_EQ(Body(a)["cleared"], true); }},
      {"images", "GET /v1/images", "GET", "/v1/images", "",
       [](FakeKernelService& s) {
         KernelService::NodeImage image;
         image.info.id = "sha256:" + std::string(64, 'b');
         image.info.tags = {"slotd-test/busybox:latest"};
         image.kernel_ids = {"k1"};
         s.SetImages({image});
       },
       200, {"ListImages"},
       [](const HttpResponse& a) {
         ASSERT_EQ(Body(a)["images"].size(), 1u) << a.body;
         EXPECT_EQ(Body(a)["images"][0]["kernels"], json({"k1"}));
         EXPECT_EQ(Body(a)["images"][0]["last_used"], nullptr);
       }},
      {"pull", "POST /v1/images/pull", "POST", "/v1/images/pull", R"({"image": "127.0.0.1:5000/team/torch:2.3"})",
       nullptr, 200, {"PullImage 127.0.0.1:5000/team/torch:2.3"},
       [](const HttpResponse& a) { EXPECT_EQ(Body(a)["tags"], json({"127.0.0.1:5000/team/torch:2.3"})); }},
      {"pull of a malformed reference", "POST /v1/images/pull", "POST", "/v1/images/pull", R"({"image": "A B"})",
       nullptr, 400, {}, error_is("invalid_argument", "image")},
      {"pull that the registry refuses", "POST /v1/images/pull", "POST", "/v1/images/pull",
       R"({"image": "slotd-test/none:1"})",
       [](FakeKernelService& s) { s.FailNext("PullImage", Status::PermissionDenied("registry: unauthorized")); },
       403, {"PullImage slotd-test/none:1"}, nullptr},
  };
}

TEST(ApiServer, EveryRouteAnswersWhatItsServiceSaysAndRefusesBadInputBeforeAskingIt) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name + ": " + c.method + " " + c.path);
    ServedApi api;
    if (c.setup) c.setup(api.service());
    const std::vector<std::string> before = api.service().Calls();
    const HttpResponse answer = api.Call(c.method, c.path, c.body);
    EXPECT_EQ(answer.status, c.status) << answer.body;
    std::vector<std::string> calls = api.service().Calls();
    calls.erase(calls.begin(), calls.begin() + static_cast<std::ptrdiff_t>(before.size()));
    EXPECT_EQ(calls, c.calls);
    if (c.check) c.check(answer);
  }
}

TEST(ApiServer, EveryRouteHasItsCasesInTheTable) {
  std::set<std::string> covered;
  for (const Case& c : Cases()) covered.insert(c.route);
  // A stream that never ends has its own test (EventsStreamWhatTheHubPublishes).
  covered.insert("GET /v1/events");
  std::set<std::string> routes;
  for (const ApiServer::RouteName& route : ApiServer::Routes()) routes.insert(route.method + " " + route.pattern);
  for (const std::string& route : routes) EXPECT_TRUE(covered.count(route)) << route << " has no case";
  for (const std::string& route : covered) EXPECT_TRUE(routes.count(route)) << route << " is no route";
}

TEST(ApiServer, RoutesThatWaitOnAnEngineKnownDownAnswer503AtOnceWithoutAskingTheService) {
  ServedApi api;
  api.service().Put(KernelNamed("k1"));
  api.service().SetEngineKnownDown(true);
  const std::vector<std::string> before = api.service().Calls();
  for (const auto& [method, path] : std::vector<std::pair<std::string, std::string>>{
           {"POST", "/v1/kernels"}, {"DELETE", "/v1/kernels/k1"}, {"POST", "/v1/kernels/k1/exec"},
           {"GET", "/v1/images"}, {"GET", "/v1/kernels/k1/logs"}}) {
    const HttpResponse answer = api.Call(method, path, method == "POST" ? "{}" : "");
    EXPECT_EQ(answer.status, 503) << method << " " << path << ": " << answer.body;
    EXPECT_THAT(answer.body, HasSubstr("does not answer")) << method << " " << path;
  }
  EXPECT_EQ(api.service().Calls(), before);
  // Those answered from memory still are.
  EXPECT_EQ(api.Call("GET", "/v1/kernels/k1").status, 200);
}

TEST(ApiServer, OneShotExecsPastTheBoundAre503AndTheirPlacesComeBack) {
  ServedApi api(/*max_oneshot_execs=*/0);
  api.service().Put(KernelNamed("k1"));
  const HttpResponse refused = api.Call("POST", "/v1/kernels/k1/exec", R"({"command": ["true"]})");
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_THAT(refused.body, HasSubstr("[api] max-oneshot-execs"));
  EXPECT_THAT(api.service().LastExecCommand(), IsEmpty());

  ServedApi one(/*max_oneshot_execs=*/1);
  one.service().Put(KernelNamed("k1"));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(one.Call("POST", "/v1/kernels/k1/exec", R"({"command": ["true"]})").status, 200);
}

TEST(ApiServer, EventsStreamWhatTheHubPublishes) {
  ServedApi api;
  std::atomic<bool> stop{false}, carried{false};
  std::string seen;  // the reader's until it is joined
  std::thread reader([&] {
    const Status streamed = api.client().Stream(
        "GET", "/v1/events", "", [] {},
        [&](std::string_view chunk) {
          seen.append(chunk);
          const bool whole = seen.find("kernel_started") != std::string::npos &&
                             seen.find("\n\n", seen.find("kernel_started")) != std::string::npos;
          if (whole) carried = true;
          return !whole;
        },
        stop);
    EXPECT_TRUE(streamed.ok()) << streamed.message();
  });
  // Published until the stream has subscribed and carried one.
  for (int i = 0; i < 500 && !carried; ++i) {
    api.hub().Publish(EventType::kKernelStarted, {{"kernel_id", "k1"}});
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop = true;
  reader.join();
  EXPECT_TRUE(carried);
  EXPECT_THAT(seen, HasSubstr("event: kernel_started\ndata: "));
}

TEST(ApiServer, AnInteractiveExecRelaysItsTerminalAndEndsWithIt) {
  ServedApi api;
  api.service().Put(KernelNamed("k1"));
  Result<UpgradedConnection> upgraded = api.client().Upgrade(
      "POST", "/v1/kernels/k1/exec", R"({"command": ["sh"], "rows": 30, "cols": 100})", {}, std::chrono::seconds(10));
  ASSERT_TRUE(upgraded.ok()) << upgraded.status().message();
  EXPECT_EQ(upgraded->Header("X-Slotd-Exec-Id"), "exec-tty");
  const int terminal = api.service().TakeTerminalPeer();
  ASSERT_GE(terminal, 0);
  // The command's output reaches the client; the client's input reaches the command.
  ASSERT_EQ(::write(terminal, "prompt$ ", 8), 8);
  std::string got = upgraded->early;
  char buffer[64];
  while (got.size() < 8) {
    const ssize_t n = ::read(upgraded->fd, buffer, sizeof buffer);
    ASSERT_GT(n, 0);
    got.append(buffer, static_cast<size_t>(n));
  }
  EXPECT_EQ(got, "prompt$ ");
  ASSERT_EQ(::write(upgraded->fd, "ls\n", 3), 3);
  const ssize_t n = ::read(terminal, buffer, sizeof buffer);
  EXPECT_EQ(std::string(buffer, static_cast<size_t>(std::max<ssize_t>(n, 0))), "ls\n");
  // The command ends: the client's connection ends, and the agent is told.
  ::close(terminal);
  EXPECT_EQ(::read(upgraded->fd, buffer, sizeof buffer), 0);
  ::close(upgraded->fd);
  for (int i = 0; i < 500; ++i) {
    const std::vector<std::string> calls = api.service().Calls();
    if (!calls.empty() && calls.back() == "InteractiveExecEnded k1") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_THAT(api.service().Calls(), ElementsAre("ExecInteractive k1 30x100 sh", "InteractiveExecEnded k1"));
}

}  // namespace
}  // namespace slotd
