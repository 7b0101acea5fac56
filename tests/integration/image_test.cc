// What an image brings with it must not outlive its kernel or reach past
// its slice: VOLUME directories and device-selecting ENV.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "integration/harness.h"
#include "resources/device_kinds.h"

namespace slotd::testing {
namespace {

using nlohmann::json;

// An image made from the test image with `changes` (Dockerfile lines, as
// `docker commit --change` takes them), tagged `tag`.
void MakeImage(const std::string& tag, const std::vector<std::string>& changes) {
  const std::string base = "slotd-image-base-" + RunTag();
  CommandResult r = RunCommand({"docker", "create", "--name", base, kTestImage});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  CommitImage(base, tag, changes);
  RunCommand({"docker", "rm", "-f", base});
}

TEST(Image, AnImagesDeviceVariablesNeverReachTheKernel) {
  const std::string image = "slotd-test/device-env:" + RunTag();
  // Every variable of every device kind, set by the image to reach devices.
  std::vector<std::string> lines = {"ENV KEEP_ME=yes"};
  for (const auto& [name, none] : DeviceVariablesSelectingNone()) lines.push_back("ENV " + name + "=all");
  ASSERT_NO_FATAL_FAILURE(MakeImage(image, lines));
  AgentOptions o;
  o.id = "it-" + RunTag() + "-imgenv";
  o.cores = "0-1";
  AgentProcess agent(o);
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel({{"kernel_id", "k1"},
                      {"image", image},
                      {"command", {"sleep", "3600"}},
                      {"resources", {{"cpu", 1}, {"mem", "32m"}}}});
  const std::string env = agent.CallJson("POST", "/v1/kernels/k1/exec", {{"command", {"env"}}}, 200)["stdout"];
  EXPECT_NE(env.find("NVIDIA_VISIBLE_DEVICES=void\n"), std::string::npos) << env;  // the NVIDIA runtime's "none"
  for (const auto& [name, none] : DeviceVariablesSelectingNone())
    EXPECT_NE(("\n" + env).find("\n" + name + "=" + none + "\n"), std::string::npos) << name << " in\n" << env;
  EXPECT_NE(env.find("KEEP_ME=yes\n"), std::string::npos) << env;  // other image variables stay
  agent.CallJson("DELETE", "/v1/kernels/k1", nullptr, 200);
  RunCommand({"docker", "rmi", image});
}

TEST(Image, AnImagesAnonymousVolumesAreRemovedWithTheKernel) {
  const std::string image = "slotd-test/volume:" + RunTag();
  ASSERT_NO_FATAL_FAILURE(MakeImage(image, {"VOLUME /data"}));
  AgentOptions o;
  o.id = "it-" + RunTag() + "-volume";
  o.cores = "0-1";
  AgentProcess agent(o);
  ASSERT_TRUE(agent.Start()) << agent.log();
  json k = agent.CreateKernel({{"kernel_id", "k1"},
                               {"image", image},
                               {"command", {"sh", "-c", "echo secret > /data/x; sleep 3600"}},
                               {"resources", {{"cpu", 1}, {"mem", "32m"}}}});
  CommandResult mounts = RunCommand({"docker", "inspect", "-f", "{{range .Mounts}}{{if .Name}}{{.Name}} {{end}}{{end}}",
                                     k["container_id"].get<std::string>()});
  ASSERT_EQ(mounts.exit_code, 0) << mounts.err;
  std::string volume = mounts.out.substr(0, mounts.out.find(' '));
  ASSERT_FALSE(volume.empty()) << "the image's VOLUME made no volume";
  EXPECT_EQ(RunCommand({"docker", "volume", "inspect", volume}).exit_code, 0);

  agent.CallJson("DELETE", "/v1/kernels/k1", nullptr, 200);
  EXPECT_NE(RunCommand({"docker", "volume", "inspect", volume}).exit_code, 0) << "volume " << volume << " leaked";
  RunCommand({"docker", "rmi", image});
}

}  // namespace
}  // namespace slotd::testing
