// Registrar: keeps one agent registered in etcd, for as long as it runs.
//
// The agent's document (AgentDocument) lives under its key, attached to a
// lease the registrar keeps alive. The key is created in a transaction that
// fails when the key exists, so an agent id registered anywhere in the
// cluster is never taken over: that agent refuses to start (RegisterOnce),
// or, when the id is taken while etcd was out of reach, keeps running
// unregistered and says so (State). A key held by this agent's own previous
// run (its lease id is recorded in the lease file) is taken back.
//
// The document is rewritten when it changes, at most once per write
// interval, so a burst of creates makes few writes and an idle agent writes
// only keep-alives. Losing etcd never touches the agent's kernels or API:
// the registrar retries with a growing delay and registers again, checking
// the id again, when etcd answers.
//
// Threads: one of its own between Start and Stop; State from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "fleet/agent_document.h"
#include "fleet/etcd_client.h"

namespace slotd {

// Where a registration stands, as /health, /v1/agent and /metrics show it.
struct Registration {
  enum class Phase {
    kRegistering,  // no answer from etcd yet
    kRegistered,   // the key is the agent's and current
    kUnreachable,  // etcd does not answer; the key may still be held, until the lease runs out
    kConflict,     // another agent holds the id
  };
  Phase phase = Phase::kRegistering;
  std::string detail;        // why it is not registered: etcd's error, or who holds the id
  int64_t since = 0;         // unix seconds when the phase began
  std::string key;           // <namespace>/agents/<agent-id>
  int64_t lease = 0;         // the lease the key is attached to, when registered
  uint64_t writes = 0;       // documents written (created or updated) so far
  uint64_t keep_alives = 0;  // lease renewals so far
};

// Whether the agent id of `key` is free in etcd before an agent starts:
// FailedPrecondition naming the holder's node and address when a live lease
// other than the one in `lease_file` (the agent's own previous run) holds
// it; the error when etcd refuses the agent's credentials; OK when the id is
// free, or when etcd cannot be reached (registration will check again).
// Registrar::RegisterOnce makes the final, atomic check.
Status CheckAgentIdFree(const EtcdClient& etcd, const std::string& key, const std::string& lease_file);

// "registering", "registered", "unreachable", "conflict".
const char* RegistrationPhaseName(Registration::Phase phase);

class Registrar {
 public:
  struct Options {
    std::string key;                       // <namespace>/agents/<agent-id>
    std::chrono::seconds lease_ttl{10};
    std::string lease_file;                // records the lease id across runs; empty: none
    std::chrono::milliseconds write_interval{250};  // the least time between two document writes
  };

  // `document` builds the agent's document as it is now; it is called from
  // the registrar's thread, a few times a second. `clock` dates the phases
  // (Registration::since).
  Registrar(const EtcdClient& etcd, Options options, std::function<AgentDocument()> document,
            Clock& clock = Clock::Real());
  ~Registrar();

  // Tries to register once, now. FailedPrecondition when another agent
  // holds the id (the message names its node and address: the agent must not
  // start); OK otherwise, also when etcd cannot be reached (State says so,
  // and Start keeps trying).
  Status RegisterOnce() EXCLUDES(mutex_);

  // Starts keeping the registration (and registering, while it is not).
  void Start() EXCLUDES(mutex_);
  // Stops the thread; with `deregister`, revokes the lease, which deletes the
  // key at once (a process that dies instead leaves it to expire).
  void Stop(bool deregister) EXCLUDES(mutex_);

  Registration State() const EXCLUDES(mutex_);

 private:
  // What one registration attempt found.
  enum class Attempt { kRegistered, kUnreachable, kConflict };
  Attempt TryRegister() EXCLUDES(mutex_);
  // One turn of the thread's loop; returns how long to wait before the next.
  std::chrono::milliseconds Tick() EXCLUDES(mutex_);
  void SetPhase(Registration::Phase phase, std::string detail) REQUIRES(mutex_);
  void Run() EXCLUDES(mutex_);

  const EtcdClient& etcd_;
  const Options options_;
  const std::function<AgentDocument()> document_;
  Clock& clock_;

  mutable Mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ GUARDED_BY(mutex_) = false;
  Registration state_ GUARDED_BY(mutex_);
  AgentDocument written_ GUARDED_BY(mutex_);  // the document as last written under the lease
  bool rewrite_ GUARDED_BY(mutex_) = false;   // write the document even if it seems unchanged
  std::chrono::steady_clock::time_point last_write_ GUARDED_BY(mutex_);
  std::chrono::steady_clock::time_point next_keep_alive_ GUARDED_BY(mutex_);
  std::chrono::milliseconds backoff_ GUARDED_BY(mutex_){0};  // the current retry delay; 0: none
  std::thread thread_;
};

}  // namespace slotd
