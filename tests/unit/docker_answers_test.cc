// The Docker Engine answers the engine client reads, as the engine could send
// them: numbers out of range never become huge counts.
#include "engine/docker/docker_answers.h"

#include <gtest/gtest.h>

#include <string>

namespace slotd {
namespace {

TEST(DockerAnswers, StatsCountsAreNeverNegativeOrWrappedAndTheLargestAreKept) {
  const std::string body = R"({"read": "2026-12-01T10:00:00Z",
    "cpu_stats": {"cpu_usage": {"total_usage": -5}},
    "memory_stats": {"usage": 18446744073709551615, "limit": -1, "stats": {"file": 4096}},
    "pids_stats": {"current": -3},
    "blkio_stats": {"io_service_bytes_recursive": [{"op": "Read", "value": -7}, {"op": "write", "value": 9}]}})";
  auto stats = ParseContainerStats(body, "stats of container c1");
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_EQ(stats->cpu_usage_ns, 0u);
  EXPECT_EQ(stats->memory_used_bytes, 18446744073709551615u);
  EXPECT_EQ(stats->memory_limit_bytes, 0u);
  EXPECT_EQ(stats->memory_cache_bytes, 4096u);
  EXPECT_EQ(stats->pids, 0u);
  EXPECT_EQ(stats->io_read_bytes, 0u);
  EXPECT_EQ(stats->io_write_bytes, 9u);
}

}  // namespace
}  // namespace slotd
