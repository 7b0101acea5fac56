// OomWatch: a v2 cgroup's memory.events watched on a fake tree (the file
// changes as the kernel would change it), and a real v1 memory cgroup run out
// of memory by a child process, where this host has one and lets it be made.
#include "stats/oom_watch.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "testing/temp_tree.h"

namespace slotd {
namespace {

namespace fs = std::filesystem;

// What the watch told, in order, and a wait for the next telling.
class Notices {
 public:
  struct Notice {
    std::string kernel_id, container_id;
    uint64_t oom_kills;
  };
  OomWatch::Notify Sink() {
    return [this](const std::string& kernel, const std::string& container, uint64_t kills) {
      std::lock_guard lock(mutex_);
      told_.push_back({kernel, container, kills});
      cv_.notify_all();
    };
  }
  // Waits (up to 10 s, a bound on a broken watch, not a measure) until
  // `count` notices have come; returns them.
  std::vector<Notice> WaitFor(size_t count) {
    std::unique_lock lock(mutex_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return told_.size() >= count; });
    return told_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<Notice> told_;
};

TEST(OomWatch, AV2CgroupIsToldWhenItsOomKillCountRisesAndOnlyThen) {
  TempTree tree("oomwatch");
  tree.Write("a/memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n");
  tree.Write("b/memory.events", "oom_kill 0\n");
  Notices notices;
  OomWatch watch(notices.Sink());
  auto a = watch.Watch("ka", "ca", {tree.root() + "/a", true});
  ASSERT_TRUE(a.ok()) << a.status().message();
  auto b = watch.Watch("kb", "cb", {tree.root() + "/b", true});
  ASSERT_TRUE(b.ok()) << b.status().message();

  tree.Write("a/memory.events", "low 0\nhigh 4\nmax 2\noom 0\noom_kill 0\noom_group_kill 0\n");  // no kill
  tree.Write("a/memory.events", "low 0\nhigh 4\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n");
  std::vector<Notices::Notice> told = notices.WaitFor(1);
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0].kernel_id, "ka");
  EXPECT_EQ(told[0].container_id, "ca");
  EXPECT_EQ(told[0].oom_kills, 1u);

  // Disarmed: a's later kills are not told; b's are, in the order written.
  *a = OomWatch::Armed();
  tree.Write("a/memory.events", "oom_kill 5\n");
  tree.Write("b/memory.events", "oom_kill 2\n");
  told = notices.WaitFor(2);
  ASSERT_EQ(told.size(), 2u);
  EXPECT_EQ(told[1].kernel_id, "kb");
  EXPECT_EQ(told[1].oom_kills, 2u);
}

TEST(OomWatch, ACgroupThatIsGoneOrUnnamedIsRefusedSayingSo) {
  TempTree tree("oomwatch");
  OomWatch watch([](const std::string&, const std::string&, uint64_t) {});
  auto gone_v2 = watch.Watch("k", "c", {tree.root() + "/gone", true});
  EXPECT_EQ(gone_v2.status().code(), Status::Code::kNotFound) << gone_v2.status().message();
  auto gone_v1 = watch.Watch("k", "c", {tree.root() + "/gone", false});
  EXPECT_EQ(gone_v1.status().code(), Status::Code::kNotFound) << gone_v1.status().message();
  EXPECT_NE(gone_v1.status().message().find("memory.oom_control"), std::string::npos);
  auto unnamed = watch.Watch("k", "c", {"", false});
  EXPECT_EQ(unnamed.status().code(), Status::Code::kInvalidArgument);
}

// A memory cgroup of the test's own, <name>-<pid>, on the host's v1
// hierarchy, removed at the end if it is there then; `skip` says why there is
// none (no v1 memory hierarchy, not root).
struct V1MemoryCgroup {
  explicit V1MemoryCgroup(const std::string& name) {
    const std::string hierarchy = "/sys/fs/cgroup/memory";
    if (!fs::exists(hierarchy + "/cgroup.event_control")) {
      skip = "this host has no cgroup v1 memory hierarchy at " + hierarchy;
      return;
    }
    dir = hierarchy + "/" + name + "-" + std::to_string(getpid());
    if (mkdir(dir.c_str(), 0755) != 0)
      skip = "cannot make a memory cgroup at " + dir + ": " + std::strerror(errno) + " (not root?)";
  }
  ~V1MemoryCgroup() {
    if (skip.empty()) rmdir(dir.c_str());  // where the test stopped before removing it
  }
  std::string dir;
  std::string skip;
};

// A child in a memory cgroup of 8 MiB touches 64 MiB: the kernel's OOM killer
// ends it, and the watch says so; removing the cgroup then tells nothing.
TEST(OomWatch, ARealV1CgroupRunOutOfMemoryIsToldAndItsRemovalIsNot) {
  const V1MemoryCgroup cgroup("slotd-oom-watch-test");
  if (!cgroup.skip.empty()) GTEST_SKIP() << cgroup.skip;
  const std::string& dir = cgroup.dir;
  std::ofstream(dir + "/memory.limit_in_bytes") << (8 << 20);
  Notices notices;
  {
    OomWatch watch(notices.Sink());
    auto armed = watch.Watch("k", "c", {dir, false});
    ASSERT_TRUE(armed.ok()) << armed.status().message();

    const std::string procs = dir + "/cgroup.procs";
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {  // no allocation here: the parent has other threads
      char self[24];
      const int length = snprintf(self, sizeof(self), "%d", getpid());
      const int fd = open(procs.c_str(), O_WRONLY);
      if (fd < 0 || write(fd, self, length) < 0) _exit(3);
      close(fd);
      const size_t size = 64 << 20;
      auto* hog = static_cast<char*>(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
      if (hog == MAP_FAILED) _exit(4);
      for (size_t i = 0; i < size; i += 4096) hog[i] = 1;
      _exit(0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the child ended with status " << status;
    std::vector<Notices::Notice> told = notices.WaitFor(1);
    ASSERT_FALSE(told.empty()) << "no notice of the out-of-memory kill";
    EXPECT_EQ(told[0].kernel_id, "k");
    EXPECT_EQ(told[0].container_id, "c");
    EXPECT_GE(told[0].oom_kills, 1u);

    const size_t before = told.size();
    ASSERT_EQ(rmdir(dir.c_str()), 0) << std::strerror(errno);
    // The removal signals the eventfd too; give the watch a moment to misread it.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(notices.WaitFor(0).size(), before);
  }
}

// A container's restart removes its cgroup and makes it again at the same
// path, which can be before the watch reads what the removal signalled: that
// is not a kill. Twenty restarts, each a fresh watch as the stats loop arms.
TEST(OomWatch, AV1CgroupRemovedAndMadeAgainAtItsPathIsNotAKill) {
  const V1MemoryCgroup cgroup("slotd-oom-restart-test");
  if (!cgroup.skip.empty()) GTEST_SKIP() << cgroup.skip;
  const std::string& dir = cgroup.dir;
  Notices notices;
  OomWatch watch(notices.Sink());
  for (int restart = 0; restart < 20; ++restart) {
    auto armed = watch.Watch("k", "c", {dir, false});
    ASSERT_TRUE(armed.ok()) << armed.status().message();
    ASSERT_EQ(rmdir(dir.c_str()), 0) << std::strerror(errno);
    ASSERT_EQ(mkdir(dir.c_str(), 0755), 0) << std::strerror(errno);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the watch reads meanwhile
  }
  EXPECT_TRUE(notices.WaitFor(0).empty()) << "a restart was told as an out-of-memory kill";
}

}  // namespace
}  // namespace slotd
