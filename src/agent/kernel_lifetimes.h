// KernelLifetimes: the kernels' timed lives. The ends that come by
// themselves (a lifetime run out, an idle window over, a drain's deadline)
// and their stop (StopExpired), the warning before such an end (Warn), the
// idle windows the stats open and close (NoteActivity), and the restarts:
// those a restart policy asks for (RestartDue) and those a user asks for
// (Restart). A kernel's restarts and warning are recorded in its
// container's name (ContainerName), renamed only here.
//
// Thread-safety: every method may be called from any thread; each takes
// the store's lock itself and calls the engine without it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/container_stopper.h"
#include "agent/kernel_ends.h"
#include "agent/kernel_store.h"
#include "agent/kernel_users.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "config/config.h"
#include "engine/container_engine.h"

namespace slotd {

class KernelLifetimes {
 public:
  // Every reference must outlive it.
  KernelLifetimes(const Config& config, ContainerEngine& engine, const Clock& clock, KernelStore& store,
                  const ContainerStopper& stopper, KernelUsers& users, KernelEnds& ends);

  // Stops every RUNNING or BACKOFF kernel whose deadline (unix seconds) is
  // not after `now`, or every one once the drain's deadline is not after
  // `now`, or whose idle window has lasted its `for`: TERMINATED "lifetime
  // exceeded", "drained" or "idle" (KernelEnds::StopTerminating). A kernel
  // that a call holds waits for the next round, and one whose container
  // cannot be stopped stays as it was for the next.
  void StopExpired(int64_t now) EXCLUDES(store_.mutex);
  // Sends each RUNNING kernel with a warn_before whose lifetime, idle window
  // or drain's deadline ends within it (that end minus `before` not after
  // `now`, unix seconds) its warning signal, once: its container is renamed
  // to record it first (so no agent restart sends it again), then signalled
  // (kernel_warned). A kernel without warn_before is sent nothing. A kernel
  // that a call holds, or whose rename fails, waits for the next round.
  void Warn(int64_t now) EXCLUDES(store_.mutex);
  // Starts again every BACKOFF kernel whose next_restart_at_ms is not after
  // `now_ms` and that nothing else acts on: renames its container to record
  // one more restart, then starts it: RUNNING (kernel_restarted). A start
  // that fails is an end like any other (BACKOFF again, or TERMINATED at
  // the limit). None while a drain has a deadline. Returns when the next
  // BACKOFF kernel is due (unix milliseconds), if one is.
  std::optional<int64_t> RestartDue(int64_t now_ms) EXCLUDES(store_.mutex);
  // Restarts the kernel's container keeping its allocation (re-taking it if
  // the kernel had terminated; kResourceExhausted if it was given away
  // meanwhile); kFailedPrecondition once its lifetime has run out.
  Result<Kernel> Restart(const std::string& kernel_id) EXCLUDES(store_.mutex);

  // How busy a RUNNING kernel was over the last stats interval.
  struct Activity {
    std::string kernel_id;
    std::string container_id;
    double cpu_percent = 0;             // of one core (two busy cores: 200)
    std::optional<double> gpu_percent;  // the busiest device it holds, where a meter measures; unset: none measured
    int64_t at_ms = 0;                  // when measured, unix milliseconds
  };
  // Brings each RUNNING kernel's idle window (idle_since_ms) up to date with
  // `activity`, as its idle rule says (ResolveIdle): below both marks and
  // with no interactive exec open nor any exec in the last two stats
  // intervals, its window starts (kernel_idle) or goes on; otherwise it
  // ends. StopExpired stops a kernel whose window has lasted its `for`;
  // Warn warns it `before` that.
  void NoteActivity(const std::vector<Activity>& activity) EXCLUDES(store_.mutex);

 private:
  // When `kernel`'s idle window ends (unix milliseconds): its idle_since_ms
  // plus its idle rule's `for`; unset while it is not idle.
  std::optional<int64_t> IdleEndMs(const Kernel& kernel) const;

  const Config& config_;
  ContainerEngine& engine_;
  const Clock& clock_;
  KernelStore& store_;
  const ContainerStopper& stopper_;
  KernelUsers& users_;
  KernelEnds& ends_;
  // Held from reading a kernel's name marks to renaming its container, so
  // that a restart and a warning never record over each other. Taken
  // before store_.mutex, never inside it.
  Mutex rename_mutex_ ACQUIRED_BEFORE(store_.mutex);
};

}  // namespace slotd
