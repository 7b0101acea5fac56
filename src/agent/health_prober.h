// HealthProber: runs one probe of a kernel's health check. Exec checks run
// in the kernel's container through the engine. HTTP and TCP checks connect
// to 127.0.0.1 where the kernel's port is: its published host port when the
// kernel has a network of its own the engine publishes from (bridge), the
// container port itself when it shares the host's network (host), and the
// container port on the kernel's own loopback, inside its network namespace,
// when it has no network (none): the socket is made in that namespace (the
// prober's thread enters it for that call alone), so no kernel needs a
// network for its check and nothing else of the agent runs in it.
//
// The agent, not the engine, runs every check (Docker's HEALTHCHECK is not
// used): the same checks on every engine (Podman runs its health checks
// from systemd timers, which a node may not have), timing to the
// millisecond, and each result goes straight into the kernel's lifecycle.
//
// A kernel's network namespace is opened once per start of its container
// and kept open until the kernel is forgotten, so that a probe does not ask
// the engine for the container's PID each time.
//
// Thread-safe: probes of different containers may run at once.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <string>

#include "model/health_check.h"
#include "common/mutex.h"
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
  // Makes a probe's socket: (domain, type, protocol) as socket(2) takes
  // them; the descriptor, or -1 when it cannot.
  using SocketOpener = std::function<int(int domain, int type, int protocol)>;

  // Opens the agent's own network namespace, to come back to.
  explicit HealthProber(ContainerEngine& engine);
  ~HealthProber();  // closes the namespaces it holds

  HealthProber(const HealthProber&) = delete;
  HealthProber& operator=(const HealthProber&) = delete;

  // Probes container `container_id` as `rule` says, within rule.timeout.
  ProbeResult Probe(const HealthRule& rule, const std::string& container_id, const ProbeAddress& address);
  // Closes what it holds of `container_id` (its network namespace).
  void Forget(const std::string& container_id) EXCLUDES(netns_mutex_);

 private:
  // A kernel's network namespace, held open, and the PID it was opened
  // through: /proc/<pid>/ns/net still names it while that process lives.
  struct HeldNetns {
    pid_t pid = 0;
    int fd = -1;
    ino_t inode = 0;
  };
  // A duplicate of the held namespace of `container_id` (the caller closes
  // it), opened anew through the engine's PID 1 when none is held or the
  // one held is no longer the container's; -1 with `why` when it cannot.
  int NetnsOf(const std::string& container_id, std::string& why) EXCLUDES(netns_mutex_);

  ProbeResult Exec(const HealthRule& rule, const std::string& container_id) const;
  // HTTP GET or TCP connect to 127.0.0.1:port on a socket `open_socket` makes.
  static ProbeResult Connect(const HealthRule& rule, int port, const SocketOpener& open_socket);
  // Connect on a socket made in the container's network namespace.
  ProbeResult ConnectInside(const HealthRule& rule, const std::string& container_id, int port);
  // A socket made in network namespace `ns`: this thread enters it for the
  // socket(2) call alone and goes back at once (a socket keeps the namespace
  // it was made in, so all the rest runs in the agent's own). Should it fail
  // to go back, the agent aborts rather than run anything in a kernel's
  // network. -1 with `why` when it cannot.
  int SocketInNetns(int ns, int domain, int type, int protocol, std::string& why) const;

  ContainerEngine& engine_;
  const int own_netns_;  // the agent's network namespace; -1 when it could not be opened
  Mutex netns_mutex_;
  std::map<std::string, HeldNetns> netns_ GUARDED_BY(netns_mutex_);  // by container id
};

}  // namespace slotd
