// ElasticPool: a thread per task running, none past the bound (refused, never
// queued), a waiting thread reused, idle threads ended, and a system that
// makes no thread a refusal that runs nothing.
#include "common/elastic_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <system_error>

#include "testing/eventually.h"

namespace slotd {
namespace {

using std::chrono::milliseconds;

// Tasks that run until Open().
class Gate {
 public:
  ElasticPool::Task Task() {
    return [this] {
      std::unique_lock lock(mutex_);
      ++waiting_;
      opened_.wait(lock, [this] { return open_; });
      --waiting_;
    };
  }
  void Open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    opened_.notify_all();
  }
  int Waiting() {
    std::lock_guard lock(mutex_);
    return waiting_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable opened_;
  bool open_ = false;
  int waiting_ = 0;
};

TEST(ElasticPool, RunsEachTaskOnAThreadOfItsOwnUpToTheBoundAndRefusesTheNext) {
  Gate gate;
  ElasticPool pool("test-pool", 3, milliseconds(60'000));
  EXPECT_EQ(pool.Threads(), 0) << "a pool at rest holds no thread";
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(pool.Run(gate.Task()).ok());
  ASSERT_TRUE(Eventually([&] { return gate.Waiting() == 3; }));
  std::atomic<bool> ran{false};
  const Status refused = pool.Run([&] { ran = true; });
  EXPECT_EQ(refused.code(), Status::Code::kResourceExhausted) << refused.message();
  gate.Open();
  // Once they return, their threads take new work instead of new threads being made.
  ASSERT_TRUE(Eventually([&] { return gate.Waiting() == 0; }));
  std::atomic<int> done{0};
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Eventually([&] { return pool.Run([&] { ++done; }).ok(); }));
  ASSERT_TRUE(Eventually([&] { return done == 3; }));
  EXPECT_EQ(pool.Threads(), 3);
  EXPECT_FALSE(ran) << "a refused task ran";
}

TEST(ElasticPool, AThreadIdleForItsTimeEndsSoAQuietPoolHoldsNone) {
  ElasticPool pool("test-pool", 4, milliseconds(50));
  std::atomic<int> done{0};
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(pool.Run([&] { ++done; }).ok());
  ASSERT_TRUE(Eventually([&] { return done == 4; }));
  EXPECT_TRUE(Eventually([&] { return pool.Threads() == 0; }));
  ASSERT_TRUE(pool.Run([&] { ++done; }).ok()) << "a pool whose threads ended makes new ones";
  EXPECT_TRUE(Eventually([&] { return done == 5; }));
}

TEST(ElasticPool, AThreadTheSystemCannotMakeIsARefusalAndTheTaskNeverRuns) {
  int asked = 0;
  ElasticPool pool("test-pool", 4, milliseconds(60'000), [&asked](ElasticPool::Task) -> std::thread {
    ++asked;
    throw std::system_error(EAGAIN, std::generic_category(), "Resource temporarily unavailable");
  });
  bool ran = false;
  const Status refused = pool.Run([&] { ran = true; });
  EXPECT_EQ(refused.code(), Status::Code::kUnavailable);
  EXPECT_NE(refused.message().find("Resource temporarily unavailable"), std::string::npos) << refused.message();
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(pool.Threads(), 0);
  EXPECT_FALSE(ran);
}

TEST(ElasticPool, ItsEndWaitsForEveryTaskItTook) {
  std::atomic<int> done{0};
  {
    ElasticPool pool("test-pool", 8, milliseconds(60'000));
    for (int i = 0; i < 8; ++i)
      ASSERT_TRUE(pool.Run([&] {
                    std::this_thread::sleep_for(milliseconds(20));
                    ++done;
                  }).ok());
  }
  EXPECT_EQ(done, 8);
}

}  // namespace
}  // namespace slotd
