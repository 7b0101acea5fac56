// Which engine answers, from /version answers recorded from Docker 20.10
// and Podman 4.3 (fixtures/engines/).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "engine/docker/docker_answers.h"

namespace slotd {
namespace {

std::string RecordedVersion(const std::string& name) {
  std::ifstream in(std::string(SLOTD_FIXTURES_DIR) + "/engines/" + name);
  std::ostringstream text;
  text << in.rdbuf();
  EXPECT_FALSE(text.str().empty()) << name;
  return text.str();
}

TEST(EngineIdentityTest, DockerAndPodmanAreToldApartByTheirComponents) {
  auto docker = ParseEngineIdentity(RecordedVersion("docker-20.10-version.json"), "version");
  ASSERT_TRUE(docker.ok()) << docker.status().message();
  EXPECT_EQ(docker->name, "docker");
  EXPECT_EQ(docker->version, "20.10.24+dfsg1");
  EXPECT_EQ(docker->api_version, "1.41");

  auto podman = ParseEngineIdentity(RecordedVersion("podman-4.3-version.json"), "version");
  ASSERT_TRUE(podman.ok()) << podman.status().message();
  EXPECT_EQ(podman->name, "podman");
  EXPECT_EQ(podman->version, "4.3.1");
  EXPECT_EQ(podman->api_version, "1.41");
}

TEST(EngineIdentityTest, AnAnswerWithoutAVersionIsRefusedSayingSo) {
  for (const char* body : {"", "not json", "[]", R"({"Components": "x"})", R"({"Version": 5})"}) {
    auto identity = ParseEngineIdentity(body, "version");
    ASSERT_FALSE(identity.ok()) << body;
    EXPECT_EQ(identity.status().code(), Status::Code::kInternal) << body;
  }
  // Components of the wrong shape do not make it Podman.
  auto odd = ParseEngineIdentity(R"({"Version": "1", "Components": [5, {"Name": 3}, {"Name": "Engine"}]})", "v");
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(odd->name, "docker");
}

}  // namespace
}  // namespace slotd
