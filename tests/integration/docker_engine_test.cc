// DockerEngine against the real Docker engine at $DOCKER_HOST, with the local
// image slotd-test/busybox:latest. Every container is created with network
// "none", carries this run's label and is force-removed by the fixture, pass
// or fail. The engine under test talks to the engine through an EngineProxy
// (tests/testing), which counts the requests that name each container.
#include "engine/docker/docker_engine.h"
#include "engine/docker/docker_answers.h"

#include <gtest/gtest.h>

#include "testing/collect_output.h"
#include "testing/canned_server.h"
#include "testing/engine_proxy.h"
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

namespace slotd {
namespace {

using namespace std::chrono_literals;
using Code = Status::Code;

constexpr char kImage[] = "slotd-test/busybox:latest";
constexpr char kRunLabel[] = "slotd-test.run";

// Unique per test process, so that parallel or leftover runs never mix.
std::string RunId() {
  static const std::string id =
      std::to_string(getpid()) + "-" +
      std::to_string(std::chrono::system_clock::now().time_since_epoch().count() % 1000000);
  return id;
}

class DockerEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* host = std::getenv("DOCKER_HOST");
    ASSERT_TRUE(host != nullptr && *host != '\0')
        << "DOCKER_HOST is not set: these tests need a running Docker engine, e.g. "
           "DOCKER_HOST=unix:///tmp/dtest/docker.sock (scripts/test starts a private one)";
    proxy_ = std::make_unique<EngineProxy>(host);
    docker_host_ = proxy_->docker_host();
    auto engine = DockerEngine::FromHost(docker_host_);
    ASSERT_TRUE(engine.ok()) << engine.status().message();
    engine_ = std::move(engine).value();
  }

  // Force-removes every container this test created, even after a failure.
  void TearDown() override {
    for (const auto& id : created_) {
      Status s = engine_->Remove(id, /*force=*/true);
      if (!s.ok() && s.code() != Code::kNotFound) ADD_FAILURE() << "cleanup: " << s.message();
    }
  }

  // The whole output StreamLogs gives for the container.
  Result<std::string> Logs(const std::string& id, int tail) {
    return CollectOutput([&](const auto& on_output, const auto& stop) {
      return engine_->StreamLogs(id, tail, /*follow=*/false, [] {}, on_output, stop);
    });
  }

  // A spec with a unique name, this run's label and network "none".
  ContainerSpec Spec(const std::string& suffix, std::vector<std::string> command) {
    ContainerSpec spec;
    spec.name = "slotd-itest-" + RunId() + "-" + suffix;
    spec.image = kImage;
    spec.command = std::move(command);
    spec.labels = {{kRunLabel, RunId()}};
    spec.network_mode = "none";
    return spec;
  }

  // Creates a container and registers it for removal.
  Result<std::string> CreateTracked(const ContainerSpec& spec) {
    auto id = engine_->Create(spec);
    if (id.ok()) created_.push_back(*id);
    return id;
  }

  // Polls Inspect until the container is no longer running (at most 30 s).
  Result<ContainerInfo> WaitUntilStopped(const std::string& id) {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (true) {
      auto info = engine_->Inspect(id);
      if (!info.ok() || !info->running || std::chrono::steady_clock::now() > deadline) return info;
      std::this_thread::sleep_for(50ms);
    }
  }

  std::unique_ptr<EngineProxy> proxy_;  // engine_ talks to the engine through it; it records every request
  std::string docker_host_;             // the proxy's
  std::unique_ptr<DockerEngine> engine_;
  std::vector<std::string> created_;
};

TEST_F(DockerEngineTest, IdentifyNamesTheEngineAndItsVersion) {
  auto identity = engine_->Identify();
  ASSERT_TRUE(identity.ok()) << identity.status().message();
  EXPECT_TRUE(identity->name == "docker" || identity->name == "podman") << identity->name;
  EXPECT_FALSE(identity->version.empty());
  EXPECT_FALSE(identity->api_version.empty());
}

TEST(DockerEngineHost, UnreachableEngineIsUnavailableAndNamesTheSocket) {
  auto engine = DockerEngine::FromHost("unix:///nonexistent/slotd-test/docker.sock");
  ASSERT_TRUE(engine.ok());
  auto version = (*engine)->Identify();
  ASSERT_FALSE(version.ok());
  EXPECT_EQ(version.status().code(), Code::kUnavailable);
  EXPECT_NE(version.status().message().find("/nonexistent/slotd-test/docker.sock"),
            std::string::npos)
      << version.status().message();
}

TEST(DockerEngineHost, RejectsUnknownHostForms) {
  auto engine = DockerEngine::FromHost("ssh://node1");
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), Code::kInvalidArgument);
  EXPECT_NE(engine.status().message().find("ssh://node1"), std::string::npos);
}

TEST_F(DockerEngineTest, CreateThenInspectShowsSettingsAndStartRuns) {
  ContainerSpec spec = Spec("settings", {"sleep", "300"});
  spec.labels["slotd-test.kind"] = "settings";
  spec.env = {"FOO=bar"};
  spec.cpuset_cpus = "0";
  spec.memory_bytes = 64 << 20;
  auto id = CreateTracked(spec);
  ASSERT_TRUE(id.ok()) << id.status().message();

  auto info = engine_->Inspect(*id);
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_EQ(info->id, *id);
  EXPECT_EQ(info->name, spec.name);
  EXPECT_EQ(info->image, testing::AsTheEngineNamesIt(kImage));
  EXPECT_EQ(info->labels.at(kRunLabel), RunId());
  EXPECT_EQ(info->labels.at("slotd-test.kind"), "settings");
  EXPECT_EQ(info->state, "created");
  EXPECT_FALSE(info->running);
  EXPECT_EQ(info->cpuset_cpus, "0");
  EXPECT_EQ(info->memory_bytes, 64 << 20);
  EXPECT_NE(std::find(info->env.begin(), info->env.end(), "FOO=bar"), info->env.end());
  EXPECT_GT(info->created_unix, 1600000000);

  ASSERT_TRUE(engine_->Start(*id).ok());
  EXPECT_TRUE(engine_->Start(*id).ok()) << "starting a running container is OK";
  info = engine_->Inspect(*id);
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_TRUE(info->running);
  EXPECT_EQ(info->state, "running");
  EXPECT_GT(info->pid, 0);
  EXPECT_FALSE(info->started_at.empty());
  // Create (by name), inspect, start x2, inspect: as the engine received them.
  EXPECT_EQ(proxy_->CallsNaming({*id, spec.name}), 5);
}

TEST_F(DockerEngineTest, CreateSendsLimitsPortsAndDeviceRequests) {
  ContainerSpec spec = Spec("hostconfig", {"true"});
  spec.cpu_quota_us = 50000;
  spec.cpu_period_us = 100000;
  spec.memory_bytes = 32 << 20;
  spec.network_mode = "none";
  spec.ports = {{8080, 30123}};
  spec.device_requests = {{"nvidia", {"GPU-1234"}, {"gpu", "compute"}}};
  spec.cdi_devices = {"vendor.com/dev=0"};
  const bool podman = testing::EngineIsPodman();
  if (podman) {
    // Podman ignores device requests: refused, never a container without them.
    auto refused = CreateTracked(spec);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), Code::kFailedPrecondition);
    spec.device_requests.clear();
    spec.cdi_devices.clear();
  }
  auto id = CreateTracked(spec);
  ASSERT_TRUE(id.ok()) << id.status().message();

  // Read back what the engine stored, through the raw API.
  HttpClient http = HttpClient::Unix(docker_host_.substr(std::string("unix://").size()));
  auto raw = http.Request("GET", "/v1.41/containers/" + *id + "/json");
  ASSERT_TRUE(raw.ok()) << raw.status().message();
  ASSERT_EQ(raw->status, 200) << raw->body;
  const auto j = nlohmann::json::parse(raw->body, nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  const auto& host = j["HostConfig"];
  EXPECT_EQ(host["CpuQuota"], 50000);
  EXPECT_EQ(host["CpuPeriod"], 100000);
  EXPECT_EQ(host["Memory"], 32 << 20);
  EXPECT_EQ(host["MemorySwap"], 32 << 20);
  EXPECT_EQ(host["NetworkMode"], "none");
  if (podman) {
    // Podman drops the ports of a container without a network (network
    // none, as every test runs); with a network it binds them.
    EXPECT_EQ(host["PortBindings"], nlohmann::json::object());
    return;
  }
  EXPECT_EQ(host["PortBindings"]["8080/tcp"][0]["HostPort"], "30123");
  EXPECT_TRUE(j["Config"]["ExposedPorts"].contains("8080/tcp"));
  ASSERT_EQ(host["DeviceRequests"].size(), 2u) << host["DeviceRequests"].dump();
  EXPECT_EQ(host["DeviceRequests"][0]["Driver"], "nvidia");
  EXPECT_EQ(host["DeviceRequests"][0]["DeviceIDs"][0], "GPU-1234");
  EXPECT_EQ(host["DeviceRequests"][0]["Capabilities"][0][1], "compute");
  EXPECT_EQ(host["DeviceRequests"][1]["Driver"], "cdi");
  EXPECT_EQ(host["DeviceRequests"][1]["DeviceIDs"][0], "vendor.com/dev=0");
}

TEST_F(DockerEngineTest, ExecSeparatesStreamsAndReportsExitCode) {
  auto id = CreateTracked(Spec("exec", {"sleep", "300"}));
  ASSERT_TRUE(id.ok()) << id.status().message();
  ASSERT_TRUE(engine_->Start(*id).ok());

  auto result = engine_->Exec(*id, {"sh", "-c", "echo out; echo err >&2; exit 3"}, 30s, nullptr, nullptr);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->stdout_text, "out\n");
  EXPECT_EQ(result->stderr_text, "err\n");
  EXPECT_EQ(result->exit_code, 3);

  // Output larger than one frame and than curl's buffer arrives whole.
  auto big = engine_->Exec(
      *id, {"sh", "-c", "i=0; while [ $i -lt 20000 ]; do echo line$i; i=$((i+1)); done"}, 60s, nullptr, nullptr);
  ASSERT_TRUE(big.ok()) << big.status().message();
  EXPECT_EQ(big->exit_code, 0);
  EXPECT_EQ(std::count(big->stdout_text.begin(), big->stdout_text.end(), '\n'), 20000);
  EXPECT_NE(big->stdout_text.find("line19999\n"), std::string::npos);
}

TEST_F(DockerEngineTest, ExecPastTimeoutIsDeadlineExceeded) {
  auto id = CreateTracked(Spec("exectimeout", {"sleep", "300"}));
  ASSERT_TRUE(id.ok()) << id.status().message();
  ASSERT_TRUE(engine_->Start(*id).ok());
  auto result = engine_->Exec(*id, {"sleep", "30"}, 1s, nullptr, nullptr);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), Code::kDeadlineExceeded) << result.status().message();
}

TEST_F(DockerEngineTest, ExecInStoppedContainerIsConflict) {
  auto id = CreateTracked(Spec("execstopped", {"sleep", "300"}));
  ASSERT_TRUE(id.ok()) << id.status().message();
  auto result = engine_->Exec(*id, {"true"}, 10s, nullptr, nullptr);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), Code::kConflict) << result.status().message();
  // Podman: "can only create exec sessions on running containers".
  EXPECT_NE(result.status().message().find(testing::EngineIsPodman() ? "on running containers" : "not running"),
            std::string::npos)
      << result.status().message();
}

TEST_F(DockerEngineTest, LogsReturnOutput) {
  auto id =
      CreateTracked(Spec("logs", {"sh", "-c", "echo one; echo two >&2; sleep 1; echo three"}));
  ASSERT_TRUE(id.ok()) << id.status().message();
  ASSERT_TRUE(engine_->Start(*id).ok());
  auto info = WaitUntilStopped(*id);
  ASSERT_TRUE(info.ok()) << info.status().message();
  ASSERT_FALSE(info->running);
  EXPECT_EQ(info->exit_code, 0);

  auto all = Logs(*id, 0);
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_NE(all->find("one\n"), std::string::npos) << *all;
  EXPECT_NE(all->find("two\n"), std::string::npos) << *all;
  EXPECT_NE(all->find("three\n"), std::string::npos) << *all;
  auto last = Logs(*id, 1);
  ASSERT_TRUE(last.ok()) << last.status().message();
  EXPECT_EQ(*last, "three\n");
}

TEST_F(DockerEngineTest, ListFiltersByLabelOnTheServer) {
  ContainerSpec a = Spec("list-a", {"sleep", "300"});
  a.labels["slotd-test.owner"] = "agent-a-" + RunId();
  ContainerSpec b = Spec("list-b", {"sleep", "300"});
  b.labels["slotd-test.owner"] = "agent-b-" + RunId();
  auto id_a = CreateTracked(a);
  auto id_b = CreateTracked(b);
  ASSERT_TRUE(id_a.ok()) << id_a.status().message();
  ASSERT_TRUE(id_b.ok()) << id_b.status().message();

  auto only_a = engine_->List({"slotd-test.owner=agent-a-" + RunId()});
  ASSERT_TRUE(only_a.ok()) << only_a.status().message();
  ASSERT_EQ(only_a->size(), 1u);
  const ContainerInfo& info = only_a->front();
  EXPECT_EQ(info.id, *id_a);
  EXPECT_EQ(info.name, a.name);
  EXPECT_EQ(info.image, testing::AsTheEngineNamesIt(kImage));
  EXPECT_EQ(info.labels.at("slotd-test.owner"), "agent-a-" + RunId());
  EXPECT_EQ(info.state, "created");
  EXPECT_FALSE(info.running);
  EXPECT_GT(info.created_unix, 1600000000);

  // Every filter must match; a bare key matches any value.
  auto both = engine_->List({std::string(kRunLabel) + "=" + RunId(), "slotd-test.owner"});
  ASSERT_TRUE(both.ok()) << both.status().message();
  EXPECT_EQ(both->size(), 2u);

  ASSERT_TRUE(engine_->Start(*id_b).ok());
  auto only_b = engine_->List({"slotd-test.owner=agent-b-" + RunId()});
  ASSERT_TRUE(only_b.ok()) << only_b.status().message();
  ASSERT_EQ(only_b->size(), 1u);
  EXPECT_EQ(only_b->front().id, *id_b);
  EXPECT_TRUE(only_b->front().running);
  EXPECT_EQ(only_b->front().state, "running");
}

TEST_F(DockerEngineTest, EventStreamDeliversTheAskedActionsOfItsOwnerAndStopsPromptly) {
  const std::string owner = "events-" + RunId();
  std::mutex mu;
  std::condition_variable cv;
  bool connected = false;
  std::vector<EngineEvent> events;  // guarded by mu
  std::atomic<bool> stop{false};

  auto stream = std::async(std::launch::async, [&] {
    return engine_->StreamEvents(
        {"slotd-test.owner=" + owner}, {"start", "die"},
        [&] {
          std::lock_guard<std::mutex> lock(mu);
          connected = true;
          cv.notify_all();
        },
        [&](const EngineEvent& e) {
          std::lock_guard<std::mutex> lock(mu);
          events.push_back(e);
          cv.notify_all();
        },
        stop);
  });
  // Whatever happens below, the stream thread ends before the locals go.
  struct StopOnExit {
    std::atomic<bool>& stop;
    std::future<Status>& stream;
    ~StopOnExit() {
      stop = true;
      if (stream.valid()) stream.wait();
    }
  } stop_on_exit{stop, stream};

  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 30s, [&] { return connected; }))
        << "the event stream never connected";
  }

  ContainerSpec other = Spec("events-other", {"sh", "-c", "exit 0"});
  other.labels["slotd-test.owner"] = "someone-else-" + RunId();
  auto other_id = CreateTracked(other);
  ASSERT_TRUE(other_id.ok()) << other_id.status().message();
  ASSERT_TRUE(engine_->Start(*other_id).ok());

  ContainerSpec mine = Spec("events-mine", {"sh", "-c", "exit 7"});
  mine.labels["slotd-test.owner"] = owner;
  auto id = CreateTracked(mine);
  ASSERT_TRUE(id.ok()) << id.status().message();
  ASSERT_TRUE(engine_->Start(*id).ok());

  auto has = [&](const std::string& action) {
    return std::any_of(events.begin(), events.end(),
                       [&](const EngineEvent& e) { return e.id == *id && e.action == action; });
  };
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 30s, [&] { return has("die"); })) << "no die event";
    EXPECT_TRUE(has("start"));
    EXPECT_FALSE(has("create")) << "an action not asked for";
    for (const EngineEvent& e : events) {
      EXPECT_EQ(e.type, "container");
      EXPECT_EQ(e.id, *id) << "an event of a container with another owner label: " << e.action;
      EXPECT_EQ(e.attributes.at("slotd-test.owner"), owner);
      EXPECT_EQ(e.attributes.at("name"), mine.name);
      EXPECT_GT(e.time_nano, 0);
      if (e.action == "die") {
        EXPECT_EQ(e.attributes.at("exitCode"), "7");
      }
    }
  }

  stop = true;
  ASSERT_EQ(stream.wait_for(5s), std::future_status::ready) << "StreamEvents ignored stop";
  Status s = stream.get();
  EXPECT_TRUE(s.ok()) << s.message();
}

TEST_F(DockerEngineTest, UnknownImageIsNotFoundAndNamesTheImage) {
  ContainerSpec spec = Spec("noimage", {"true"});
  spec.image = "slotd-test/no-such-image:" + RunId();
  auto id = CreateTracked(spec);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), Code::kNotFound) << id.status().message();
  EXPECT_NE(id.status().message().find(spec.image), std::string::npos) << id.status().message();
}

TEST_F(DockerEngineTest, ANameThatWouldLeaveItsPathSegmentNeverReachesTheEngine) {
  const size_t before = proxy_->Requests().size();
  for (const char* image : {"../containers/json", "x/./y", "a//b"}) {
    auto inspected = engine_->InspectImage(image);
    ASSERT_FALSE(inspected.ok()) << image;
    EXPECT_EQ(inspected.status().code(), Code::kInvalidArgument) << inspected.status().message();
  }
  for (const char* exec : {"..", "../../containers/json", ""}) {
    auto inspected = engine_->InspectExec(exec);
    ASSERT_FALSE(inspected.ok()) << exec;
    EXPECT_EQ(inspected.status().code(), Code::kInvalidArgument) << inspected.status().message();
    EXPECT_EQ(engine_->ResizeExec(exec, 5, 5).code(), Code::kInvalidArgument);
  }
  EXPECT_EQ(proxy_->Requests().size(), before);
}

TEST_F(DockerEngineTest, AnEngineRefusalWithA4xxIsTheCallersErrorNeverInternal) {
  // The engine's own 400 for a reference that its grammar refuses; Podman
  // has no such route at all, which is said as such.
  auto digest = engine_->RegistryDigest("127.0.0.1:1/UPPER", "");
  ASSERT_FALSE(digest.ok());
  EXPECT_EQ(digest.status().code(), testing::EngineIsPodman() ? Code::kFailedPrecondition : Code::kInvalidArgument)
      << digest.status().message();
}

TEST_F(DockerEngineTest, DuplicateNameIsConflict) {
  ContainerSpec spec = Spec("dup", {"true"});
  auto first = CreateTracked(spec);
  ASSERT_TRUE(first.ok()) << first.status().message();
  auto second = CreateTracked(spec);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Code::kConflict) << second.status().message();
  EXPECT_NE(second.status().message().find(spec.name), std::string::npos)
      << second.status().message();
}

TEST_F(DockerEngineTest, KillThenRemove) {
  auto id = CreateTracked(Spec("kill", {"sleep", "300"}));
  ASSERT_TRUE(id.ok()) << id.status().message();
  ASSERT_TRUE(engine_->Start(*id).ok());

  Status killed = engine_->Kill(*id);
  ASSERT_TRUE(killed.ok()) << killed.message();
  auto info = WaitUntilStopped(*id);
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_FALSE(info->running);
  EXPECT_EQ(info->state, "exited");
  EXPECT_EQ(info->exit_code, 137);
  EXPECT_FALSE(info->finished_at.empty());
  EXPECT_EQ(engine_->Kill(*id).code(), Code::kConflict) << "killing a stopped container";

  Status removed = engine_->Remove(*id, /*force=*/false);
  ASSERT_TRUE(removed.ok()) << removed.message();
  EXPECT_EQ(engine_->Inspect(*id).status().code(), Code::kNotFound);
  EXPECT_EQ(engine_->Remove(*id, true).code(), Code::kNotFound);
}

TEST_F(DockerEngineTest, ForceRemoveOfRunningContainer) {
  auto id = CreateTracked(Spec("forcerm", {"sleep", "300"}));
  ASSERT_TRUE(id.ok()) << id.status().message();
  ASSERT_TRUE(engine_->Start(*id).ok());
  Status refused = engine_->Remove(*id, /*force=*/false);
  EXPECT_EQ(refused.code(), Code::kConflict) << refused.message();
  Status removed = engine_->Remove(*id, /*force=*/true);
  ASSERT_TRUE(removed.ok()) << removed.message();
  EXPECT_EQ(engine_->Inspect(*id).status().code(), Code::kNotFound);
}

TEST_F(DockerEngineTest, StopOfStoppedIsOkAndRestartRunsAgain) {
  auto id = CreateTracked(Spec("stop", {"sleep", "300"}));
  ASSERT_TRUE(id.ok()) << id.status().message();
  EXPECT_TRUE(engine_->Stop(*id, 1s).ok()) << "stopping a never-started container";
  ASSERT_TRUE(engine_->Start(*id).ok());
  Status stopped = engine_->Stop(*id, 1s);
  ASSERT_TRUE(stopped.ok()) << stopped.message();
  Status again = engine_->Stop(*id, 1s);
  EXPECT_TRUE(again.ok()) << again.message();
  auto info = engine_->Inspect(*id);
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_FALSE(info->running);

  Status restarted = engine_->Restart(*id, 1s);
  ASSERT_TRUE(restarted.ok()) << restarted.message();
  info = engine_->Inspect(*id);
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_TRUE(info->running);
}

TEST_F(DockerEngineTest, CallsOnUnknownContainerAreNotFound) {
  const std::string id = "slotd-itest-missing-" + RunId();
  EXPECT_EQ(engine_->Inspect(id).status().code(), Code::kNotFound);
  EXPECT_EQ(engine_->Start(id).code(), Code::kNotFound);
  EXPECT_EQ(Logs(id, 0).status().code(), Code::kNotFound);
  EXPECT_EQ(proxy_->CallsNaming({id}), 3);
}

// One frame of a Docker multiplexed stream.
std::string Frame(char stream, const std::string& payload) {
  std::string header(8, '\0');
  header[0] = stream;
  header[7] = static_cast<char>(payload.size());  // payloads here stay below 256 bytes
  return header + payload;
}

TEST(DockerStream, DemultiplexesFramesAndRejectsTruncation) {
  const std::string stream = Frame(1, "out") + Frame(2, "err!") + Frame(1, "");
  std::string out, err;
  ASSERT_TRUE(DemultiplexDockerStream(stream, out, err).ok());
  EXPECT_EQ(out, "out");
  EXPECT_EQ(err, "err!");

  std::string both;
  ASSERT_TRUE(DemultiplexDockerStream(stream, both, both).ok());
  EXPECT_EQ(both, "outerr!");

  EXPECT_FALSE(DemultiplexDockerStream(stream.substr(0, 9), out, err).ok());
  EXPECT_FALSE(DemultiplexDockerStream("plain text, no frames", out, err).ok());
}

// What an engine sends is untrusted: an event stream whose "line" never
// ends is cut at a bound (and reconnected by the watcher), not buffered for
// as long as the engine sends it.
TEST(DockerEngineBounds, AnEventLineWithoutEndIsCutNotBufferedForever) {
  testing::CannedServer server;
  server.Answer(200, std::string(3u << 20, 'x'));
  auto engine = DockerEngine::FromHost("tcp://" + server.url().substr(std::string("http://").size()));
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  std::atomic<bool> stop{false};
  int events = 0;
  const Status s = (*engine)->StreamEvents({}, {}, [] {}, [&](const EngineEvent&) { ++events; }, stop);
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_NE(s.message().find("without a line break"), std::string::npos) << s.message();
  EXPECT_EQ(events, 0);
}

}  // namespace
}  // namespace slotd
