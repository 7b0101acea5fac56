// Warm pools: which creates a pool serves (a table of cases), how the
// [[pool]] entries are read as requests, and the records of given kernels.
#include "agent/warm_pool.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "model/create_request.h"
#include "node/check.h"
#include "testing/fake_engine.h"
#include "testing/temp_tree.h"

namespace slotd {
namespace {

using nlohmann::json;

// Config with one pool "small": busybox, sleep 3600, 250m, 64m.
Config PoolConfigOf(std::vector<PoolConfig> pools) {
  Config config;
  config.path = "/etc/slotd/a1.toml";
  config.pools = std::move(pools);
  return config;
}

PoolConfig Small() {
  PoolConfig pool;
  pool.name = "small";
  pool.image = "busybox:latest";
  pool.command = {"sleep", "3600"};
  pool.cpu = "250m";
  pool.mem = 64ull << 20;
  pool.count = 2;
  return pool;
}

// A create request from its API body.
CreateRequest Request(const json& body) {
  Result<CreateRequest> request = ParseCreateRequest(body);
  EXPECT_TRUE(request.ok()) << request.status().message();
  return request.ok() ? *request : CreateRequest{};
}

TEST(WarmPoolTest, APoolsShapeIsReadAsARequestWouldBe) {
  Result<std::vector<WarmPool>> pools = WarmPoolsOf(PoolConfigOf({Small()}));
  ASSERT_TRUE(pools.ok()) << pools.status().message();
  ASSERT_EQ(pools->size(), 1u);
  const WarmPool& pool = pools->front();
  EXPECT_EQ(pool.count, 2);
  EXPECT_EQ(pool.shape.resources,
            Request({{"image", "busybox"}, {"resources", {{"cpu", "250m"}, {"mem", "64m"}}}}).resources);
  EXPECT_EQ(pool.shape.resources.shared_cpu_millis, 250);
  EXPECT_EQ(pool.shape.command, (std::vector<std::string>{"sleep", "3600"}));

  PoolConfig whole = Small();
  whole.cpu = "2";
  EXPECT_EQ(WarmPoolsOf(PoolConfigOf({whole}))->front().shape.resources.cpu, 2);
  PoolConfig fraction = Small();
  fraction.cpu = "0.5";
  EXPECT_EQ(WarmPoolsOf(PoolConfigOf({fraction}))->front().shape.resources.shared_cpu_millis, 500);
}

TEST(WarmPoolTest, AShapeNoRequestCouldAskForAndANameGivenTwiceAreRefused) {
  PoolConfig tiny = Small();
  tiny.cpu = "1m";
  Result<std::vector<WarmPool>> refused = WarmPoolsOf(PoolConfigOf({tiny}));
  ASSERT_EQ(refused.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("[[pool]] \"small\" in /etc/slotd/a1.toml: resources.cpu"),
            std::string::npos)
      << refused.status().message();
  // Text that is not a number is the request parser's to refuse, never a throw.
  for (const char* cpu : {"1.2.3", "99999999999999999999999", "", "."}) {
    PoolConfig odd = Small();
    odd.cpu = cpu;
    Result<std::vector<WarmPool>> read = WarmPoolsOf(PoolConfigOf({odd}));
    EXPECT_EQ(read.status().code(), Status::Code::kInvalidArgument) << cpu;
  }
  PoolConfig device = Small();
  device.devices = {{"nonsense", 1}};
  EXPECT_FALSE(WarmPoolsOf(PoolConfigOf({device})).ok());
  Result<std::vector<WarmPool>> twice = WarmPoolsOf(PoolConfigOf({Small(), Small()}));
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("is given twice"), std::string::npos) << twice.status().message();
}

TEST(WarmPoolTest, ACreateIsServedOnlyWhenItAsksForExactlyThePoolsKernel) {
  const WarmPool pool = WarmPoolsOf(PoolConfigOf({Small()}))->front();
  const json base = {{"image", "busybox:latest"},
                     {"command", {"sleep", "3600"}},
                     {"resources", {{"cpu", 0.25}, {"mem", "64m"}}},
                     {"session_id", "s1"},
                     {"labels", {{"team", "a"}}},
                     {"max_lifetime", "1h"},
                     {"restart", {{"policy", "on-failure"}}}};
  struct Case {
    const char* what;
    json change;  // merged into base; null values remove the field
    bool served;
  };
  const std::vector<Case> cases = {
      {"the pool's kernel, with a session, labels and policies of its own", json::object(), true},
      {"its kernel id chosen by the client", {{"kernel_id", "mine"}}, false},
      {"another image", {{"image", "busybox:1.36"}}, false},
      {"another command", {{"command", {"sleep", "60"}}}, false},
      {"the image's command", {{"command", nullptr}}, false},
      {"more memory", {{"resources", {{"cpu", 0.25}, {"mem", "128m"}}}}, false},
      {"exclusive cores", {{"resources", {{"cpu", 1}, {"mem", "64m"}}}}, false},
      {"env", {{"env", {{"A", "1"}}}}, false},
      {"a stop signal", {{"stop_signal", "SIGINT"}}, false},
      {"a stop timeout", {{"stop_timeout", "5s"}}, false},
      {"a pull policy", {{"pull", "tag"}}, false},
  };
  for (const Case& c : cases) {
    json body = base;
    body.merge_patch(c.change);
    EXPECT_EQ(MatchesPool(Request(body), pool), c.served) << c.what;
  }
}

TEST(WarmPoolTest, AGivenKernelsRecordReadsBackAsWritten) {
  TempTree var("slotd-warm-claims");
  const WarmClaims claims(var.root() + "/warm-claims");
  EXPECT_FALSE(claims.Read("k-000000000001")->has_value());
  CreateRequest request = Request({{"image", "busybox:latest"},
                                   {"command", {"sleep", "3600"}},
                                   {"resources", {{"cpu", "250m"}, {"mem", "64m"}}},
                                   {"session_id", "s1"},
                                   {"labels", {{"team", "a"}}}});
  request.kernel_id = "k-000000000001";
  ASSERT_TRUE(claims.Write("k-000000000001", {request, 1'800'000'000, 1'800'003'600}).ok());
  struct stat info {};
  ASSERT_EQ(::stat((var.root() + "/warm-claims/k-000000000001.json").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  Result<std::optional<WarmClaims::Claim>> read = claims.Read("k-000000000001");
  ASSERT_TRUE(read.ok() && read->has_value()) << read.status().message();
  EXPECT_EQ((*read)->request, request);
  EXPECT_EQ((*read)->given_at, 1'800'000'000);
  EXPECT_EQ((*read)->deadline, 1'800'003'600);
  EXPECT_EQ(claims.KernelIds(), std::vector<std::string>{"k-000000000001"});

  // A temporary file of a write that never ended is no record, and goes.
  var.Write("warm-claims/k-000000000002.json.tmp.AbCdEf", "{\"requ");
  EXPECT_EQ(claims.KernelIds(), std::vector<std::string>{"k-000000000001"});
  claims.RemoveLeftovers();
  EXPECT_NE(::stat((var.root() + "/warm-claims/k-000000000002.json.tmp.AbCdEf").c_str(), &info), 0);

  // A file that is not a record, or records another kernel, is refused naming it.
  var.Write("warm-claims/k-000000000003.json", "not json");
  Result<std::optional<WarmClaims::Claim>> broken = claims.Read("k-000000000003");
  ASSERT_EQ(broken.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(broken.status().message().find("k-000000000003.json"), std::string::npos);
  ASSERT_TRUE(claims.Write("k-000000000004", {request, 1, std::nullopt}).ok());
  EXPECT_FALSE(claims.Read("k-000000000004").ok());

  // A link in the records' directory is never followed.
  ASSERT_EQ(::symlink((var.root() + "/warm-claims/k-000000000001.json").c_str(),
                      (var.root() + "/warm-claims/k-000000000005.json").c_str()),
            0);
  Result<std::optional<WarmClaims::Claim>> linked = claims.Read("k-000000000005");
  ASSERT_EQ(linked.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(linked.status().message().find("symbolic link"), std::string::npos) << linked.status().message();

  claims.Remove("k-000000000001");
  EXPECT_FALSE(claims.Read("k-000000000001")->has_value());
}

// slotd check asks each config's engine for its pools' images: a warning
// for one it lacks, saying what to do; a note when the engine cannot say.
TEST(WarmPoolTest, SlotdCheckWarnsOfAPoolWhoseImageTheEngineLacks) {
  FakeEngine engine;
  PoolConfig present = Small();
  present.name = "present";
  present.image = FakeEngine::kDefaultImage;
  Config config = PoolConfigOf({Small(), present});
  config.container.docker_host = "unix:///run/docker.sock";
  config.container.auto_pull = PullPolicy::kNone;
  CheckReport report;
  CheckPoolImages(config, engine, report);
  EXPECT_EQ(report.warnings, std::vector<std::string>{
                                 "warning: /etc/slotd/a1.toml: [[pool]] \"small\" names image busybox:latest, which "
                                 "the engine at unix:///run/docker.sock does not have; the pool stays empty until it "
                                 "is: load or pull it (slotctl pull busybox:latest) or name another image"});
  EXPECT_TRUE(report.notes.empty());
  EXPECT_TRUE(report.problems.empty());

  config.container.auto_pull = PullPolicy::kTag;
  CheckReport pulling;
  CheckPoolImages(config, engine, pulling);
  ASSERT_EQ(pulling.warnings.size(), 1u);
  EXPECT_NE(pulling.warnings[0].find("the agent pulls it before it makes the pool's first kernel"), std::string::npos)
      << pulling.warnings[0];

  engine.FailNext(FakeEngine::Method::kImages, Status::Unavailable("connection refused"));
  CheckReport unreachable;
  CheckPoolImages(config, engine, unreachable);
  EXPECT_TRUE(unreachable.warnings.empty());
  ASSERT_EQ(unreachable.notes.size(), 1u);
  EXPECT_NE(unreachable.notes[0].find("could not be checked"), std::string::npos) << unreachable.notes[0];
}

}  // namespace
}  // namespace slotd
