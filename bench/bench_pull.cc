// bench_pull: how long an image takes to be on the node when the agent pulls
// it (POST /v1/images/pull over its unix socket: the answer comes when the
// image is there) compared with what a user would otherwise do: docker pull,
// that is the Engine API's POST /images/create, of the same image from the
// same registry (Debian's docker-registry on a loopback port). The image is
// removed from the node before each pull, untimed; the two alternate, in
// swapped order every other round.
#include <cstdio>
#include <functional>
#include <thread>

#include "common.h"
#include "integration/registry.h"

namespace slotd::bench {
namespace {

constexpr int kWarmUpRounds = 1;
constexpr int kMeasuredRounds = 10;
constexpr size_t kImageBytes = 64u << 20;  // the layer of random bytes the image adds to the test image

// Removes `image` from the node (untimed), so that the next pull fetches it.
void Forget(const std::string& image) {
  auto info = testing::Engine().InspectImage(image);
  if (info.ok()) Check(testing::Engine().RemoveImage(info->id), "removing " + image);
}

double TimeAgentPull(const testing::AgentProcess& agent, const std::string& image) {
  Forget(image);
  auto start = Clock::now();
  CallAgent(agent, "POST", "/v1/images/pull", {{"image", image}}, 200);
  return Millis(start, Clock::now());
}

double TimeDirectPull(const std::string& image) {
  Forget(image);
  const std::atomic<bool> never{false};
  auto start = Clock::now();
  Check(testing::Engine().Pull(image, "", [](const PullMessage&) {}, never), "pulling " + image);
  return Millis(start, Clock::now());
}

void Run(const std::string& agent_id) {
  testing::TestRegistry registry;
  if (!registry.started()) throw BenchFailure("the registry did not start: " + registry.log());
  const std::string name_tag = "bench/pull:" + agent_id;
  const std::string image = registry.host() + "/" + name_tag;
  if (registry.PushNewImage(name_tag, kImageBytes).empty()) throw BenchFailure("pushing " + image + " failed");
  testing::AgentProcess agent(BenchAgentOptions(agent_id));
  StartAgent(agent);
  PrintHeader("bench_pull", agent.options());
  std::printf("  image %s (the test image plus %zu MiB), %d warm-up + %d measured rounds\n", image.c_str(),
              kImageBytes >> 20, kWarmUpRounds, kMeasuredRounds);
  Samples agent_ms, direct_ms;
  for (int round = 0; round < kWarmUpRounds + kMeasuredRounds; ++round) {
    ThrowIfInterrupted();
    double a = 0, d = 0;
    std::function<void()> turns[] = {[&] { a = TimeAgentPull(agent, image); }, [&] { d = TimeDirectPull(image); }};
    if (round % 2) std::swap(turns[0], turns[1]);
    for (const auto& turn : turns) turn();
    if (round >= kWarmUpRounds) {
      agent_ms.Add(a);
      direct_ms.Add(d);
    }
  }
  Forget(image);
  PrintSamples("agent:  POST /v1/images/pull", agent_ms);
  PrintSamples("direct: engine pull (docker pull)", direct_ms);
  PrintRatio("agent/direct (medians)", agent_ms.Median() / direct_ms.Median(), "<= 1.05");
}

}  // namespace
}  // namespace slotd::bench

int main() {
  using namespace slotd::bench;
  const std::string agent_id = UniqueAgentId("pull");
  return RunBenchmark("bench_pull", {agent_id}, [&] { Run(agent_id); });
}
