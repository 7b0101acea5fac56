// PeriodicLoop: each job keeps its own period on the loop's one thread, a
// RunNow runs its job at once (asks made meanwhile come to one run), and a
// Stop runs nothing more; on a FakeClock, so no test sleeps for a period.
#include "common/periodic_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <string>

#include <pthread.h>

#include "testing/eventually.h"
#include "testing/fake_clock.h"

namespace slotd {
namespace {

using std::chrono::seconds;

TEST(PeriodicLoop, EachJobKeepsItsOwnPeriodOnTheOneThread) {
  FakeClock clock;
  const Clock::TimePoint start = clock.Now();
  PeriodicLoop loop("test-loop", clock);
  std::atomic<int> fast{0}, slow{0};
  loop.AddEvery(seconds(2), [&] { ++fast; });
  loop.AddEvery(seconds(3), [&] { ++slow; }, seconds(3));
  loop.Start();
  // Runs at 0, 2, 4, 6 (fast) and 3, 6 (slow): the thread waits for the
  // earlier of the two at each step.
  const int expected_fast[] = {1, 2, 2, 3, 4};
  const int expected_slow[] = {0, 0, 1, 1, 2};
  const int at[] = {0, 2, 3, 4, 6};
  const int next[] = {2, 3, 4, 6, 8};
  for (size_t i = 0; i < std::size(at); ++i) {
    ASSERT_TRUE(clock.WaitForWaiterUntil(start + seconds(next[i]))) << "at " << at[i] << " s";
    EXPECT_EQ(fast, expected_fast[i]) << "at " << at[i] << " s";
    EXPECT_EQ(slow, expected_slow[i]) << "at " << at[i] << " s";
    clock.Advance(seconds(next[i] - at[i]));
  }
  loop.Stop();
}

TEST(PeriodicLoop, RunNowRunsTheJobAtOnceAndItsPeriodCountsFromThere) {
  FakeClock clock;
  const Clock::TimePoint start = clock.Now();
  PeriodicLoop loop("test-loop", clock);
  std::atomic<int> runs{0};
  const PeriodicLoop::JobId job = loop.AddEvery(seconds(10), [&] { ++runs; });
  loop.Start();
  ASSERT_TRUE(clock.WaitForWaiterUntil(start + seconds(10)));
  clock.Advance(seconds(4));
  loop.RunNow(job);
  ASSERT_TRUE(Eventually([&] { return runs == 2; }));
  ASSERT_TRUE(clock.WaitForWaiterUntil(start + seconds(14)));
  EXPECT_EQ(runs, 2);
  loop.Stop();
}

TEST(PeriodicLoop, AsksMadeWhileTheJobRunsComeToOneMoreRun) {
  FakeClock clock;
  const Clock::TimePoint start = clock.Now();
  PeriodicLoop loop("test-loop", clock);
  std::atomic<int> runs{0};
  std::atomic<bool> release{false};
  PeriodicLoop::JobId job = 0;
  job = loop.Add([&] {
    if (++runs == 1) {
      loop.RunNow(job);  // also from the loop's own thread
      while (!release) std::this_thread::yield();
    }
    return seconds(10);
  });
  loop.Start();
  ASSERT_TRUE(Eventually([&] { return runs == 1; }));
  loop.RunNow(job);
  loop.RunNow(job);
  release = true;
  ASSERT_TRUE(clock.WaitForWaiterUntil(start + seconds(10)));
  EXPECT_EQ(runs, 2);
  loop.Stop();
}

TEST(PeriodicLoop, StopEndsTheWaitAndNamesTheThread) {
  FakeClock clock;
  PeriodicLoop loop("a-name-too-long-to-keep", clock);
  std::string name;
  std::atomic<int> runs{0};
  loop.Add([&] {
    if (runs++ == 0) {
      char buffer[16] = {};
      pthread_getname_np(pthread_self(), buffer, sizeof buffer);
      name = buffer;
    }
    return std::chrono::hours(1);
  });
  loop.Start();
  ASSERT_TRUE(Eventually([&] { return runs == 1; }));
  loop.Stop();
  loop.Stop();  // idempotent
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(name, "a-name-too-long");
}

}  // namespace
}  // namespace slotd
