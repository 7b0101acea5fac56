// Create requests and kernel records: every malformed field is refused with a
// message naming it, equivalent requests are "the same" (so a repeat is not a
// conflict), and a kernel survives the trip through its container labels.
#include "model/kernel.h"
#include "model/label_codec.h"
#include "model/create_request.h"
#include "common/units.h"

#include <fstream>

#include <gtest/gtest.h>

#include <string>

namespace slotd {
namespace {

using nlohmann::json;


// A valid body; tests change one field of it.
json ValidBody() {
  return {{"kernel_id", "k-0001"},
          {"session_id", "s-01"},
          {"image", "slotd-test/busybox:latest"},
          {"command", {"sleep", "3600"}},
          {"env", {{"FOO", "bar"}}},
          {"resources", {{"cpu", 2}, {"mem", "256m"}, {"mock.device", 1}}},
          {"ports", json::array({8080})},
          {"labels", {{"team", "vision"}}}};
}

// The message of the refusal of `body`, which must be kInvalidArgument.
std::string ErrorOf(const json& body) {
  Result<CreateRequest> req = ParseCreateRequest(body);
  if (req.ok()) {
    ADD_FAILURE() << "accepted: " << body.dump();
    return "";
  }
  EXPECT_EQ(req.status().code(), Status::Code::kInvalidArgument) << req.status().message();
  return req.status().message();
}

// ValidBody with `field` set to `value`.
json With(const std::string& field, json value) {
  json body = ValidBody();
  body[field] = std::move(value);
  return body;
}

// ValidBody with resources.`slot` set to `value`.
json WithResource(const std::string& slot, json value) {
  json body = ValidBody();
  body["resources"][slot] = std::move(value);
  return body;
}

// Whether `message` starts with "<field>: ".
testing::AssertionResult Names(const std::string& message, const std::string& field) {
  if (message.rfind(field + ": ", 0) == 0) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "\"" << message << "\" does not start with \"" << field << ": \"";
}

// ------------------------------------------------------------- valid requests

TEST(ParseCreateRequestTest, ReadsEveryFieldOfTheSpecExample) {
  Result<CreateRequest> req = ParseCreateRequest(ValidBody());
  ASSERT_TRUE(req.ok()) << req.status().message();
  EXPECT_EQ(req->kernel_id, "k-0001");
  EXPECT_EQ(req->session_id, "s-01");
  EXPECT_EQ(req->image.name, "slotd-test/busybox:latest");
  EXPECT_EQ(req->image.Canonical(), "slotd-test/busybox:latest");  // parsed once, carried from here on
  EXPECT_EQ(req->image.registry, "docker.io");
  EXPECT_EQ(req->command, (std::vector<std::string>{"sleep", "3600"}));
  EXPECT_EQ(req->env.at("FOO"), "bar");
  EXPECT_EQ(req->resources.cpu, 2);
  EXPECT_EQ(req->resources.mem_bytes, 256 * kMiB);
  EXPECT_EQ(req->resources.devices.at("mock.device"), 1);
  EXPECT_EQ(req->resources.ports, (std::vector<int>{8080}));
  EXPECT_EQ(req->labels.at("team"), "vision");
}

TEST(ParseCreateRequestTest, OnlyTheImageIsRequired) {
  Result<CreateRequest> req = ParseCreateRequest({{"image", "slotd-test/busybox:latest"}});
  ASSERT_TRUE(req.ok()) << req.status().message();
  EXPECT_TRUE(IsValidKernelId(req->kernel_id)) << req->kernel_id;
  EXPECT_EQ(req->session_id, req->kernel_id);
  EXPECT_EQ(req->resources.cpu, 1);
  EXPECT_EQ(req->resources.mem_bytes, 256 * kMiB);
  EXPECT_TRUE(req->command.empty());
  EXPECT_TRUE(req->resources.ports.empty());

  Result<CreateRequest> other = ParseCreateRequest({{"image", "slotd-test/busybox:latest"}});
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->kernel_id, req->kernel_id);  // generated ids do not repeat
}

TEST(ParseCreateRequestTest, AZeroDeviceCountAsksForNoDevice) {
  Result<CreateRequest> req = ParseCreateRequest(WithResource("mock.device", 0));
  ASSERT_TRUE(req.ok()) << req.status().message();
  EXPECT_TRUE(req->resources.devices.empty());
}

TEST(ParseCreateRequestTest, AcceptsKernelIdsOfUpTo64Characters) {
  EXPECT_TRUE(ParseCreateRequest(With("kernel_id", std::string(64, 'a'))).ok());
  EXPECT_TRUE(ParseCreateRequest(With("kernel_id", "A.b_c-9")).ok());
}

// ----------------------------------------------------------- refused requests

TEST(ParseCreateRequestTest, RefusesABodyThatIsNotAnObject) {
  EXPECT_TRUE(Names(ErrorOf(json::array({1, 2})), "request body"));
}

TEST(ParseCreateRequestTest, RefusesKernelIdsOffThePattern) {
  for (const json& id : {json("-starts-with-dash"), json(""), json(std::string(65, 'a')), json("has space"),
                         json("slash/y"), json(42)}) {
    SCOPED_TRACE(id.dump());
    std::string message = ErrorOf(With("kernel_id", id));
    EXPECT_TRUE(Names(message, "kernel_id"));
    EXPECT_NE(message.find("[A-Za-z0-9][A-Za-z0-9._-]{0,63}"), std::string::npos) << message;
  }
  EXPECT_TRUE(Names(ErrorOf(With("session_id", ".hidden")), "session_id"));
}

TEST(ParseCreateRequestTest, RefusesAMissingOrEmptyImage) {
  json body = ValidBody();
  body.erase("image");
  EXPECT_TRUE(Names(ErrorOf(body), "image"));
  EXPECT_TRUE(Names(ErrorOf(With("image", "")), "image"));
  EXPECT_TRUE(Names(ErrorOf(With("image", 7)), "image"));
}

TEST(ParseCreateRequestTest, RefusesACommandThatIsNotAListOfStrings) {
  EXPECT_TRUE(Names(ErrorOf(With("command", "sleep 3600")), "command"));
  EXPECT_TRUE(Names(ErrorOf(With("command", json::array({"sleep", 3600}))), "command"));
}

// (The variables that select devices are the device kinds'; the agent
// refuses them: AgentTest.EnvThatSelectsDevicesIsRefusedForEveryKind.)
TEST(ParseCreateRequestTest, RefusesEnvThatIdentifiesTheKernel) {
  for (const char* name : {"SLOTD_KERNEL_ID", "SLOTD_AGENT_ID"}) {
    SCOPED_TRACE(name);
    std::string message = ErrorOf(With("env", {{name, "0"}}));
    EXPECT_TRUE(Names(message, std::string("env.") + name));
    EXPECT_NE(message.find("may not be overridden"), std::string::npos) << message;
  }
}

TEST(ParseCreateRequestTest, RefusesMalformedEnv) {
  EXPECT_TRUE(Names(ErrorOf(With("env", {{"FOO", 1}})), "env.FOO"));
  EXPECT_TRUE(Names(ErrorOf(With("env", {{"1FOO", "x"}})), "env.1FOO"));
  EXPECT_TRUE(Names(ErrorOf(With("env", json::array({"FOO=bar"}))), "env"));
}

TEST(ParseCreateRequestTest, RefusesUserLabelsWithTheReservedPrefix) {
  std::string message = ErrorOf(With("labels", {{"ai.backend.owner", "someone-else"}}));
  EXPECT_TRUE(Names(message, "labels.ai.backend.owner"));
  EXPECT_NE(message.find("reserved"), std::string::npos) << message;
  EXPECT_TRUE(Names(ErrorOf(With("labels", {{"team", 1}})), "labels.team"));
}

TEST(ParseCreateRequestTest, RefusesACpuThatIsNeitherWholeCoresNorAQuotaOfWholeMillicoresFrom10m) {
  for (const json& cpu : {json(0), json(-1), json(4097), json("2"), json("0m"), json("9m"), json("1.5m"), json("m"),
                          json(0.0001), json(0.0015), json(-0.5), json(nullptr), json("250M")}) {
    SCOPED_TRACE(cpu.dump());
    EXPECT_TRUE(Names(ErrorOf(WithResource("cpu", cpu)), "resources.cpu"));
  }
  EXPECT_TRUE(Names(ErrorOf(WithResource("cpu_policy", "spread")), "resources.cpu_policy"));
  json fraction_exclusive = WithResource("cpu", 0.5);
  fraction_exclusive["resources"]["cpu_policy"] = "exclusive";
  EXPECT_TRUE(Names(ErrorOf(fraction_exclusive), "resources.cpu_policy"));
}

TEST(ParseCreateRequestTest, AFractionMillicoresOrTheSharedPolicyAskForAQuotaThatItsLabelKeeps) {
  struct Row {
    json cpu;
    json policy;  // null: not given
    int cores, shared_millis;
  };
  for (const Row& row : std::vector<Row>{{2, nullptr, 2, 0},
                                         {2, "exclusive", 2, 0},
                                         {0.25, nullptr, 0, 250},
                                         {1.1, nullptr, 0, 1100},
                                         {"250m", nullptr, 0, 250},
                                         {"10m", nullptr, 0, 10},
                                         {2, "shared", 0, 2000},
                                         {"1500m", "shared", 0, 1500}}) {
    SCOPED_TRACE(row.cpu.dump() + " " + row.policy.dump());
    json body = WithResource("cpu", row.cpu);
    if (!row.policy.is_null()) body["resources"]["cpu_policy"] = row.policy;
    Result<CreateRequest> asked = ParseCreateRequest(body);
    ASSERT_TRUE(asked.ok()) << asked.status().message();
    EXPECT_EQ(asked->resources.cpu, row.cores);
    EXPECT_EQ(asked->resources.shared_cpu_millis, row.shared_millis);
    // The canonical request reads back as the same request.
    Result<CreateRequest> again = RequestFromLabel(RequestLabel(*asked));
    ASSERT_TRUE(again.ok()) << again.status().message();
    EXPECT_EQ(again->resources, asked->resources);
    EXPECT_EQ(LabelFormatFor(*asked), row.shared_millis > 0 ? 6 : 3);
  }
  // An older slotd's request (whole cores) is written as it always was.
  Result<CreateRequest> plain = ParseCreateRequest(ValidBody());
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(RequestLabel(*plain)["resources"]["cpu"], 2);
}

TEST(ParseCreateRequestTest, RefusesAMemorySizeThatIsNotASizeOrBelowTheEnginesMinimum) {
  EXPECT_TRUE(Names(ErrorOf(WithResource("mem", "lots")), "resources.mem"));
  std::string tiny = ErrorOf(WithResource("mem", "1k"));
  EXPECT_TRUE(Names(tiny, "resources.mem"));
  EXPECT_NE(tiny.find("at least 6m"), std::string::npos) << tiny;
  EXPECT_TRUE(Names(ErrorOf(WithResource("mem", -5)), "resources.mem"));
}

TEST(ParseCreateRequestTest, RefusesAnUnknownSlotType) {
  std::string message = ErrorOf(WithResource("gpu", 1));
  EXPECT_TRUE(Names(message, "resources.gpu"));
  EXPECT_NE(message.find("unknown slot type"), std::string::npos) << message;
  EXPECT_TRUE(Names(ErrorOf(WithResource("mock.device", -1)), "resources.mock.device"));
  EXPECT_TRUE(Names(ErrorOf(With("resources", json::array({1}))), "resources"));
}

TEST(ParseCreateRequestTest, ShmDefaultsToDockersOwnCappedAtMemAndMayNotExceedMem) {
  Result<CreateRequest> plain = ParseCreateRequest(ValidBody());
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->resources.shm_bytes.has_value());
  EXPECT_EQ(plain->resources.ShmBytes(), 64 * kMiB);

  json small = ValidBody();
  small["resources"]["mem"] = "32m";
  EXPECT_EQ(ParseCreateRequest(small)->resources.ShmBytes(), 32 * kMiB);  // never more than mem

  Result<CreateRequest> asked = ParseCreateRequest(WithResource("shm", "128m"));
  ASSERT_TRUE(asked.ok()) << asked.status().message();
  EXPECT_EQ(asked->resources.ShmBytes(), 128 * kMiB);

  Result<CreateRequest> over = ParseCreateRequest(WithResource("shm", "1g"));
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), Status::Code::kResourceExhausted);  // 422, as a request that does not fit
  EXPECT_TRUE(Names(over.status().message(), "resources.shm"));
  EXPECT_NE(over.status().message().find("more than mem (256m)"), std::string::npos) << over.status().message();

  for (const json& bad : {json("lots"), json(-1), json(1.5), json("512k")}) {
    SCOPED_TRACE(bad.dump());
    EXPECT_TRUE(Names(ErrorOf(WithResource("shm", bad)), "resources.shm"));
  }
}

TEST(ParseCreateRequestTest, ScratchIsASizeOfAtLeast16MiBKeptInTheCanonicalRequestOnlyWhenGiven) {
  Result<CreateRequest> plain = ParseCreateRequest(ValidBody());
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->resources.scratch_bytes.has_value());
  EXPECT_FALSE(RequestLabel(*plain)["resources"].contains("scratch"));  // an older slotd's request stays the same

  Result<CreateRequest> asked = ParseCreateRequest(WithResource("scratch", "10g"));
  ASSERT_TRUE(asked.ok()) << asked.status().message();
  EXPECT_EQ(asked->resources.scratch_bytes, 10240 * kMiB);
  EXPECT_EQ(RequestLabel(*asked)["resources"]["scratch"], 10240 * kMiB);
  Result<CreateRequest> again = RequestFromLabel(RequestLabel(*asked));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->resources, asked->resources);

  for (const json& bad : {json("lots"), json(-1), json(1.5), json("8m")}) {
    SCOPED_TRACE(bad.dump());
    EXPECT_TRUE(Names(ErrorOf(WithResource("scratch", bad)), "resources.scratch"));
  }
}

TEST(ParseCreateRequestTest, MaxLifetimeIsADurationFromOneSecondToAYearAndADay) {
  Result<CreateRequest> req = ParseCreateRequest(With("max_lifetime", "2h"));
  ASSERT_TRUE(req.ok()) << req.status().message();
  EXPECT_EQ(req->max_lifetime, std::chrono::hours(2));
  EXPECT_FALSE(ParseCreateRequest(ValidBody())->max_lifetime.has_value());
  for (const json& bad : {json(7200), json("2 hours"), json("500ms"), json("0s"), json("9000h")}) {
    SCOPED_TRACE(bad.dump());
    EXPECT_TRUE(Names(ErrorOf(With("max_lifetime", bad)), "max_lifetime"));
  }
}

TEST(ParseCreateRequestTest, MountsAreAbsolutePathsNormalisedWithOneTargetEach) {
  Result<CreateRequest> req = ParseCreateRequest(
      With("mounts", json::array({{{"source", "/srv/datasets/imagenet/"}, {"target", "//data/./x/"}, {"readonly", true}},
                                  {{"source", "/srv/shared"}, {"target", "/out"}}})));
  ASSERT_TRUE(req.ok()) << req.status().message();
  EXPECT_EQ(req->mounts, (std::vector<RequestedMount>{{"/srv/datasets/imagenet", "/data/x", true},
                                                      {"/srv/shared", "/out", false}}));
  EXPECT_EQ(RequestLabel(*req)["mounts"][0]["target"], "/data/x");
  EXPECT_FALSE(RequestLabel(*ParseCreateRequest(ValidBody())).contains("mounts"));

  const json bad[] = {json("/srv"),
                      json::array({{{"source", "srv"}, {"target", "/data"}}}),
                      json::array({{{"source", "/srv"}}}),
                      json::array({{{"source", "/srv"}, {"target", "/data"}, {"readonly", "yes"}}}),
                      json::array({{{"source", "/srv"}, {"target", "/data"}, {"propagation", "shared"}}}),
                      json::array({{{"source", "/a"}, {"target", "/data"}}, {{"source", "/b"}, {"target", "/data/"}}})};
  for (const json& mounts : bad) {
    SCOPED_TRACE(mounts.dump());
    EXPECT_EQ(ErrorOf(With("mounts", mounts)).rfind("mounts", 0), 0u);
  }
}

TEST(ParseCreateRequestTest, RefusesPortsOutOfRangeOrListedTwice) {
  for (const json& ports : {json::array({0}), json::array({65536}), json::array({"8080"}), json(8080)}) {
    SCOPED_TRACE(ports.dump());
    EXPECT_TRUE(Names(ErrorOf(With("ports", ports)), "ports"));
  }
  std::string twice = ErrorOf(With("ports", json::array({8080, 22, 8080})));
  EXPECT_TRUE(Names(twice, "ports"));
  EXPECT_NE(twice.find("8080 is listed twice"), std::string::npos) << twice;
}

// Nothing a request says can widen a kernel's reach past its slice: there is
// no field for privileges, capabilities, devices, namespaces or security
// options, and an unknown field is refused, not ignored.
TEST(ParseCreateRequestTest, NoFieldCanAskForPrivilegesCapabilitiesDevicesOrHostNamespaces) {
  for (const char* field : {"privileged", "cap_add", "CapAdd", "devices", "security_opt", "network_mode", "pid_mode",
                            "ipc_mode", "userns_mode", "user", "HostConfig"}) {
    SCOPED_TRACE(field);
    const std::string message = ErrorOf(With(field, true));
    EXPECT_TRUE(Names(message, field));
    EXPECT_NE(message.find("unknown field"), std::string::npos) << message;
  }
}

TEST(ParseCreateRequestTest, RefusesAnUnknownTopLevelField) {
  std::string message = ErrorOf(With("gpus", 1));
  EXPECT_TRUE(Names(message, "gpus"));
  EXPECT_NE(message.find("unknown field"), std::string::npos) << message;
}

// ------------------------------------------------------------------ Canonical

TEST(CanonicalTest, EquivalentRequestsAreTheSame) {
  json bytes = WithResource("mem", uint64_t{268435456});
  json reordered = json::parse(R"({"labels":{"team":"vision"},"ports":[8080],"image":"slotd-test/busybox:latest",
    "resources":{"mock.device":1,"mem":"256M","cpu":2},"env":{"FOO":"bar"},"command":["sleep","3600"],
    "session_id":"s-01","kernel_id":"k-0001"})");
  Result<CreateRequest> a = ParseCreateRequest(ValidBody());
  Result<CreateRequest> b = ParseCreateRequest(bytes);
  Result<CreateRequest> c = ParseCreateRequest(reordered);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(RequestLabel(*a), RequestLabel(*b));
  EXPECT_EQ(RequestLabel(*a), RequestLabel(*c));
}

TEST(CanonicalTest, DefaultsAreSpelledOutSoOmittingThemIsTheSame) {
  json implicit = {{"kernel_id", "k1"}, {"image", "img"}};
  json explicit_defaults = {{"kernel_id", "k1"}, {"session_id", "k1"}, {"image", "img"},
                            {"resources", {{"cpu", 1}, {"mem", "256m"}, {"mock.device", 0}}},
                            {"env", json::object()}, {"ports", json::array()}};
  EXPECT_EQ(RequestLabel(*ParseCreateRequest(implicit)), RequestLabel(*ParseCreateRequest(explicit_defaults)));
}

TEST(CanonicalTest, AnyDifferenceMakesADifferentRequest) {
  json base = ValidBody();
  for (auto [field, value] : std::vector<std::pair<std::string, json>>{{"session_id", "s-02"},
                                                                       {"image", "other:latest"},
                                                                       {"command", {"sleep", "10"}},
                                                                       {"env", {{"FOO", "baz"}}},
                                                                       {"ports", json::array({8081})},
                                                                       {"labels", {{"team", "nlp"}}}}) {
    SCOPED_TRACE(field);
    EXPECT_NE(RequestLabel(*ParseCreateRequest(With(field, value))), RequestLabel(*ParseCreateRequest(base)));
  }
  EXPECT_NE(RequestLabel(*ParseCreateRequest(WithResource("cpu", 3))), RequestLabel(*ParseCreateRequest(base)));
  EXPECT_NE(RequestLabel(*ParseCreateRequest(WithResource("mem", "512m"))), RequestLabel(*ParseCreateRequest(base)));
}

TEST(CanonicalTest, RequestFromLabelRestoresTheSameRequest) {
  json full = ValidBody();
  full["max_lifetime"] = "90m";
  full["resources"]["shm"] = "128m";
  for (const json& body : {ValidBody(), full}) {
    Result<CreateRequest> req = ParseCreateRequest(body);
    ASSERT_TRUE(req.ok());
    Result<CreateRequest> back = RequestFromLabel(RequestLabel(*req));
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(RequestLabel(*back), RequestLabel(*req));
  }
}

// A request recorded before shm and max_lifetime existed is the same
// request as one that leaves them out today, so a repeat is not a conflict.
TEST(CanonicalTest, FieldsAddedLaterAppearOnlyWhenGiven) {
  const json canonical = RequestLabel(*ParseCreateRequest(ValidBody()));
  EXPECT_FALSE(canonical.contains("max_lifetime"));
  EXPECT_FALSE(canonical["resources"].contains("shm"));
  EXPECT_NE(RequestLabel(*ParseCreateRequest(WithResource("shm", "64m"))), canonical);
  EXPECT_NE(RequestLabel(*ParseCreateRequest(With("max_lifetime", "1h"))), canonical);
}

// ------------------------------------------------------------ labels and back

// A kernel holding cores 2-3, 256m and host port 30001.
Kernel SampleKernel() {
  Kernel kernel;
  kernel.request = *ParseCreateRequest(ValidBody());
  kernel.agent_id = "a1";
  kernel.container_id = "c0ffee";
  kernel.allocation.cores = {2, 3};
  kernel.allocation.mem_bytes = 256 * kMiB;
  kernel.allocation.ports = {{8080, 30001}};
  kernel.created_at = 1'700'000'123;
  return kernel;
}

TEST(KernelLabelsTest, CarryOwnerIdsAllocationsAndUserLabels) {
  Kernel kernel = SampleKernel();
  Labels labels = KernelLabels(kernel);
  EXPECT_EQ(labels.at("ai.backend.owner"), "a1");
  EXPECT_EQ(labels.at("ai.backend.agent-id"), "a1");
  EXPECT_EQ(labels.at("ai.backend.kernel-id"), "k-0001");
  EXPECT_EQ(labels.at("ai.backend.session-id"), "s-01");
  EXPECT_EQ(json::parse(labels.at("ai.backend.allocations")), kernel.allocation.ToJson());
  EXPECT_EQ(labels.at("team"), "vision");
}

TEST(KernelLabelsTest, KernelFromContainerRoundTrips) {
  Kernel kernel = SampleKernel();
  ContainerInfo info;
  info.id = "c0ffee";
  info.name = ContainerName("a1", "k-0001");
  info.labels = KernelLabels(kernel);
  info.created_unix = 1'700'000'123;

  Result<Kernel> back = KernelFromContainer(info);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(RequestLabel(back->request), RequestLabel(kernel.request));
  EXPECT_EQ(back->agent_id, "a1");
  EXPECT_EQ(back->container_id, "c0ffee");
  EXPECT_EQ(back->allocation, kernel.allocation);
  EXPECT_EQ(back->created_at, 1'700'000'123);
  EXPECT_FALSE(back->deadline.has_value());
  EXPECT_EQ(back->ToJson()["ports"], kernel.ToJson()["ports"]);
}

TEST(KernelLabelsTest, TheDeadlineTravelsInItsLabelAndAMalformedOneIsNamed) {
  Kernel kernel = SampleKernel();
  kernel.deadline = 1'700'007'323;
  ContainerInfo info;
  info.id = "c0ffee";
  info.name = ContainerName("a1", "k-0001");
  info.labels = KernelLabels(kernel);
  EXPECT_EQ(info.labels.at(label::kDeadline), "1700007323");
  Result<Kernel> back = KernelFromContainer(info);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->deadline, 1'700'007'323);
  EXPECT_EQ(back->ToJson()["deadline"], 1'700'007'323);

  info.labels[label::kDeadline] = "soon";
  Result<Kernel> bad = KernelFromContainer(info);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(label::kDeadline), std::string::npos) << bad.status().message();
}

TEST(KernelLabelsTest, TheUserDecidedAtCreateTravelsInItsLabelWithoutRaisingTheFormat) {
  Kernel kernel = SampleKernel();
  const std::string format = KernelLabels(kernel).at(label::kFormat);
  EXPECT_EQ(KernelLabels(kernel).count(label::kRunAs), 0u);  // a kernel made before it was recorded
  kernel.run_as = RunAs{1000, 1001};
  ContainerInfo info;
  info.id = "c0ffee";
  info.name = ContainerName("a1", "k-0001");
  info.labels = KernelLabels(kernel);
  EXPECT_EQ(info.labels.at(label::kRunAs), "1000:1001");
  EXPECT_EQ(info.labels.at(label::kFormat), format);
  Result<Kernel> back = KernelFromContainer(info);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->run_as, (RunAs{1000, 1001}));

  for (const char* bad : {"work", "1000", "0:x", ""}) {
    SCOPED_TRACE(bad);
    info.labels[label::kRunAs] = bad;
    Result<Kernel> refused = KernelFromContainer(info);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find(label::kRunAs), std::string::npos) << refused.status().message();
  }
}

TEST(KernelLabelsTest, KernelFromContainerNamesAMissingOrMalformedLabel) {
  ContainerInfo info;
  info.id = "c0ffee";
  info.name = "slotd-a1-k-0001";
  info.labels = KernelLabels(SampleKernel());

  ContainerInfo missing = info;
  missing.labels.erase("ai.backend.allocations");
  Result<Kernel> k = KernelFromContainer(missing);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(k.status().message().find("ai.backend.allocations"), std::string::npos) << k.status().message();

  ContainerInfo garbled = info;
  garbled.labels["ai.backend.allocations"] = "{not json";
  k = KernelFromContainer(garbled);
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("ai.backend.allocations"), std::string::npos) << k.status().message();
  EXPECT_NE(k.status().message().find("slotd-a1-k-0001"), std::string::npos) << k.status().message();

  ContainerInfo bad_cores = info;
  bad_cores.labels["ai.backend.allocations"] = R"({"cpu":"0-3"})";
  k = KernelFromContainer(bad_cores);
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("label ai.backend.allocations: cpu is a string, expected an array"),
            std::string::npos)
      << k.status().message();
}

TEST(KernelLabelsTest, ContainerNamesAreUnambiguousAcrossAgents) {
  EXPECT_EQ(ContainerName("a1", "k-0001"), "slotd-2-a1-k-0001");
  EXPECT_NE(ContainerName("adv", "a-k1"), ContainerName("adv-a", "k1"));
  EXPECT_NE(ContainerName("a-1", "2-k"), ContainerName("a", "1-2-k"));
}

}  // namespace
}  // namespace slotd

namespace slotd {
namespace {

// The container recorded in tests/fixtures/labels-v<format>.json, as a list shows it.
ContainerInfo RecordedContainer(int format) {
  std::ifstream in(std::string(SLOTD_FIXTURES_DIR) + "/labels-v" + std::to_string(format) + ".json");
  const nlohmann::json doc = nlohmann::json::parse(in);
  ContainerInfo info;
  info.id = "0123456789ab";
  info.name = doc.at("name").get<std::string>();
  info.state = "running";
  info.running = true;
  info.labels = doc.at("labels").get<Labels>();
  return info;
}

// The containers of every earlier format, recorded by the slotd that wrote them.
ContainerInfo RecordedV1Container() { return RecordedContainer(1); }

class LabelFormats : public testing::TestWithParam<int> {};

INSTANTIATE_TEST_SUITE_P(Earlier, LabelFormats, testing::Values(1, 2, 3));

TEST_P(LabelFormats, ContainersOfEveryEarlierFormatAreReadWithTheirExactAllocation) {
  Result<Kernel> kernel = KernelFromContainer(RecordedContainer(GetParam()));
  ASSERT_TRUE(kernel.ok()) << kernel.status().message();
  EXPECT_EQ(kernel->agent_id, "fixture-a");
  EXPECT_EQ(kernel->id(), "k-fixture");
  EXPECT_EQ(kernel->request.session_id, "s-fixture");
  EXPECT_EQ(kernel->allocation.ToJson(),
            nlohmann::json::parse(R"({"cpu":[0],"devices":{"mock":["mock0"]},"mem":67108864,"numa_node":0,)"
                                  R"("ports":[{"container":8080,"host":41000}]})"));
  EXPECT_EQ(kernel->request.env.at("FOO"), "bar");
  EXPECT_EQ(kernel->request.labels.at("team"), "vision");
  // Written again, they carry the oldest format that holds them (so a
  // downgrade to format 3 still adopts them) and read back the same.
  Labels rewritten = KernelLabels(*kernel);
  EXPECT_EQ(rewritten.at(label::kFormat), "3");
  ContainerInfo again = RecordedContainer(GetParam());
  again.labels = rewritten;
  Result<Kernel> reread = KernelFromContainer(again);
  ASSERT_TRUE(reread.ok()) << reread.status().message();
  EXPECT_EQ(reread->allocation.ToJson(), kernel->allocation.ToJson());
  EXPECT_EQ(RequestLabel(reread->request), RequestLabel(kernel->request));
}

TEST(LabelFormat, AWarmPoolsKernelIsWrittenInFormat7AndReadBackWithItsPool) {
  Kernel kernel = *KernelFromContainer(RecordedContainer(3));
  kernel.warm_pool = "small";
  ContainerInfo info = RecordedContainer(3);
  info.labels = KernelLabels(kernel);
  EXPECT_EQ(info.labels.at(label::kFormat), "7");  // a slotd of format 6 would take it for a running kernel
  EXPECT_EQ(info.labels.at(label::kWarmPool), "small");
  Result<Kernel> reread = KernelFromContainer(info);
  ASSERT_TRUE(reread.ok()) << reread.status().message();
  EXPECT_EQ(reread->warm_pool, "small");
  EXPECT_EQ(RequestLabel(reread->request), RequestLabel(kernel.request));
  // Every other kernel is no pool's.
  EXPECT_EQ(KernelFromContainer(RecordedContainer(3))->warm_pool, "");
}

TEST(LabelFormat, AKernelWithAScratchSizeIsWrittenInFormat4AndReadBackWithIt) {
  Kernel kernel = *KernelFromContainer(RecordedContainer(3));
  kernel.request.resources.scratch_bytes = 10ull << 30;
  ContainerInfo info = RecordedContainer(3);
  info.labels = KernelLabels(kernel);
  EXPECT_EQ(info.labels.at(label::kFormat), "4");
  Result<Kernel> reread = KernelFromContainer(info);
  ASSERT_TRUE(reread.ok()) << reread.status().message();
  EXPECT_EQ(reread->request.resources.scratch_bytes, 10ull << 30);
  EXPECT_EQ(RequestLabel(reread->request), RequestLabel(kernel.request));
}

TEST(LabelFormat, AKernelWithAStopContractOrARestartPolicyIsWrittenInFormat5AndReadBackWithIt) {
  Kernel kernel = *KernelFromContainer(RecordedContainer(3));
  kernel.request.stop.signal = "SIGUSR1";
  kernel.request.stop.timeout = std::chrono::seconds(20);
  kernel.request.stop.pre_stop = {"sh", "-c", "sync"};
  kernel.request.restart = RestartPolicy{RestartWhen::kOnFailure, 4, std::chrono::milliseconds(500), std::nullopt};
  ContainerInfo info = RecordedContainer(3);
  info.labels = KernelLabels(kernel);
  info.name = ContainerName("fixture-a", "k-fixture", {3, false});  // restarted three times by its policy
  EXPECT_EQ(info.labels.at(label::kFormat), "5");
  Result<Kernel> reread = KernelFromContainer(info);
  ASSERT_TRUE(reread.ok()) << reread.status().message();
  EXPECT_EQ(reread->request.stop, kernel.request.stop);
  EXPECT_EQ(reread->request.restart, kernel.request.restart);
  EXPECT_EQ(reread->restarts, 3);
  EXPECT_EQ(RequestLabel(reread->request), RequestLabel(kernel.request));
  // Either alone is enough.
  kernel.request.stop = StopContract{};
  EXPECT_EQ(KernelLabels(kernel).at(label::kFormat), "5");
}

TEST(LabelFormat, AKernelWithASharedQuotaIsWrittenInFormat6AndReadBackWithItsQuota) {
  Kernel kernel = *KernelFromContainer(RecordedContainer(3));
  kernel.request.resources.cpu = 0;
  kernel.request.resources.shared_cpu_millis = 250;
  kernel.allocation.cores.clear();
  kernel.allocation.shared_cpu_millis = 250;
  ContainerInfo info = RecordedContainer(3);
  info.labels = KernelLabels(kernel);
  EXPECT_EQ(info.labels.at(label::kFormat), "6");
  EXPECT_EQ(nlohmann::json::parse(info.labels.at(label::kAllocations))["cpu_shared"], 250);
  Result<Kernel> reread = KernelFromContainer(info);
  ASSERT_TRUE(reread.ok()) << reread.status().message();
  EXPECT_EQ(reread->allocation, kernel.allocation);
  EXPECT_EQ(reread->request.resources, kernel.request.resources);
}

TEST(LabelFormat, ANewerFormatIsRefusedNamingTheContainerAndBothFormats) {
  ContainerInfo info = RecordedV1Container();
  info.labels[label::kFormat] = std::to_string(label::kCurrentFormat + 1);
  Result<Kernel> kernel = KernelFromContainer(info);
  ASSERT_FALSE(kernel.ok());
  EXPECT_EQ(kernel.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(kernel.status().message().find("slotd-fixture-a-k-fixture was written by a newer slotd (label format " +
                                          std::to_string(label::kCurrentFormat + 1)),
            std::string::npos)
      << kernel.status().message();
  info.labels[label::kFormat] = "two";
  EXPECT_EQ(KernelFromContainer(info).status().code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace slotd
