// HealthProber: runs one probe of a kernel's health check. Exec checks run
// in the kernel's container through the engine. HTTP and TCP checks connect
// to 127.0.0.1 where the kernel's port is: its published host port when the
// kernel has a network of its own the engine publishes from (bridge), the
// container port itself when it shares the host's network (host), and the
// container port on the kernel's own loopback, inside its network namespace,
// when it has no network (none): the agent enters that namespace from a
// thread of its own, so no kernel needs a network for its check.
//
// The agent, not the engine, runs every check (Docker's HEALTHCHECK is not
// used): the same checks on every engine (Podman runs its health checks
// from systemd timers, which a node may not have), timing to the
// millisecond, and each result goes straight into the kernel's lifecycle.
//
// Thread-safe: each Probe call is independent.
#pragma once

#include <string>

#include "agent/health_check.h"
#include "engine/container_engine.h"

namespace slotd {

// Where a kernel's HTTP or TCP check connects.
struct ProbeAddress {
  int port = 0;              // on 127.0.0.1
  bool kernel_netns = false; // inside the kernel's network namespace (its network is "none")
};

// The outcome of one probe.
struct ProbeResult {
  bool passed = false;
  std::string output;  // what it said (exec output, HTTP status line, the error), at most kMaxHealthOutput bytes
};

class HealthProber {
 public:
  explicit HealthProber(ContainerEngine& engine) : engine_(engine) {}

  // Probes container `container_id` as `rule` says, within rule.timeout.
  ProbeResult Probe(const HealthRule& rule, const std::string& container_id, const ProbeAddress& address) const;

 private:
  ProbeResult Exec(const HealthRule& rule, const std::string& container_id) const;
  // HTTP GET or TCP connect to 127.0.0.1:port in this thread's network namespace.
  static ProbeResult Connect(const HealthRule& rule, int port);
  // Connect from a thread that first enters the network namespace of the
  // container's PID 1.
  ProbeResult ConnectInside(const HealthRule& rule, const std::string& container_id, int port) const;

  ContainerEngine& engine_;
};

}  // namespace slotd
