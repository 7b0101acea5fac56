// KernelCreator: the create of a kernel, all or nothing. It admits the
// request (what this agent never allows), reserves the id and the
// resources in the table, brings the image onto the node and decides the
// user the kernel runs as, makes its scratch and mount binds, creates and
// starts its container, and checks what started; any failure undoes all of
// it. A repeat of a create under way waits for it and shares its outcome.
//
// Thread-safety: every method may be called from any thread; each takes
// the store's lock itself and calls the engine and the files without it.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/container_stopper.h"
#include "agent/device_manager.h"
#include "agent/kernel_files.h"
#include "agent/kernel_service.h"
#include "agent/kernel_store.h"
#include "agent/kernel_users.h"
#include "agent/mounts.h"
#include "agent/node_images.h"
#include "agent/shared_core_pool.h"
#include "common/clock.h"
#include "config/config.h"
#include "engine/container_engine.h"
#include "model/image_user.h"
#include "model/kernel.h"

namespace slotd {

class KernelCreator {
 public:
  using CreateOutcome = KernelService::CreateOutcome;
  // Every reference must outlive it.
  KernelCreator(const Config& config, ContainerEngine& engine, const Clock& clock, KernelStore& store,
                const ContainerStopper& stopper, SharedCorePool& shared_pool, KernelFiles& files, NodeImages& images,
                KernelUsers& users, DeviceManager& devices);

  // Creates and starts a kernel for `request` (KernelService::CreateKernel
  // says what it answers); `warm_pool`: the pool the kernel is made for (it
  // ends WARM, with no deadline, and a request naming its id is kConflict),
  // or empty.
  Result<CreateOutcome> Create(const CreateRequest& request, const std::string& warm_pool) EXCLUDES(store_.mutex);

  // What Create decides before it reserves anything: the pull policy and
  // the request's mounts, resolved.
  struct Admitted {
    PullPolicy policy;
    std::vector<ResolvedMount> mounts;
  };
  // The refusal of what `request` may not ask of this agent whatever it
  // holds (device variables, mounts, a looser pull policy, a lifetime past
  // the cap, a scratch size it cannot enforce); otherwise what it admits.
  Result<Admitted> Admit(const CreateRequest& request) const;
  // When a kernel of `request` created at `from` (unix seconds) reaches the
  // end of its lifetime: its max_lifetime, else [container] max-lifetime,
  // rounded up to whole seconds; unset when neither sets one.
  std::optional<int64_t> DeadlineOf(const CreateRequest& request, int64_t from) const;

 private:
  // Brings the image of `request`'s kernel, reserved PULLING by Create, onto
  // the node as `policy` asks and decides the user it runs as
  // (KernelUsers::Decide); then the kernel is PREPARING. On failure, undoes
  // the reservation.
  Result<RunAs> PrepareImage(const CreateRequest& request, PullPolicy policy) EXCLUDES(store_.mutex);
  // Builds, creates and starts the container of `kernel`, reserved
  // (PREPARING) by Create; on failure, undoes the reservation. `run_as`:
  // the user it runs as, given to the engine as numbers and recorded in
  // label kRunAs; `mounts`: the request's mounts, resolved.
  Result<CreateOutcome> CreateContainer(const CreateRequest& request, const Kernel& kernel, const RunAs& run_as,
                                        const std::vector<ResolvedMount>& mounts) EXCLUDES(store_.mutex);
  // The container `kernel` (reserved for `request`) runs in, but for its
  // user, scratch and mounts: image, command, labels, limits, environment,
  // and each plugin's part (cores, memory, devices, ports).
  ContainerSpec SpecFor(const CreateRequest& request, const Kernel& kernel) EXCLUDES(store_.mutex);
  // After a start: what the kernel's first process sees at each mount is
  // what was checked (VerifyMounted), and it runs as `run_as` and not as
  // root unless allowed (KernelUsers::VerifyIds). kPermissionDenied saying which.
  Status VerifyStarted(const std::string& kernel_id, const std::string& container_id,
                       const std::vector<ResolvedMount>& mounts, const std::optional<RunAs>& run_as);
  // Undoes the reservation of a kernel that has no container yet: its
  // files, its resources, its entry. Returns `why`.
  Status AbandonReservation(const std::string& kernel_id, const Status& why) EXCLUDES(store_.mutex);
  // The lowest NUMA node with room for all of `request`'s topology-bound
  // units (cores, devices); nullopt when none has.
  std::optional<int> ChooseNumaNode(const ResourceRequest& request) const REQUIRES(store_.mutex);
  std::string SlotTypes() const REQUIRES(store_.mutex);  // "cpu, mem, mock.device"

  const Config& config_;
  ContainerEngine& engine_;
  const Clock& clock_;
  KernelStore& store_;
  const ContainerStopper& stopper_;
  SharedCorePool& shared_pool_;
  KernelFiles& files_;
  NodeImages& images_;
  KernelUsers& users_;
  DeviceManager& devices_;

  // The outcome of a create under way, which repeats of the same request
  // wait for and share. (Not who owns the kernel: its PULLING or PREPARING
  // state is, KernelTable::OwnedByACall.)
  struct PendingCreate {
    CreateRequest request;  // the request under way
    bool done = false;
    Result<CreateOutcome> outcome = Status::Internal("the create has not finished");
  };
  std::map<std::string, std::shared_ptr<PendingCreate>> pending_ GUARDED_BY(store_.mutex);  // by kernel id
  std::condition_variable create_done_;  // with store_.mutex: a pending create finished
};

}  // namespace slotd
