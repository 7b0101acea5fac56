// Images from registries, without a registry: reference parsing, docker
// login files, the engine's pull messages and errors, the progress tally,
// and the puller's one-pull-per-image rule against the fake engine.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/image_collector.h"
#include "agent/image_puller.h"
#include "common/lock_file.h"
#include "agent/registry_credentials.h"
#include "common/base64.h"
#include "engine/docker/docker_answers.h"
#include "model/image_ref.h"
#include "testing/eventually.h"
#include "testing/fake_engine.h"
#include "testing/temp_tree.h"

namespace slotd {
namespace {

using nlohmann::json;

TEST(ImageRefTest, TheRegistryIsTheFirstComponentOnlyWhenItLooksLikeAHost) {
  const ImageRef local = ParseImageRef("127.0.0.1:5000/team/torch:2.3");
  EXPECT_EQ(local.registry, "127.0.0.1:5000");
  EXPECT_EQ(local.repository, "127.0.0.1:5000/team/torch");
  EXPECT_EQ(local.tag, "2.3");
  EXPECT_EQ(local.Canonical(), "127.0.0.1:5000/team/torch:2.3");
  EXPECT_EQ(ParseImageRef("localhost/x").registry, "localhost");
  EXPECT_EQ(ParseImageRef("registry.example.com/x:1").registry, "registry.example.com");
  EXPECT_EQ(ParseImageRef("team/torch").registry, "docker.io");
  EXPECT_EQ(ParseImageRef("busybox").Canonical(), "busybox:latest");  // no tag: latest
  const ImageRef pinned = ParseImageRef("127.0.0.1:5000/x@sha256:abc");
  EXPECT_EQ(pinned.digest, "sha256:abc");
  EXPECT_EQ(pinned.tag, "");
  EXPECT_EQ(pinned.Canonical(), "127.0.0.1:5000/x@sha256:abc");
  EXPECT_EQ(ParseImageRef("127.0.0.1:5000/x").tag, "latest");  // a port is no tag
}

TEST(ImageRefTest, AnInvalidReferenceIsRefusedSayingWhyBeforeAnyEngineSeesIt) {
  for (const char* good : {"busybox", "slotd-test/busybox:latest", "127.0.0.1:5000/team/torch:2.3", "localhost/x",
                           "registry.example.com/a/b_c__d-e.f:V1.0-rc_2", "[::1]:5000/x",
                           "x@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                           "Registry/x"})  // an upper-case first component is a registry, as Docker reads it
    EXPECT_TRUE(ValidateImageRef(good).ok()) << good << ": " << ValidateImageRef(good).message();
  for (const char* bad : {"", "127.0.0.1:5055/", "BUSYBOX", "team/Torch", "busy box", "../containers/abc",
                          "x/../y", "x/./y", "x//y", "x:", "x:-tag", "x@sha256:short", "/x", "x/", "a..b",
                          "x:tag with space", "\xff"}) {
    const Status s = ValidateImageRef(bad);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("is not an image reference"), std::string::npos) << s.message();
  }
  EXPECT_FALSE(ValidateImageRef(std::string(300, 'a')).ok());
}

TEST(Base64Test, DecodesWhatItEncodesInBothAlphabets) {
  for (const std::string text : {"", "a", "ab", "abc", "user:p@ss\xff\xfe"}) {
    EXPECT_EQ(DecodeBase64(Base64(text)), text);
    EXPECT_EQ(DecodeBase64(Base64Url(text)), text);
  }
  EXPECT_EQ(DecodeBase64("not base64!"), std::nullopt);
  EXPECT_EQ(DecodeBase64("a"), std::nullopt);
}

// The credentials the engine would receive for `image`, decoded.
json SentFor(const RegistryCredentials& credentials, const std::string& image) {
  const std::string header = credentials.AuthFor(ParseImageRef(image));
  if (header.empty()) return nullptr;
  return json::parse(*DecodeBase64(header));
}

TEST(RegistryCredentialsTest, ReadsDockerLoginFilesAndMatchesEachImagesRegistry) {
  TempTree dir("registry-auth");
  const std::string path = dir.root() + "/config.json";
  dir.Write("config.json", json{{"auths", {
      {"127.0.0.1:5000", {{"auth", Base64("alice:s3cret:with:colons")}}},
      {"https://registry.example.com/v1/", {{"username", "bob"}, {"password", "pw"}}},
      {"helper.example.com", json::object()},  // a credential helper's entry: nothing to send
  }}}.dump());
  Result<RegistryCredentials> credentials = RegistryCredentials::Load(path);
  ASSERT_TRUE(credentials.ok()) << credentials.status().message();
  EXPECT_EQ(SentFor(*credentials, "127.0.0.1:5000/team/torch:2.3"),
            (json{{"username", "alice"}, {"password", "s3cret:with:colons"}, {"serveraddress", "127.0.0.1:5000"}}));
  EXPECT_EQ(SentFor(*credentials, "registry.example.com/x")["username"], "bob");
  EXPECT_EQ(SentFor(*credentials, "127.0.0.1:5001/team/torch"), nullptr);  // another registry
  EXPECT_EQ(SentFor(*credentials, "helper.example.com/x"), nullptr);
  EXPECT_TRUE(credentials->Has("127.0.0.1:5000"));
  EXPECT_FALSE(credentials->Has("helper.example.com"));
}

TEST(RegistryCredentialsTest, AnUnreadableOrMalformedFileIsRefusedNamingIt) {
  TempTree dir("registry-auth");
  EXPECT_TRUE(RegistryCredentials::Load("").ok());  // no file: no credentials
  struct Case {
    std::string text;
    std::string says;
  };
  for (const Case& c : {Case{"not json", ": not JSON (expected {\"auths\""}, Case{"{}", ": auths is missing"},
                        Case{R"({"auths": {"r:1": 5}})", ": auths.r:1 is a number, expected an object"},
                        Case{R"({"auths": {"r:1": {"auth": "bm9jb2xvbg=="}}})", ": auths.r:1.auth is not base64"}}) {
    const std::string path = dir.root() + "/bad.json";
    dir.Write("bad.json", c.text);
    Result<RegistryCredentials> loaded = RegistryCredentials::Load(path);
    ASSERT_FALSE(loaded.ok()) << c.text;
    EXPECT_NE(loaded.status().message().find("[container] registry-auth-file " + path), std::string::npos);
    EXPECT_NE(loaded.status().message().find(c.says), std::string::npos) << loaded.status().message();
  }
  EXPECT_FALSE(RegistryCredentials::Load(dir.root() + "/missing.json").ok());
}

TEST(RegistryCredentialsTest, ARegistryAuthFileThatIsAFifoIsRefusedWithoutBlockingTheReload) {
  TempTree dir("registry-auth");
  const std::string fifo = dir.root() + "/config.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::promise<Result<RegistryCredentials>> loaded;
  std::future<Result<RegistryCredentials>> answer = loaded.get_future();
  std::thread reader([&] { loaded.set_value(RegistryCredentials::Load(fifo)); });
  const bool answered = answer.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  if (!answered) {  // blocked in open(): a writer that comes and goes lets the reader go
    const int writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (writer >= 0) ::close(writer);
  }
  reader.join();
  ASSERT_TRUE(answered) << "loading a FIFO waited for a writer";
  Result<RegistryCredentials> refused = answer.get();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("registry-auth-file " + fifo + " is a FIFO, not a regular file"),
            std::string::npos)
      << refused.status().message();
}

TEST(PullAnswersTest, ProgressLinesAndErrorLinesOfTheEngine) {
  auto message = ParsePullLine(R"({"status":"Downloading","progressDetail":{"current":10,"total":40},"id":"abc"})");
  ASSERT_TRUE(message && message->ok());
  EXPECT_EQ((*message)->layer, "abc");
  EXPECT_EQ((*message)->current, 10u);
  EXPECT_EQ((*message)->total, 40u);
  auto failed = ParsePullLine(R"({"errorDetail":{"message":"unauthorized: authentication required"},"error":"x"})");
  ASSERT_TRUE(failed && !failed->ok());
  EXPECT_EQ(failed->status().code(), Status::Code::kPermissionDenied);
  EXPECT_EQ(ParsePullLine("not json"), std::nullopt);
  EXPECT_EQ(ParsePullLine("[1]"), std::nullopt);
  // Mistyped fields read as empty.
  auto odd = ParsePullLine(R"({"status":5,"progressDetail":{"current":-3,"total":"x"},"id":[]})");
  ASSERT_TRUE(odd && odd->ok());
  EXPECT_EQ((*odd)->current, 0u);
}

TEST(PullAnswersTest, ErrorsAreClassifiedByWhatTheRegistrySaid) {
  EXPECT_EQ(PullError(404, "anything").code(), Status::Code::kNotFound);
  EXPECT_EQ(PullError(500, "manifest for x:1 not found: manifest unknown").code(), Status::Code::kNotFound);
  EXPECT_EQ(PullError(500, "Head \"http://r/v2/x/manifests/1\": no basic auth credentials").code(),
            Status::Code::kPermissionDenied);
  EXPECT_EQ(PullError(0, "unauthorized: authentication required").code(), Status::Code::kPermissionDenied);
  EXPECT_EQ(PullError(500, "Get \"http://127.0.0.1:1/v2/\": dial tcp 127.0.0.1:1: connect: connection refused").code(),
            Status::Code::kUnavailable);
  EXPECT_EQ(PullError(500, "something else").code(), Status::Code::kInternal);
  EXPECT_EQ(PullError(500, "something else").message(), "something else");
}

TEST(PullTallyTest, SumsLayersAndBytesAsTheyProgress) {
  PullTally tally;
  tally.Add({"tag", "Pulling from team/torch", 0, 0});  // about the image, no layer
  tally.Add({"a", "Pulling fs layer", 0, 0});
  tally.Add({"b", "Pulling fs layer", 0, 0});
  tally.Add({"c", "Already exists", 0, 0});
  EXPECT_EQ(tally.Now(), (PullProgress{3, 1, 0, 0}));
  tally.Add({"a", "Downloading", 30, 100});
  tally.Add({"b", "Downloading", 5, 50});
  EXPECT_EQ(tally.Now(), (PullProgress{3, 1, 35, 150}));
  tally.Add({"a", "Download complete", 0, 0});
  tally.Add({"a", "Extracting", 10, 100});
  EXPECT_EQ(tally.Now(), (PullProgress{3, 1, 105, 150}));
  tally.Add({"a", "Pull complete", 0, 0});
  tally.Add({"b", "Pull complete", 0, 0});
  EXPECT_EQ(tally.Now(), (PullProgress{3, 3, 150, 150}));
}

class ImagePullerTest : public ::testing::Test {
 protected:
  ImagePuller Puller(ImagePuller::Limits limits = {}) {
    return ImagePuller(engine_, hub_, Clock::Real(), "a1", limits, RegistryCredentials());
  }
  FakeEngine engine_;
  EventHub hub_;
};

TEST_F(ImagePullerTest, TagPullsOnlyAMissingImageAndDigestPullsAMovedTag) {
  ImagePuller puller = Puller();
  engine_.AddRemoteImage("r:5000/x:1", "sha256:one");
  EXPECT_TRUE(puller.Ensure(ParseImageRef("r:5000/x:1"), PullPolicy::kTag).ok());
  EXPECT_EQ(engine_.CallCount(FakeEngine::Method::kPull), 1);
  EXPECT_TRUE(puller.Ensure(ParseImageRef("r:5000/x:1"), PullPolicy::kTag).ok());  // there now
  EXPECT_TRUE(puller.Ensure(ParseImageRef("r:5000/x:1"), PullPolicy::kDigest).ok());  // asks, same digest
  EXPECT_EQ(engine_.CallCount(FakeEngine::Method::kPull), 2);          // one pull, one question
  engine_.AddRemoteImage("r:5000/x:1", "sha256:two");                 // the tag moved
  EXPECT_TRUE(puller.Ensure(ParseImageRef("r:5000/x:1"), PullPolicy::kTag).ok());
  EXPECT_EQ(engine_.CallCount(FakeEngine::Method::kPull), 2);  // tag does not look
  EXPECT_TRUE(puller.Ensure(ParseImageRef("r:5000/x:1"), PullPolicy::kDigest).ok());
  EXPECT_EQ(engine_.CallCount(FakeEngine::Method::kPull), 4);  // a question and a pull
  EXPECT_TRUE(puller.Ensure(ParseImageRef("r:5000/missing:1"), PullPolicy::kNone).ok());  // none: the create will say
  EXPECT_EQ(engine_.CallCount(FakeEngine::Method::kPull), 4);
}

TEST_F(ImagePullerTest, ErrorsNameTheImageAndTheRegistryAndWhatToDo) {
  ImagePuller puller = Puller();
  Status missing = puller.Ensure(ParseImageRef("r:5000/missing:1"), PullPolicy::kTag).status();
  EXPECT_EQ(missing.code(), Status::Code::kNotFound);
  EXPECT_NE(missing.message().find("image r:5000/missing:1 is not in registry r:5000"), std::string::npos)
      << missing.message();
  engine_.FailNext(FakeEngine::Method::kPull, Status::PermissionDenied("unauthorized: authentication required"));
  Status refused = puller.Ensure(ParseImageRef("r:5000/private:1"), PullPolicy::kTag).status();
  EXPECT_EQ(refused.code(), Status::Code::kPermissionDenied);
  EXPECT_NE(refused.message().find("registry r:5000 wants credentials"), std::string::npos) << refused.message();
  EXPECT_NE(refused.message().find("registry-auth-file has none for it"), std::string::npos) << refused.message();
  engine_.FailNext(FakeEngine::Method::kPull, Status::Unavailable("dial tcp: connection refused"));
  Status down = puller.Ensure(ParseImageRef("r:5000/x:1"), PullPolicy::kDigest).status();
  EXPECT_EQ(down.code(), Status::Code::kUnavailable);
  EXPECT_NE(down.message().find("registry r:5000 cannot be reached"), std::string::npos) << down.message();
  // Podman's (and Docker's, off loopback) refusal of a registry over plain HTTP.
  engine_.FailNext(FakeEngine::Method::kPull,
                   Status::Internal("pinging container registry 127.0.0.1:5000: Get \"https://127.0.0.1:5000/v2/\": "
                                    "http: server gave HTTP response to HTTPS client"));
  Status plain = puller.Ensure(ParseImageRef("127.0.0.1:5000/x:1"), PullPolicy::kTag).status();
  EXPECT_EQ(plain.code(), Status::Code::kUnavailable);
  EXPECT_NE(plain.message().find("registry 127.0.0.1:5000 speaks plain HTTP"), std::string::npos) << plain.message();
  EXPECT_NE(plain.message().find("location = \"127.0.0.1:5000\" insecure = true"), std::string::npos)
      << plain.message();
}

TEST_F(ImagePullerTest, ConcurrentEnsuresOfOneMissingImageShareOnePull) {
  ImagePuller puller = Puller();
  engine_.AddRemoteImage("r:5000/x:1", "sha256:one");
  engine_.HoldNext(FakeEngine::Method::kPull);
  std::vector<std::thread> creates;
  std::atomic<int> ok{0};
  creates.emplace_back([&] { ok += puller.Ensure(ParseImageRef("r:5000/x:1"), PullPolicy::kTag).ok(); });
  ASSERT_TRUE(engine_.WaitUntilHeld(FakeEngine::Method::kPull));
  for (int i = 0; i < 9; ++i) creates.emplace_back([&] { ok += puller.Ensure(ParseImageRef("r:5000/x:1"), PullPolicy::kTag).ok(); });
  // Every one has found the image missing while the first pull is held and
  // waits for that pull: none may make one of its own.
  EXPECT_TRUE(Eventually([&] { return puller.SharingCalls() == 9; })) << puller.SharingCalls();
  engine_.Release(FakeEngine::Method::kPull);
  for (auto& t : creates) t.join();
  EXPECT_EQ(ok, 10);
  EXPECT_EQ(engine_.CallCount(FakeEngine::Method::kPull), 1);
}

TEST_F(ImagePullerTest, APullReportsItsProgressAsImagePullEvents) {
  ImagePuller puller = Puller();
  engine_.AddRemoteImage("r:5000/x:1", "sha256:one");
  auto events = hub_.Subscribe();
  ASSERT_TRUE(puller.Pull(ParseImageRef("r:5000/x:1")).ok());
  std::vector<json> seen;
  while (auto event = events->Next(std::chrono::milliseconds(100))) seen.push_back(event->body);
  ASSERT_GE(seen.size(), 2u);
  EXPECT_EQ(seen.front()["type"], "image_pull");
  EXPECT_EQ(seen.front()["state"], "pulling");
  EXPECT_EQ(seen.back()["state"], "done");
  EXPECT_EQ(seen.back()["image"], "r:5000/x:1");
  EXPECT_EQ(seen.back()["layers_done"], 1);
}

// The image collector over the fake engine, on a disk whose fullness is
// 50% plus 10% per image the engine has.
class ImageCollectorTest : public ::testing::Test {
 protected:
  ImageCollectorTest() : dir_("image-gc") {}
  ImageCollector Collector(ImageCollector::Marks marks) {
    return ImageCollector(engine_, hub_, Clock::Real(), "a1", marks, dir_.root() + "/image-gc.lock",
                          [this](const std::string& root) -> Result<double> {
                            EXPECT_EQ(root, "/fake/data-root");
                            return 50.0 + 10.0 * static_cast<double>(engine_.ListImages()->size());
                          });
  }
  std::vector<std::string> Tags() {
    std::vector<std::string> tags;
    const Result<std::vector<ImageInfo>> images = engine_.ListImages();
    for (const ImageInfo& image : *images) tags.push_back(image.tags.front());
    std::sort(tags.begin(), tags.end());
    return tags;
  }
  FakeEngine engine_;
  EventHub hub_;
  TempTree dir_;
};

TEST_F(ImageCollectorTest, AboveTheHighMarkTheLeastRecentlyUsedUnusedImagesGoUntilBelowTheLowMark) {
  // The default image (created at 0) plus four: 100% full.
  engine_.AddImageCreatedAt("old:1", 100);
  engine_.AddImageCreatedAt("older-but-used:1", 50);
  engine_.AddImageCreatedAt("new:1", 300);
  engine_.AddImageCreatedAt("recently-run:1", 10);
  ASSERT_TRUE(engine_.AddContainer("someone-elses", {{"owner", "x"}}, /*running=*/false, 0, "older-but-used:1").ok());
  ImageCollector gc = Collector({90, 75});
  gc.RecordUse(ParseImageRef("recently-run:1"), 400);  // a kernel was made from it lately
  auto events = hub_.Subscribe();
  Result<std::vector<std::string>> removed = gc.CollectOnce();
  ASSERT_TRUE(removed.ok()) << removed.status().message();
  // 100% -> 90% (the default image, created at 0) -> 80% (old:1) -> 70% < 75%: done.
  EXPECT_EQ(removed->size(), 3u);
  EXPECT_EQ(Tags(), (std::vector<std::string>{"older-but-used:1", "recently-run:1"}));
  auto event = events->Next(std::chrono::milliseconds(100));
  ASSERT_TRUE(event.has_value());
  EXPECT_EQ(event->type, EventType::kImageRemoved);
  EXPECT_EQ(event->body["type"], "image_removed");
}

TEST_F(ImageCollectorTest, NothingGoesBelowTheHighMarkWhenOffOrWhileAnotherAgentCollects) {
  engine_.AddImageCreatedAt("a:1", 1);  // 70% full
  EXPECT_TRUE(Collector({80, 60}).CollectOnce()->empty());  // below the mark
  EXPECT_TRUE(Collector({0, 60}).CollectOnce()->empty());   // off
  {
    auto held = LockFile::Acquire(dir_.root() + "/image-gc.lock");  // another agent of the node collects
    ASSERT_TRUE(held.ok());
    EXPECT_TRUE(Collector({50, 40}).CollectOnce()->empty());
  }
  EXPECT_EQ(Collector({50, 40}).CollectOnce()->size(), 2u);
}

}  // namespace
}  // namespace slotd
