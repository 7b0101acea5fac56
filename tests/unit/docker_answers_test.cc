// The Docker Engine answers the engine client reads, as the engine could send
// them: numbers out of range never become huge counts.
#include "engine/docker/docker_answers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

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

// One tar header of `name`, `type` and `size`, with its checksum field left blank.
std::string TarHeader(const std::string& name, char type, size_t size, const std::string& link = "") {
  std::string header(512, '\0');
  name.copy(header.data(), name.size());
  char octal[12];
  std::snprintf(octal, sizeof(octal), "%011zo", size);
  std::copy(octal, octal + 11, header.begin() + 124);
  header[156] = type;
  link.copy(header.data() + 157, link.size());
  return header;
}

// `data` padded to whole 512-byte blocks.
std::string Blocks(const std::string& data) { return data + std::string((512 - data.size() % 512) % 512, '\0'); }

TEST(DockerAnswers, AnArchivedFileIsReadPastPaxHeadersAndLinksAreReportedNotFollowed) {
  const std::string passwd = "root:x:0:0::/root:/bin/sh\n";
  const std::string pax = "30 path=etc/passwd-with-a-long-name\n";
  Result<ArchivedFile> file = ParseFirstArchivedFile(TarHeader("passwd", 'x', pax.size()) + Blocks(pax) +
                                                     TarHeader("passwd", '0', passwd.size()) + Blocks(passwd) +
                                                     std::string(1024, '\0'));
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->kind, ArchivedFile::Kind::kRegular);
  EXPECT_EQ(file->content, passwd);

  Result<ArchivedFile> link = ParseFirstArchivedFile(TarHeader("passwd", '2', 0, "../usr/lib/passwd"));
  ASSERT_TRUE(link.ok()) << link.status().message();
  EXPECT_EQ(link->kind, ArchivedFile::Kind::kSymlink);
  EXPECT_EQ(link->link, "../usr/lib/passwd");

  EXPECT_EQ(ParseFirstArchivedFile(TarHeader("etc", '5', 0))->kind, ArchivedFile::Kind::kOther);
}

TEST(DockerAnswers, ATruncatedOrEmptyArchiveIsAnErrorNotARead) {
  EXPECT_FALSE(ParseFirstArchivedFile("").ok());
  EXPECT_FALSE(ParseFirstArchivedFile(std::string(1024, '\0')).ok());
  EXPECT_FALSE(ParseFirstArchivedFile(TarHeader("passwd", '0', 100) + "short").ok());
  EXPECT_FALSE(ParseFirstArchivedFile(TarHeader("passwd", '0', 1ull << 40)).ok());
  std::string bad = TarHeader("passwd", '0', 0);
  bad[124] = '9';
  EXPECT_FALSE(ParseFirstArchivedFile(bad).ok());
}

}  // namespace
}  // namespace slotd

namespace slotd {
namespace {

// Podman answers 500 with a "cause" where Docker answers 404 or 409; a 500
// with any other cause, or with a body that is not JSON, stays a 500.
TEST(DockerAnswers, PodmansCausesAreReadAsTheStatusDockerAnswers) {
  struct Case {
    long status;
    std::string body;
    long docker;
  };
  const Case cases[] = {
      {500, R"({"cause":"no such container","message":"container 3f does not exist in database: no such container","response":500})", 404},
      {500, R"({"cause":"that name is already in use","message":"...","response":500})", 409},
      {500, R"({"cause":"container state improper","message":"...","response":500})", 409},
      {500, R"({"cause":"some other trouble","message":"...","response":500})", 500},
      {500, "not json \xff", 500},
      {500, R"({"cause":["no such container"]})", 500},
      {404, R"({"message":"No such container: 3f"})", 404},
      {409, R"({"cause":"no such container"})", 409},
  };
  for (const Case& c : cases) EXPECT_EQ(DockerStatusOf(c.status, c.body), c.docker) << c.status << " " << c.body;
}

}  // namespace
}  // namespace slotd
