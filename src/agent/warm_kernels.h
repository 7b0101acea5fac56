// WarmKernels: the warm pools' kernels ([[pool]]; see agent/warm_pool.h).
// They are made ahead of requests (Fill), given to the creates that match
// (Give), counted for the API (Count), and told apart from given ones when
// a relist adopts them (StateOf, Keeps); one no pool keeps any more is
// removed (RemoveUnkept), never adopted.
//
// Thread-safety: every method may be called from any thread; Keeps alone is
// called under the store's lock, the others take it themselves.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <vector>

#include "agent/device_manager.h"
#include "agent/kernel_creator.h"
#include "agent/kernel_ends.h"
#include "agent/kernel_files.h"
#include "agent/kernel_service.h"
#include "agent/kernel_store.h"
#include "agent/node_images.h"
#include "agent/warm_pool.h"
#include "common/clock.h"
#include "config/config.h"
#include "engine/container_engine.h"

namespace slotd {

class WarmKernels {
 public:
  using CreateOutcome = KernelService::CreateOutcome;
  using PoolCount = KernelService::PoolCount;
  // Every reference must outlive it. The pools are read from `config`.
  WarmKernels(const Config& config, ContainerEngine& engine, const Clock& clock, KernelStore& store,
              KernelCreator& creator, KernelEnds& ends, KernelFiles& files, NodeImages& images, DeviceManager& devices);

  // The pools, as [[pool]] gives them; empty when their entries are
  // refused (status() says why: the agent must not start).
  const std::vector<WarmPool>& Pools() const { return pools_; }
  const Status& status() const { return pools_status_; }

  // Gives `request` a WARM kernel of the first pool it matches: its record
  // (WarmClaims) written, then the kernel RUNNING as the request with the
  // warm kernel's id. nullopt when no pool serves it or none has a WARM
  // kernel free (the create goes on as any other), or when the record
  // cannot be written (logged).
  std::optional<CreateOutcome> Give(const CreateRequest& request) EXCLUDES(store_.mutex);
  // Per pool: how many WARM kernels it has now, how many are being made,
  // and why its latest kernel could not be made, while that holds.
  std::map<std::string, PoolCount> Count() const EXCLUDES(store_.mutex);
  // One round of keeping the pools full: removes the pools' kernels that
  // ended before any create was given them, and WARM kernels no pool wants
  // (its entry gone or changed, or more than its count, or any while the
  // agent drains: none can be given), then creates what each pool lacks,
  // one after another until `stop` is asked for. Nothing is made while the
  // agent drains, nor reserved before its image is on the node (pulled
  // first where [container] auto-pull allows). A pool whose kernel could
  // not be made is tried again 10 s later, twice as long after each
  // failure in a row, at most 5 minutes.
  void Fill(const std::stop_token& stop) EXCLUDES(store_.mutex);

  // What a relist makes of a running container made for a warm pool:
  // RUNNING as its record says when it was given to a create (`kernel` then
  // takes the record's request, creation and deadline, and leaves its
  // pool), WARM otherwise. Errors: a record that cannot be read.
  Result<KernelState> StateOf(Kernel& kernel) const;
  // Whether a pool keeps `kernel`, a WARM kernel never given, found in
  // container `info`; one no pool keeps (its entry gone or in another
  // shape) is queued for RemoveUnkept and must not be adopted. `store`:
  // the store this was built with, whose lock the caller holds.
  bool Keeps(KernelStore& store, const Kernel& kernel, const ContainerInfo& info) REQUIRES(store.mutex);
  // Removes the containers Keeps queued, with their files. One that cannot
  // be removed refuses the start (`at_start`), naming it and what to do;
  // later it is logged, and the next relist tries again.
  Status RemoveUnkept(bool at_start) EXCLUDES(store_.mutex);
  // Removes the records of given kernels that no longer exist (their
  // containers removed while the agent was away) and of writes never ended.
  void DropStaleClaims() EXCLUDES(store_.mutex);

 private:
  // Whether `pool`'s image is on the node, pulled first when [container]
  // auto-pull asks: OK, or why a kernel of it cannot be made, saying what
  // to do. Reserves nothing.
  Status ImageReady(const WarmPool& pool);

  const Config& config_;
  ContainerEngine& engine_;
  const Clock& clock_;
  KernelStore& store_;
  KernelCreator& creator_;
  KernelEnds& ends_;
  KernelFiles& files_;
  NodeImages& images_;
  DeviceManager& devices_;

  std::vector<WarmPool> pools_;
  Status pools_status_;
  // A pool's kernel, never given, that no pool keeps, as Keeps found it.
  struct Unkept {
    std::string kernel_id;
    std::string container_id;
    std::string container_name;
    std::string pool;
  };
  std::vector<Unkept> unkept_ GUARDED_BY(store_.mutex);  // Keeps's, under the lock its caller holds
  // Per pool whose latest kernel could not be made: why, and when Fill
  // tries again, later after each failure in a row, so that a missing image
  // is not retried (and logged) every round. Gone once a kernel is made.
  struct Trouble {
    int failures = 0;         // in a row
    int64_t retry_at_ms = 0;  // unix milliseconds
    std::string reason;       // the latest failure's message
  };
  std::map<std::string, Trouble> trouble_ GUARDED_BY(store_.mutex);
};

}  // namespace slotd
