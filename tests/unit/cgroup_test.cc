// CgroupReader: a container's measures read from its cgroup on fake v1, v2
// and hybrid trees (one per Docker cgroup driver), and from this host's real
// cgroup.
#include "stats/cgroup.h"
#include "stats/cgroup_host.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "testing/temp_tree.h"

namespace slotd {
namespace {

namespace fs = std::filesystem;

constexpr int kPid = 4242;
const std::string kId = "4a1c0e7b9d3f5a6c8e2b4d6f8a0c2e4b6d8f0a2c4e6b8d0f2a4c6e8b0d2f4a6c";
const std::string kOuterId = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100";

// Mount lines as /proc/self/mountinfo shows them.
const std::string kTmpfsMount = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n";
const std::string kV1Mounts =
    kTmpfsMount +
    "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:12 - cgroup cgroup rw,memory\n"
    "38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio\n"
    "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
    "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd\n"
    "42 31 0:39 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n";
const std::string kV2Mount = "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";
const std::string kUnifiedMount = "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
const std::string kOverlayMount =
    "1020 900 0:99 / / rw,relatime - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/ABC:/x,upperdir=/u\n";

// A /proc/<pid>/cgroup on a v1 (or hybrid, with `unified`) host with every
// hierarchy at `path`.
std::string V1Membership(const std::string& path, bool unified = false) {
  std::string text = "9:name=systemd:" + path + "\n8:pids:" + path + "\n7:blkio:" + path + "\n6:freezer:" + path +
                     "\n4:memory:" + path + "\n3:cpuset:" + path + "\n2:cpu,cpuacct:" + path + "\n";
  if (unified) text += "0::" + path + "\n";
  return text;
}

// A fake proc/ and sys/fs/cgroup/ tree.
class CgroupTree : public TempTree {
 public:
  CgroupTree() : TempTree("cgroup_test") {}
};

// Fills a v1 container cgroup at `path` (relative to each hierarchy) with
// known measures.
void WriteV1Measures(const CgroupTree& host, const std::string& path) {
  const std::string base = "sys/fs/cgroup/";
  host.Write(base + "cpu,cpuacct" + path + "/cpuacct.usage", "123456789\n");
  host.Write(base + "memory" + path + "/memory.usage_in_bytes", "52428800\n");
  host.Write(base + "memory" + path + "/memory.limit_in_bytes", "268435456\n");
  host.Write(base + "memory" + path + "/memory.stat",
             "cache 1000\nrss 2000\nswapcached 0\ntotal_cache 4096000\ntotal_rss 2000\n");
  host.Write(base + "memory" + path + "/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
  host.Write(base + "pids" + path + "/pids.current", "7\n");
  host.Write(base + "cpuset" + path + "/cpuset.cpus", "2-3,6\n");
  host.Write(base + "blkio" + path + "/blkio.throttle.io_service_bytes_recursive",
             "8:0 Read 4096\n8:0 Write 1024\n8:0 Sync 5120\n8:0 Async 0\n8:0 Discard 0\n8:0 Total 5120\n"
             "253:1 Read 100\n253:1 Write 20\n253:1 Total 120\nTotal 5240\n");
}

void ExpectV1Measures(const CgroupSample& s) {
  EXPECT_EQ(s.cpu_usage_ns, 123456789u);
  EXPECT_EQ(s.memory_used_bytes, 52428800u);
  EXPECT_EQ(s.memory_limit_bytes, 268435456u);
  EXPECT_EQ(s.memory_cache_bytes, 4096000u);  // total_cache wins over cache
  EXPECT_EQ(s.oom_kills, 2u);
  EXPECT_EQ(s.pids, 7u);
  EXPECT_EQ(s.cpuset_cpus, "2-3,6");
  EXPECT_EQ(s.io_read_bytes, 4196u);
  EXPECT_EQ(s.io_write_bytes, 1044u);
}

// Fills a v2 cgroup at sys/fs/cgroup/`dir` with known measures.
void WriteV2Measures(const CgroupTree& host, const std::string& dir, const std::string& memory_max) {
  const std::string base = "sys/fs/cgroup/" + dir;
  host.Write(base + "/cpu.stat", "usage_usec 2500\nuser_usec 2000\nsystem_usec 500\nnr_periods 0\n");
  host.Write(base + "/memory.current", "7340032\n");
  host.Write(base + "/memory.max", memory_max + "\n");
  host.Write(base + "/memory.stat", "anon 1000\nfile 3145728\nkernel 10\nfile_mapped 5\n");
  host.Write(base + "/memory.events", "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\noom_group_kill 0\n");
  host.Write(base + "/pids.current", "3\n");
  host.Write(base + "/cpuset.cpus", "1\n");
  host.Write(base + "/io.stat",
             "8:0 rbytes=8192 wbytes=4096 rios=2 wios=1 dbytes=0 dios=0\n"
             "259:0 rbytes=10 wbytes=5 rios=1 wios=1 dbytes=0 dios=0\n");
}

void ExpectV2Measures(const CgroupSample& s) {
  EXPECT_EQ(s.cpu_usage_ns, 2500000u);
  EXPECT_EQ(s.memory_used_bytes, 7340032u);
  EXPECT_EQ(s.memory_cache_bytes, 3145728u);
  EXPECT_EQ(s.oom_kills, 1u);  // not oom_group_kill's
  EXPECT_EQ(s.pids, 3u);
  EXPECT_EQ(s.cpuset_cpus, "1");
  EXPECT_EQ(s.io_read_bytes, 8202u);
  EXPECT_EQ(s.io_write_bytes, 4101u);
}

std::string ProcCgroup(int pid = kPid) { return "proc/" + std::to_string(pid) + "/cgroup"; }

TEST(CgroupReader, V1CgroupfsDriverReadsEveryMeasure) {
  CgroupTree host;
  host.Write("proc/self/mountinfo", kOverlayMount + kV1Mounts);
  host.Write(ProcCgroup(), V1Membership("/docker/" + kId));
  WriteV1Measures(host, "/docker/" + kId);
  CgroupReader reader(host.root());

  Result<CgroupPaths> paths = reader.Locate(kPid);
  ASSERT_TRUE(paths.ok()) << paths.status().message();
  EXPECT_EQ(paths->cpu.path, host.root() + "/sys/fs/cgroup/cpu,cpuacct/docker/" + kId);
  EXPECT_FALSE(paths->cpu.unified);
  EXPECT_EQ(paths->io.path, host.root() + "/sys/fs/cgroup/blkio/docker/" + kId);

  Result<CgroupSample> sample = reader.Read(kPid);
  ASSERT_TRUE(sample.ok()) << sample.status().message();
  ExpectV1Measures(*sample);

  Result<std::string> id = reader.ContainerIdOfPid(kPid);
  ASSERT_TRUE(id.ok()) << id.status().message();
  EXPECT_EQ(*id, kId);
}

TEST(CgroupReader, V1SystemdDriverReadsEveryMeasure) {
  CgroupTree host;
  host.Write("proc/self/mountinfo", kV1Mounts);
  const std::string path = "/system.slice/docker-" + kId + ".scope";
  host.Write(ProcCgroup(), V1Membership(path));
  WriteV1Measures(host, path);
  CgroupReader reader(host.root());

  Result<CgroupSample> sample = reader.Read(kPid);
  ASSERT_TRUE(sample.ok()) << sample.status().message();
  ExpectV1Measures(*sample);

  Result<std::string> id = reader.ContainerIdOfPid(kPid);
  ASSERT_TRUE(id.ok()) << id.status().message();
  EXPECT_EQ(*id, kId);
}

TEST(CgroupReader, V1UnlimitedMemoryReadsAsZero) {
  CgroupTree host;
  host.Write("proc/self/mountinfo", kV1Mounts);
  host.Write(ProcCgroup(), V1Membership("/docker/" + kId));
  WriteV1Measures(host, "/docker/" + kId);
  host.Write("sys/fs/cgroup/memory/docker/" + kId + "/memory.limit_in_bytes", "9223372036854771712\n");

  Result<CgroupSample> sample = CgroupReader(host.root()).Read(kPid);
  ASSERT_TRUE(sample.ok()) << sample.status().message();
  EXPECT_EQ(sample->memory_limit_bytes, 0u);
  EXPECT_EQ(sample->memory_used_bytes, 52428800u);
}

TEST(CgroupReader, V1FallsBackToOtherBlkioFilesAndPlainCache) {
  CgroupTree host;
  host.Write("proc/self/mountinfo", kV1Mounts);
  host.Write(ProcCgroup(), V1Membership("/docker/" + kId));
  WriteV1Measures(host, "/docker/" + kId);
  const std::string blkio = "sys/fs/cgroup/blkio/docker/" + kId;
  host.Remove(blkio + "/blkio.throttle.io_service_bytes_recursive");
  host.Write(blkio + "/blkio.io_service_bytes_recursive", "8:16 Read 300\n8:16 Write 200\nTotal 500\n");
  host.Write("sys/fs/cgroup/memory/docker/" + kId + "/memory.stat", "cache 1000\nrss 2000\n");

  Result<CgroupSample> sample = CgroupReader(host.root()).Read(kPid);
  ASSERT_TRUE(sample.ok()) << sample.status().message();
  EXPECT_EQ(sample->io_read_bytes, 300u);
  EXPECT_EQ(sample->io_write_bytes, 200u);
  EXPECT_EQ(sample->memory_cache_bytes, 1000u);
}

TEST(CgroupReader, FindsAStatLinePastTheReadBuffer) {
  CgroupTree host;
  host.Write("proc/self/mountinfo", kV1Mounts);
  host.Write(ProcCgroup(), V1Membership("/docker/" + kId));
  WriteV1Measures(host, "/docker/" + kId);
  std::string stat = "cache 1\n";
  for (int i = 0; i < 500; ++i) stat += "hierarchical_filler_" + std::to_string(i) + " 123456\n";
  stat += std::string(9000, 'x') + " 5\n";  // a line longer than any read buffer is skipped
  stat += "total_cache 777\n";
  host.Write("sys/fs/cgroup/memory/docker/" + kId + "/memory.stat", stat);

  Result<CgroupSample> sample = CgroupReader(host.root()).Read(kPid);
  ASSERT_TRUE(sample.ok()) << sample.status().message();
  EXPECT_EQ(sample->memory_cache_bytes, 777u);
}

TEST(CgroupReader, V2CgroupfsPathsReadEveryMeasure) {
  CgroupTree host;
  host.Write("proc/self/mountinfo", kV2Mount);
  host.Write(ProcCgroup(), "0::/docker/" + kId + "\n");
  WriteV2Measures(host, "docker/" + kId, "536870912");
  CgroupReader reader(host.root());

  Result<CgroupPaths> paths = reader.Locate(kPid);
  ASSERT_TRUE(paths.ok()) << paths.status().message();
  for (const CgroupDir* dir : {&paths->cpu, &paths->memory, &paths->pids, &paths->io}) {
    EXPECT_EQ(dir->path, host.root() + "/sys/fs/cgroup/docker/" + kId);
    EXPECT_TRUE(dir->unified);
  }
  Result<CgroupSample> sample = reader.Read(*paths);
  ASSERT_TRUE(sample.ok()) << sample.status().message();
  ExpectV2Measures(*sample);
  EXPECT_EQ(sample->memory_limit_bytes, 536870912u);

  Result<std::string> id = reader.ContainerIdOfPid(kPid);
  ASSERT_TRUE(id.ok()) << id.status().message();
  EXPECT_EQ(*id, kId);
}

TEST(CgroupReader, V2SystemdPathsAndUnlimitedMemory) {
  CgroupTree host;
  host.Write("proc/self/mountinfo", kV2Mount);
  const std::string dir = "system.slice/docker-" + kId + ".scope";
  host.Write(ProcCgroup(), "0::/" + dir + "\n");
  WriteV2Measures(host, dir, "max");
  CgroupReader reader(host.root());

  Result<CgroupSample> sample = reader.Read(kPid);
  ASSERT_TRUE(sample.ok()) << sample.status().message();
  ExpectV2Measures(*sample);
  EXPECT_EQ(sample->memory_limit_bytes, 0u);

  Result<std::string> id = reader.ContainerIdOfPid(kPid);
  ASSERT_TRUE(id.ok()) << id.status().message();
  EXPECT_EQ(*id, kId);
}

TEST(CgroupReader, HybridPrefersV1AndTakesFromV2OnlyWhatV1Lacks) {
  CgroupTree host;
  // v1 cpu,cpuacct, memory and blkio; no v1 pids hierarchy; v2 at unified/.
  host.Write("proc/self/mountinfo",
             kTmpfsMount +
                 "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
                 "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
                 "38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio\n" +
                 kUnifiedMount);
  const std::string path = "/docker/" + kId;
  host.Write(ProcCgroup(), "7:blkio:" + path + "\n4:memory:" + path + "\n2:cpu,cpuacct:" + path + "\n0::" + path + "\n");
  WriteV1Measures(host, path);
  WriteV2Measures(host, "unified" + path, "max");  // v2 copies that must lose, but pids
  CgroupReader reader(host.root());

  Result<CgroupPaths> paths = reader.Locate(kPid);
  ASSERT_TRUE(paths.ok()) << paths.status().message();
  EXPECT_FALSE(paths->cpu.unified);
  EXPECT_FALSE(paths->memory.unified);
  EXPECT_FALSE(paths->io.unified);
  EXPECT_TRUE(paths->pids.unified);
  EXPECT_EQ(paths->pids.path, host.root() + "/sys/fs/cgroup/unified" + path);

  Result<CgroupSample> sample = reader.Read(*paths);
  ASSERT_TRUE(sample.ok()) << sample.status().message();
  EXPECT_EQ(sample->cpu_usage_ns, 123456789u);
  EXPECT_EQ(sample->memory_used_bytes, 52428800u);
  EXPECT_EQ(sample->memory_limit_bytes, 268435456u);
  EXPECT_EQ(sample->memory_cache_bytes, 4096000u);
  EXPECT_EQ(sample->io_read_bytes, 4196u);
  EXPECT_EQ(sample->pids, 3u);  // from v2

  Result<std::string> id = reader.ContainerIdOfPid(kPid);
  ASSERT_TRUE(id.ok()) << id.status().message();
  EXPECT_EQ(*id, kId);
}

TEST(CgroupReader, NestedAgentResolvesUnderItsMountRootAndNamesTheInnermostContainer) {
  CgroupTree host;
  // An agent inside container kOuterId sees the hierarchies mounted from its
  // own cgroup; the kernel it runs is a container inside that one.
  host.Write("proc/self/mountinfo",
             "700 690 0:32 /docker/" + kOuterId +
                 " /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory\n"
                 "701 690 0:29 /docker/" +
                 kOuterId + " /sys/fs/cgroup/cpu,cpuacct ro,nosuid - cgroup cgroup rw,cpu,cpuacct\n");
  const std::string path = "/docker/" + kOuterId + "/docker/" + kId;
  host.Write(ProcCgroup(), "4:memory:" + path + "\n2:cpu,cpuacct:" + path + "\n");
  host.Write("sys/fs/cgroup/memory/docker/" + kId + "/memory.usage_in_bytes", "4096\n");
  host.Write("sys/fs/cgroup/cpu,cpuacct/docker/" + kId + "/cpuacct.usage", "99\n");
  CgroupReader reader(host.root());

  Result<CgroupSample> sample = reader.Read(kPid);
  ASSERT_TRUE(sample.ok()) << sample.status().message();
  EXPECT_EQ(sample->memory_used_bytes, 4096u);
  EXPECT_EQ(sample->cpu_usage_ns, 99u);

  Result<std::string> id = reader.ContainerIdOfPid(kPid);
  ASSERT_TRUE(id.ok()) << id.status().message();
  EXPECT_EQ(*id, kId);
  // The agent's own process belongs to the outer container.
  host.Write(ProcCgroup(1), "4:memory:/docker/" + kOuterId + "\n");
  Result<std::string> outer = reader.ContainerIdOfPid(1);
  ASSERT_TRUE(outer.ok()) << outer.status().message();
  EXPECT_EQ(*outer, kOuterId);
}

TEST(CgroupReader, MissingMeasureFilesReadAsZero) {
  CgroupTree host;
  host.Write("proc/self/mountinfo", kV1Mounts);
  host.Write(ProcCgroup(), V1Membership("/docker/" + kId));
  host.Write("sys/fs/cgroup/cpu,cpuacct/docker/" + kId + "/cpuacct.usage", "5000\n");

  Result<CgroupSample> sample = CgroupReader(host.root()).Read(kPid);
  ASSERT_TRUE(sample.ok()) << sample.status().message();
  EXPECT_EQ(sample->cpu_usage_ns, 5000u);
  EXPECT_EQ(sample->memory_used_bytes, 0u);
  EXPECT_EQ(sample->memory_limit_bytes, 0u);
  EXPECT_EQ(sample->memory_cache_bytes, 0u);
  EXPECT_EQ(sample->pids, 0u);
  EXPECT_EQ(sample->io_read_bytes, 0u);
  EXPECT_EQ(sample->io_write_bytes, 0u);
}

TEST(CgroupReader, ARemovedCgroupIsNotFound) {
  CgroupTree host;
  host.Write("proc/self/mountinfo", kV2Mount);
  host.Write(ProcCgroup(), "0::/docker/" + kId + "\n");
  WriteV2Measures(host, "docker/" + kId, "max");
  CgroupReader reader(host.root());
  Result<CgroupPaths> paths = reader.Locate(kPid);
  ASSERT_TRUE(paths.ok()) << paths.status().message();
  ASSERT_TRUE(reader.Read(*paths).ok());

  host.Remove("sys/fs/cgroup/docker/" + kId);  // the container exited
  Result<CgroupSample> sample = reader.Read(*paths);
  ASSERT_FALSE(sample.ok());
  EXPECT_EQ(sample.status().code(), Status::Code::kNotFound);
  EXPECT_NE(sample.status().message().find("is gone"), std::string::npos) << sample.status().message();
}

TEST(CgroupReader, AGonePidIsNotFound) {
  CgroupTree host;
  host.Write("proc/self/mountinfo", kV1Mounts);
  CgroupReader reader(host.root());

  Result<CgroupSample> sample = reader.Read(31337);
  ASSERT_FALSE(sample.ok());
  EXPECT_EQ(sample.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(sample.status().message(), "process 31337 is gone");

  EXPECT_EQ(reader.ContainerIdOfPid(31337).status().code(), Status::Code::kNotFound);
  EXPECT_EQ(reader.NamespacePid(31337).status().code(), Status::Code::kNotFound);
  EXPECT_EQ(reader.Read(0).status().code(), Status::Code::kInvalidArgument);
}

TEST(CgroupReader, UnmountedHierarchiesAreAFailedPrecondition) {
  CgroupTree host;
  host.Write("proc/self/mountinfo", kOverlayMount);  // no cgroup filesystem at all
  host.Write(ProcCgroup(), V1Membership("/docker/" + kId));
  Result<CgroupPaths> paths = CgroupReader(host.root()).Locate(kPid);
  ASSERT_FALSE(paths.ok());
  EXPECT_EQ(paths.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(paths.status().message().find("mountinfo"), std::string::npos) << paths.status().message();
}

// A process that has ended but is not yet reaped (a kernel's PID 1 that
// exits at once) is shown in the root of every hierarchy: its cgroups are
// none of a container's, and the host's cpuset (every core) is never read
// as the kernel's.
TEST(CgroupReader, AProcessInTheRootOfEveryHierarchyIsInNoContainer) {
  CgroupTree host;
  host.Write("proc/self/mountinfo", kV1Mounts);
  host.Write(ProcCgroup(), V1Membership("/", true));
  Result<CgroupPaths> paths = CgroupReader(host.root()).Locate(kPid);
  ASSERT_FALSE(paths.ok());
  EXPECT_EQ(paths.status().code(), Status::Code::kNotFound);
  EXPECT_NE(paths.status().message().find("in no container's cgroup"), std::string::npos) << paths.status().message();
}

// A kernel's process that ended between the engine's inspect and the
// reading left its pid to a host process, in the root cpuset: its cgroups
// are not the container's, and the host's cores are never read as the
// kernel's cpuset.
TEST(CgroupReader, OnlyCgroupsThatNameTheContainerAreItsOwn) {
  CgroupTree host;
  host.Write("proc/self/mountinfo", kV1Mounts);
  host.Write(ProcCgroup(), V1Membership("/docker/" + kId));
  Result<CgroupPaths> mine = CgroupReader(host.root()).Locate(kPid);
  ASSERT_TRUE(mine.ok()) << mine.status().message();
  EXPECT_TRUE(CgroupPathsName(*mine, kId));
  EXPECT_FALSE(CgroupPathsName(*mine, std::string(64, 'f'))) << "another container's id";
  EXPECT_FALSE(CgroupPathsName(*mine, ""));

  const std::string session = "/user.slice/user-1000.slice/session-3.scope";
  WriteV1Measures(host, session);
  host.Write(ProcCgroup(), V1Membership(session, true));
  Result<CgroupPaths> other = CgroupReader(host.root()).Locate(kPid);
  ASSERT_TRUE(other.ok()) << other.status().message();
  EXPECT_FALSE(CgroupPathsName(*other, kId));
  EXPECT_FALSE(CgroupPathsName(CgroupPaths{}, kId)) << "no directory found names no container";
}

TEST(CgroupReader, AProcessOutsideContainersHasNoContainerId) {
  CgroupTree host;
  host.Write("proc/self/mountinfo", kV1Mounts);
  host.Write(ProcCgroup(), V1Membership("/user.slice/user-1000.slice/session-3.scope", true));
  Result<std::string> id = CgroupReader(host.root()).ContainerIdOfPid(kPid);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), Status::Code::kNotFound);
  EXPECT_NE(id.status().message().find("belongs to no container"), std::string::npos) << id.status().message();
}

TEST(CgroupReader, NamespacePidIsTheLastNSpidField) {
  CgroupTree host;
  host.Write("proc/" + std::to_string(kPid) + "/status",
             "Name:\tpython3\nTgid:\t4242\nNgid:\t0\nPid:\t4242\nNSpid:\t4242\t310\t17\nNSpgid:\t4242\t310\t17\n");
  host.Write("proc/77/status", "Name:\tbash\nPid:\t77\nNSpid:\t77\n");
  CgroupReader reader(host.root());
  Result<int> inner = reader.NamespacePid(kPid);
  ASSERT_TRUE(inner.ok()) << inner.status().message();
  EXPECT_EQ(*inner, 17);
  Result<int> same = reader.NamespacePid(77);
  ASSERT_TRUE(same.ok()) << same.status().message();
  EXPECT_EQ(*same, 77);
}

TEST(CgroupReader, NamespacePidWithoutNSpidIsAFailedPrecondition) {
  CgroupTree host;
  host.Write("proc/" + std::to_string(kPid) + "/status", "Name:\tpython3\nTgid:\t4242\nPid:\t4242\nPPid:\t1\n");
  Result<int> inner = CgroupReader(host.root()).NamespacePid(kPid);
  ASSERT_FALSE(inner.ok());
  EXPECT_EQ(inner.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(inner.status().message(),
            "per-process attribution unavailable: this kernel has no NSpid field (Linux < 4.1)");
}

TEST(CgroupReader, ReadsThisProcessOnTheRealHost) {
  CgroupReader reader("/");
  Result<CgroupSample> sample = reader.Read(::getpid());
  ASSERT_TRUE(sample.ok()) << sample.status().message();
  EXPECT_GT(sample->cpu_usage_ns, 0u);
  EXPECT_GT(sample->memory_used_bytes, 0u);
  Result<int> inner = reader.NamespacePid(::getpid());
  ASSERT_TRUE(inner.ok()) << inner.status().message();
  EXPECT_EQ(*inner, ::getpid());
}

TEST(CgroupFiles, KeptOpenOnTheRealHostTheyReadAfreshEachTime) {
  CgroupReader reader("/");
  Result<CgroupPaths> paths = reader.Locate(::getpid());
  ASSERT_TRUE(paths.ok()) << paths.status().message();
  CgroupFiles files(*paths, /*keep_open=*/true);
  EXPECT_GT(files.OpenFiles(), 0u);
  Result<CgroupSample> first = files.Read(CgroupMeasures::kAll);
  ASSERT_TRUE(first.ok()) << first.status().message();
  for (volatile uint64_t spin = 0; spin < 50'000'000; spin = spin + 1) {
  }
  Result<CgroupSample> second = files.Read(CgroupMeasures::kLive);
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_GT(second->cpu_usage_ns, first->cpu_usage_ns);  // the same descriptor, read again
  EXPECT_GT(second->memory_used_bytes, 0u);
  EXPECT_EQ(second->memory_limit_bytes, 0u);  // the other measures are not read
  EXPECT_TRUE(second->cpuset_cpus.empty());
  EXPECT_EQ(CgroupFiles(*paths, /*keep_open=*/false).OpenFiles(), 0u);
}

TEST(CgroupFiles, OffCgroupfsTheyAreReadByPathAndALiveReadLeavesTheRest) {
  CgroupTree host;
  host.Write("proc/self/mountinfo", kV1Mounts);
  host.Write(ProcCgroup(), V1Membership("/docker/" + kId));
  WriteV1Measures(host, "/docker/" + kId);
  Result<CgroupPaths> paths = CgroupReader(host.root()).Locate(kPid);
  ASSERT_TRUE(paths.ok()) << paths.status().message();
  const CgroupFiles files(*paths, /*keep_open=*/true);
  EXPECT_EQ(files.OpenFiles(), 0u);  // a removed directory of a fake tree would read stale
  ExpectV1Measures(*files.Read(CgroupMeasures::kAll));
  host.Write("sys/fs/cgroup/memory/docker/" + kId + "/memory.usage_in_bytes", "1048576\n");
  Result<CgroupSample> some = files.Read(CgroupMeasures::kLive);
  ASSERT_TRUE(some.ok()) << some.status().message();
  EXPECT_EQ(some->cpu_usage_ns, 123456789u);
  EXPECT_EQ(some->memory_used_bytes, 1048576u);  // read afresh, by path
  EXPECT_EQ(some->pids, 7u);
  EXPECT_EQ(some->memory_cache_bytes, 0u);
  EXPECT_EQ(some->io_read_bytes, 0u);
  EXPECT_EQ(some->memory_limit_bytes, 0u);
  EXPECT_EQ(some->oom_kills, 0u);
  EXPECT_TRUE(some->cpuset_cpus.empty());
  host.Remove("sys/fs/cgroup");
  EXPECT_EQ(files.Read(CgroupMeasures::kLive).status().code(), Status::Code::kNotFound);
}

}  // namespace
}  // namespace slotd

namespace slotd {
namespace {

// The layout a reader learns from each kind of mount table, and the host
// warnings (CgroupLayoutWarnings) and engine warnings (EngineCgroupWarnings)
// each one gives.
TEST(CgroupLayout, EachMountTableIsItsLayoutAndOnlyAHostThatCannotBeMeasuredWarns) {
  const std::string kSystemdOnly = kTmpfsMount + "40 31 0:37 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd\n";
  std::string kNoMemoryV1Mounts = kV1Mounts;
  kNoMemoryV1Mounts.erase(kNoMemoryV1Mounts.find("35 31"), kNoMemoryV1Mounts.find("38 31") - kNoMemoryV1Mounts.find("35 31"));
  struct Case {
    std::string mountinfo;
    CgroupLayout layout;
    std::string warning;  // a part of the one warning; empty: none
  };
  const Case cases[] = {
      {"", CgroupLayout::kNone, "no cgroup file system is mounted"},
      {kTmpfsMount, CgroupLayout::kNone, "no cgroup file system is mounted"},
      {kSystemdOnly, CgroupLayout::kNone, "no cgroup file system is mounted"},
      {kV1Mounts, CgroupLayout::kV1, ""},
      // systemd's hybrid layout: every controller on v1, an empty v2 hierarchy: measured as v1.
      {kV1Mounts + kUnifiedMount, CgroupLayout::kHybrid, ""},
      {kNoMemoryV1Mounts, CgroupLayout::kV1, "but none with the memory controller"},
      {kNoMemoryV1Mounts + kUnifiedMount, CgroupLayout::kHybrid,
       "beside a v2 one (systemd's hybrid layout) but none with the memory controller"},
      {kV2Mount, CgroupLayout::kV2, ""},
      {kSystemdOnly + kUnifiedMount, CgroupLayout::kV2, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.mountinfo);
    CgroupTree host;
    host.Write("proc/self/mountinfo", c.mountinfo);
    const CgroupHost detected = DetectCgroupHost(host.root());
    EXPECT_EQ(detected.layout, c.layout);
    EXPECT_FALSE(detected.systemd_manages);
    const std::vector<std::string> warnings = CgroupLayoutWarnings(detected);
    ASSERT_EQ(warnings.size(), c.warning.empty() ? 0u : 1u);
    if (!c.warning.empty()) EXPECT_NE(warnings[0].find(c.warning), std::string::npos) << warnings[0];
  }
  CgroupTree systemd_host;
  systemd_host.Write("proc/self/mountinfo", kV2Mount);
  systemd_host.Write("run/systemd/system/.keep", "");
  EXPECT_TRUE(DetectCgroupHost(systemd_host.root()).systemd_manages);
}

TEST(CgroupLayout, OnlyTheCgroupfsDriverOnAV2HostThatSystemdManagesWarns) {
  struct Case {
    CgroupHost host;
    EngineInfo engine;
    bool warns;
  };
  const Case cases[] = {
      {{CgroupLayout::kV2, true, {}}, {"/var/lib/docker", "cgroupfs", "2"}, true},
      {{CgroupLayout::kV2, true, {}}, {"/var/lib/docker", "systemd", "2"}, false},
      {{CgroupLayout::kV2, false, {}}, {"/var/lib/docker", "cgroupfs", "2"}, false},  // no systemd: cgroupfs is the way
      {{CgroupLayout::kV1, true, {}}, {"/var/lib/docker", "cgroupfs", "1"}, false},
      {{CgroupLayout::kV2, true, {}}, {"/var/lib/containers/storage", "", ""}, false},  // an engine that does not say
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.engine.cgroup_driver + " v" + c.engine.cgroup_version);
    const std::vector<std::string> warnings = EngineCgroupWarnings(c.host, c.engine);
    ASSERT_EQ(warnings.size(), c.warns ? 1u : 0u);
    if (c.warns) EXPECT_NE(warnings[0].find("native.cgroupdriver=systemd"), std::string::npos) << warnings[0];
  }
}

}  // namespace
}  // namespace slotd
