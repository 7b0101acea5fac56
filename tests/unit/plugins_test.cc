// The cpu, memory and port plugins on their own: what a kernel gets, the
// messages a user reads when there is no room, how a restore (Claim) refuses
// what is not this agent's to give, and that freeing is idempotent.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/units.h"
#include "resources/cpu_plugin.h"
#include "resources/memory_plugin.h"
#include "resources/port_plugin.h"

namespace slotd {
namespace {


// A request for `cpu` cores, `mem` bytes and host ports for `ports`.
ResourceRequest Request(int cpu, uint64_t mem = 256 * kMiB, std::vector<int> ports = {}) {
  ResourceRequest request;
  request.cpu = cpu;
  request.mem_bytes = mem;
  request.ports = std::move(ports);
  return request;
}

// The "used" figure a plugin reports for `slot`.
int64_t Used(const ResourcePlugin& plugin, const std::string& slot) {
  return plugin.Describe()[slot]["used"].get<int64_t>();
}

// ------------------------------------------------------------------------ cpu

// Cores 2, 3, 5 and 7 on one NUMA node: an allow-list with holes.
CpuPlugin Cpus() { return CpuPlugin({2, 3, 5, 7}, {}); }

TEST(CpuPluginTest, AllocatesTheLowestFreeAllowedCores) {
  CpuPlugin cpu = Cpus();
  Allocation first, second, third;
  ASSERT_TRUE(cpu.Allocate("k1", Request(2), first).ok());
  EXPECT_EQ(first.cores, (std::vector<int>{2, 3}));
  ASSERT_TRUE(cpu.Allocate("k2", Request(1), second).ok());
  EXPECT_EQ(second.cores, (std::vector<int>{5}));

  cpu.Free("k1");
  ASSERT_TRUE(cpu.Allocate("k3", Request(3), third).ok());
  EXPECT_EQ(third.cores, (std::vector<int>{2, 3, 7}));  // around k2's core 5
}

TEST(CpuPluginTest, ExhaustionSaysRequestedFreeAndCapacityAndTakesNothing) {
  CpuPlugin cpu = Cpus();
  Allocation held, refused;
  ASSERT_TRUE(cpu.Allocate("k1", Request(3), held).ok());

  Status s = cpu.Allocate("k2", Request(2), refused);
  EXPECT_EQ(s.code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(s.message(), "insufficient cpu: requested 2, free 1 of 4");
  EXPECT_TRUE(refused.cores.empty());
  EXPECT_EQ(Used(cpu, "cpu"), 3);
}

TEST(CpuPluginTest, DescribeReportsCapacityUsedFreeAndTheAllowList) {
  CpuPlugin cpu = Cpus();
  Allocation held;
  ASSERT_TRUE(cpu.Allocate("k1", Request(1), held).ok());
  nlohmann::json d = cpu.Describe()["cpu"];
  EXPECT_EQ(d["capacity"], 4);
  EXPECT_EQ(d["used"], 1);
  EXPECT_EQ(d["free"], 3);
  EXPECT_EQ(d["cores"], "2-3,5,7");
}

TEST(CpuPluginTest, ClaimRefusesACoreHeldByAnotherKernelAndTakesNothing) {
  CpuPlugin cpu = Cpus();
  Allocation held;
  ASSERT_TRUE(cpu.Allocate("k1", Request(1), held).ok());  // core 2

  Allocation clashing;
  clashing.cores = {2, 5};
  Status s = cpu.Claim("k2", clashing);
  EXPECT_EQ(s.code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(s.message(), "cpu core 2 is already held by kernel k1");
  EXPECT_EQ(Used(cpu, "cpu"), 1);  // core 5 was not taken either
}

TEST(CpuPluginTest, ClaimRefusesACoreOutsideTheAllowList) {
  CpuPlugin cpu = Cpus();
  Allocation outside;
  outside.cores = {3, 4};
  Status s = cpu.Claim("k1", outside);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(s.message(), "cpu core 4 is not in this agent's allowed-cores (2-3,5,7)");
  EXPECT_EQ(Used(cpu, "cpu"), 0);
}

TEST(CpuPluginTest, ClaimOfWhatTheKernelAlreadyHoldsSucceeds) {
  CpuPlugin cpu = Cpus();
  Allocation held;
  ASSERT_TRUE(cpu.Allocate("k1", Request(2), held).ok());
  EXPECT_TRUE(cpu.Claim("k1", held).ok());
  EXPECT_EQ(Used(cpu, "cpu"), 2);
}

TEST(CpuPluginTest, FreeReleasesOnlyThatKernelAndIsIdempotent) {
  CpuPlugin cpu = Cpus();
  Allocation a, b;
  ASSERT_TRUE(cpu.Allocate("k1", Request(2), a).ok());
  ASSERT_TRUE(cpu.Allocate("k2", Request(1), b).ok());
  cpu.Free("k1");
  cpu.Free("k1");
  cpu.Free("never-allocated");
  EXPECT_EQ(Used(cpu, "cpu"), 1);
  Allocation again;
  ASSERT_TRUE(cpu.Allocate("k3", Request(2), again).ok());
  EXPECT_EQ(again.cores, (std::vector<int>{2, 3}));
}

TEST(CpuPluginTest, ApplySetsTheCpusetToTheHeldCores) {
  Allocation alloc;
  alloc.cores = {2, 3, 7};
  ContainerSpec spec;
  Cpus().Apply(alloc, spec);
  EXPECT_EQ(spec.cpuset_cpus, "2-3,7");
}

// --------------------------------------------------------------------- memory

// A request for a quota of `millis` from the shared pool.
ResourceRequest Shared(int millis) {
  ResourceRequest request = Request(0);
  request.shared_cpu_millis = millis;
  return request;
}

TEST(CpuPluginTest, SharedKernelsTakeQuotaFromTheCoresNoKernelHoldsUpToThePoolsCapacity) {
  CpuPlugin cpu = Cpus();  // 2, 3, 5, 7
  Allocation exclusive, a, b, refused;
  ASSERT_TRUE(cpu.Allocate("x", Request(2), exclusive).ok());  // 2, 3: the pool is 5, 7 (2000m)
  ASSERT_TRUE(cpu.Allocate("a", Shared(1500), a).ok());
  EXPECT_TRUE(a.cores.empty());
  EXPECT_EQ(a.shared_cpu_millis, 1500);
  ASSERT_TRUE(cpu.Allocate("b", Shared(500), b).ok());
  Status s = cpu.Allocate("c", Shared(10), refused);
  EXPECT_EQ(s.code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(s.message(), "insufficient shared cpu: requested 10m, free 0m of 2000m in the shared pool (cores 5,7, the "
                         "allowed cores no kernel holds exclusively)");
  EXPECT_EQ(refused.shared_cpu_millis, 0);

  nlohmann::json shared = cpu.Describe()["cpu_shared"];
  EXPECT_EQ(shared["capacity"], 2000);
  EXPECT_EQ(shared["used"], 2000);
  EXPECT_EQ(shared["free"], 0);
  EXPECT_EQ(shared["kernels"], 2);
  EXPECT_EQ(shared["cores"], "5,7");
  EXPECT_EQ(cpu.Describe()["cpu"]["free"], 0);  // both pool cores are needed by the shared quotas

  // A shared kernel runs on the whole pool under its quota.
  ContainerSpec spec;
  cpu.Apply(a, spec);
  EXPECT_EQ(spec.cpuset_cpus, "5,7");
  EXPECT_EQ(spec.cpu_period_us, 100'000);
  EXPECT_EQ(spec.cpu_quota_us, 150'000);

  // Freeing the exclusive kernel grows the pool, and what the next shared kernel is given.
  cpu.Free("x");
  ASSERT_TRUE(cpu.Allocate("c", Shared(10), refused).ok());
  ContainerSpec grown;
  cpu.Apply(a, grown);
  EXPECT_EQ(grown.cpuset_cpus, "2-3,5,7");
}

TEST(CpuPluginTest, AnExclusiveCoreIsNeverGivenWhenThePoolWouldNotHoldItsSharedKernels) {
  CpuPlugin cpu({0, 1}, {});
  Allocation shared, refused, taken;
  ASSERT_TRUE(cpu.Allocate("s", Shared(250), shared).ok());
  ASSERT_TRUE(cpu.Allocate("x", Request(1), taken).ok());  // the pool keeps core 1 for s's 250m
  Status s = cpu.Allocate("y", Request(1), refused);
  EXPECT_EQ(s.code(), Status::Code::kResourceExhausted);
  EXPECT_NE(s.message().find("the shared pool (cores 1) holds 1 shared kernel(s) with 250m"), std::string::npos)
      << s.message();
  EXPECT_TRUE(refused.cores.empty());
  EXPECT_EQ(Used(cpu, "cpu"), 1);
  // With the shared kernel gone, the last core can be given.
  cpu.Free("s");
  EXPECT_TRUE(cpu.Allocate("y", Request(1), refused).ok());
}

TEST(CpuPluginTest, OvercommitLetsQuotasAddUpToMoreThanThePoolsCores) {
  CpuPlugin cpu({0}, {}, /*shared_overcommit=*/3);
  Allocation a, b;
  ASSERT_TRUE(cpu.Allocate("a", Shared(2000), a).ok());
  ASSERT_TRUE(cpu.Allocate("b", Shared(1000), b).ok());
  EXPECT_EQ(cpu.Allocate("c", Shared(10), b).code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(cpu.Describe()["cpu_shared"]["capacity"], 3000);
}

TEST(CpuPluginTest, ClaimTakesBackAQuotaAsRecordedAndRefusesCoresWithAQuota) {
  CpuPlugin cpu({0, 1}, {});
  Allocation recorded;
  recorded.shared_cpu_millis = 1500;
  ASSERT_TRUE(cpu.Claim("s", recorded).ok());
  EXPECT_EQ(cpu.Describe()["cpu_shared"]["used"], 1500);
  Allocation both = recorded;
  both.cores = {0};
  EXPECT_EQ(cpu.Claim("t", both).code(), Status::Code::kFailedPrecondition);
}

TEST(MemoryPluginTest, AllocatesWithinCapacityAndSaysWhatIsFreeWhenFull) {
  MemoryPlugin mem(kGiB);
  Allocation a, refused;
  ASSERT_TRUE(mem.Allocate("k1", Request(1, 512 * kMiB), a).ok());
  EXPECT_EQ(a.mem_bytes, 512 * kMiB);

  Status s = mem.Allocate("k2", Request(1, 768 * kMiB), refused);
  EXPECT_EQ(s.code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(s.message(), "insufficient mem: requested 768m, free 512m of 1g");
  EXPECT_EQ(refused.mem_bytes, 0u);
  EXPECT_EQ(Used(mem, "mem"), static_cast<int64_t>(512 * kMiB));

  Allocation exact;
  EXPECT_TRUE(mem.Allocate("k3", Request(1, 512 * kMiB), exact).ok());  // exactly what is left
  EXPECT_EQ(mem.Describe()["mem"]["free"], 0);
}

TEST(MemoryPluginTest, ClaimRefusesWhatDoesNotFitBesideTheOthers) {
  MemoryPlugin mem(kGiB);
  Allocation held;
  ASSERT_TRUE(mem.Allocate("k1", Request(1, 512 * kMiB), held).ok());

  Allocation big;
  big.mem_bytes = 768 * kMiB;
  Status s = mem.Claim("k2", big);
  EXPECT_EQ(s.code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(s.message(), "memory 768m does not fit: 512m free of this agent's 1g");
  EXPECT_EQ(Used(mem, "mem"), static_cast<int64_t>(512 * kMiB));
}

// A forged or corrupt allocations label (anyone with access to the engine can
// set labels) must not wrap the arithmetic into "it fits".
TEST(MemoryPluginTest, ClaimRefusesAnAbsurdSizeInsteadOfOverflowing) {
  MemoryPlugin mem(kGiB);
  Allocation held;
  ASSERT_TRUE(mem.Allocate("k1", Request(1, 512 * kMiB), held).ok());

  Allocation absurd;
  absurd.mem_bytes = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(mem.Claim("k2", absurd).code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(Used(mem, "mem"), static_cast<int64_t>(512 * kMiB));
}

TEST(MemoryPluginTest, ClaimByTheSameKernelReplacesItsShare) {
  MemoryPlugin mem(kGiB);
  Allocation held;
  ASSERT_TRUE(mem.Allocate("k1", Request(1, 768 * kMiB), held).ok());
  EXPECT_TRUE(mem.Claim("k1", held).ok());  // not counted twice
  EXPECT_EQ(Used(mem, "mem"), static_cast<int64_t>(768 * kMiB));
}

TEST(MemoryPluginTest, FreeIsIdempotentAndApplySetsTheLimit) {
  MemoryPlugin mem(kGiB);
  Allocation held;
  ASSERT_TRUE(mem.Allocate("k1", Request(1, 256 * kMiB), held).ok());
  mem.Free("k1");
  mem.Free("k1");
  EXPECT_EQ(Used(mem, "mem"), 0);

  ContainerSpec spec;
  mem.Apply(held, spec);
  EXPECT_EQ(spec.memory_bytes, static_cast<int64_t>(256 * kMiB));
}

// ---------------------------------------------------------------------- ports

TEST(PortPluginTest, BindsEachContainerPortToTheLowestFreeHostPort) {
  PortPlugin ports(30000, 30004);
  Allocation a, b;
  ASSERT_TRUE(ports.Allocate("k1", Request(1, kGiB, {8080, 22}), a).ok());
  ASSERT_EQ(a.ports.size(), 2u);
  EXPECT_EQ(a.ports[0].container_port, 8080);
  EXPECT_EQ(a.ports[0].host_port, 30000);
  EXPECT_EQ(a.ports[1].container_port, 22);
  EXPECT_EQ(a.ports[1].host_port, 30001);

  ports.Free("k1");
  ASSERT_TRUE(ports.Allocate("k2", Request(1, kGiB, {80}), b).ok());
  EXPECT_EQ(b.ports[0].host_port, 30000);
}

TEST(PortPluginTest, ExhaustionNamesTheRangeAndTakesNothing) {
  PortPlugin ports(30000, 30002);
  Allocation a, refused;
  ASSERT_TRUE(ports.Allocate("k1", Request(1, kGiB, {1, 2}), a).ok());
  Status s = ports.Allocate("k2", Request(1, kGiB, {3, 4}), refused);
  EXPECT_EQ(s.code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(s.message(), "insufficient ports: requested 2, free 1 of 3 in port-range 30000-30002");
  EXPECT_TRUE(refused.ports.empty());
  EXPECT_EQ(Used(ports, "ports"), 2);
}

TEST(PortPluginTest, AKernelWithoutPortsTakesNone) {
  PortPlugin ports(30000, 30000);
  Allocation a;
  ASSERT_TRUE(ports.Allocate("k1", Request(1), a).ok());
  EXPECT_TRUE(a.ports.empty());
  EXPECT_EQ(Used(ports, "ports"), 0);
}

TEST(PortPluginTest, ClaimRefusesAPortOutsideTheRangeOrHeldByAnother) {
  PortPlugin ports(30000, 30009);
  Allocation held;
  ASSERT_TRUE(ports.Allocate("k1", Request(1, kGiB, {8080}), held).ok());  // 30000

  Allocation outside;
  outside.ports = {{8080, 31000}};
  Status s = ports.Claim("k2", outside);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(s.message(), "host port 31000 is outside this agent's port-range 30000-30009");

  Allocation clashing;
  clashing.ports = {{22, 30005}, {8080, 30000}};
  s = ports.Claim("k2", clashing);
  EXPECT_EQ(s.code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(s.message(), "host port 30000 is already held by kernel k1");
  EXPECT_EQ(Used(ports, "ports"), 1);  // 30005 was not taken either
}

TEST(PortPluginTest, FreeIsIdempotentAndApplyBindsTheHeldPorts) {
  PortPlugin ports(30000, 30009);
  Allocation held;
  ASSERT_TRUE(ports.Allocate("k1", Request(1, kGiB, {8080}), held).ok());
  ports.Free("k1");
  ports.Free("k1");
  EXPECT_EQ(Used(ports, "ports"), 0);

  ContainerSpec spec;
  ports.Apply(held, spec);
  ASSERT_EQ(spec.ports.size(), 1u);
  EXPECT_EQ(spec.ports[0].container_port, 8080);
  EXPECT_EQ(spec.ports[0].host_port, 30000);
}

}  // namespace
}  // namespace slotd
