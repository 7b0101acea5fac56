#include "agent/kernel_ends.h"

#include <cassert>

#include <spdlog/spdlog.h>

namespace slotd {

KernelEnds::KernelEnds(const Config& config, ContainerEngine& engine, const Clock& clock, KernelStore& store,
                       const ContainerStopper& stopper, KernelFiles& files, SharedCorePool& shared_pool)
    : config_(config),
      engine_(engine),
      clock_(clock),
      store_(store),
      stopper_(stopper),
      files_(files),
      shared_pool_(shared_pool) {}

Result<Kernel> KernelEnds::Delete(const std::string& kernel_id) { return Delete(kernel_id, nullptr); }

Result<Kernel> KernelEnds::Delete(KernelHold& held) { return Delete(held.kernel_id(), &held); }

Result<Kernel> KernelEnds::Delete(const std::string& kernel_id, const KernelHold* held) {
  std::string container_id;
  StopContract contract;
  {
    MutexLock lock(store_.mutex);
    // A call that holds the kernel finishes first: a delete comes after it,
    // never in its middle.
    if (!held)
      store_.mutex.Wait(store_.table.holds().Released(),
                        [&]() REQUIRES(store_.mutex) { return !store_.table.holds().Of(kernel_id); });
    const Kernel* k = store_.table.Find(kernel_id);
    if (!k) return store_.Unknown(kernel_id);
    if (Status s = store_.table.Stopping(kernel_id, held); !s.ok()) return s;
    container_id = k->container_id;
    contract = k->request.stop;
  }
  auto [stopped, exit_code, ended_at] = stopper_.Stop(container_id, contract);
  Status removed = stopped.ok() || stopped.code() == Status::Code::kNotFound ? engine_.Remove(container_id, true)
                                                                              : stopped;
  MutexLock lock(store_.mutex);
  if (!store_.table.Find(kernel_id)) return Status::NotFound("kernel " + kernel_id + " was removed meanwhile");
  if (!removed.ok() && removed.code() != Status::Code::kNotFound) {
    if (Status s = store_.table.StopFailed(kernel_id); !s.ok()) return s;
    return removed.WithPrefix("removing kernel " + kernel_id + " (kept with its resources)");
  }
  Result<Kernel> final_record = store_.table.Deleted(kernel_id, exit_code);
  lock.Unlock();
  if (final_record.ok()) {
    files_.Remove(kernel_id);
    shared_pool_.Converge();  // the shared pool grew by its cores
  }
  return final_record;
}

void KernelEnds::StopTerminating(std::vector<ToStop> kernels, const std::string& reason, AfterStop after) {
  for (ToStop& kernel : kernels) {
    stops_.Push([this, kernel = std::move(kernel), reason, after] {
      const auto& [kernel_id, container_id, contract] = kernel;
      const ContainerStopper::Outcome stop = stopper_.Stop(container_id, contract);
      const bool stopped = stop.stopped.ok() || stop.stopped.code() == Status::Code::kNotFound;
      {
        MutexLock lock(store_.mutex);
        const Kernel* k = store_.table.Find(kernel_id);
        if (!k || k->container_id != container_id || k->state() != KernelState::kTerminating) return;
        if (stopped) {
          (void)store_.table.Terminated(kernel_id, stop.exit_code, reason, stop.ended_at);
        } else {
          spdlog::error("kernel {}: to be stopped ({}), but its container {} could not be stopped ({}); retrying",
                        kernel_id, reason, container_id, stop.stopped.message());
          (void)store_.table.StopFailed(kernel_id);
        }
      }
      if (after) after(kernel_id, stopped);
    });
  }
}

void KernelEnds::StopToRestart(KernelHold hold, const ToStop& kernel) {
  auto held = std::make_shared<KernelHold>(std::move(hold));  // the queue's jobs are copied
  stops_.Push([this, held, kernel] {
    const ContainerStopper::Outcome stop = stopper_.Stop(kernel.container_id, kernel.contract);
    const bool stopped = stop.stopped.ok() || stop.stopped.code() == Status::Code::kNotFound;
    MutexLock lock(store_.mutex);
    const KernelHolds::Entry* record = store_.table.holds().Of(kernel.kernel_id);
    const std::string why = record ? record->why : "";
    const Kernel* k = store_.table.Find(kernel.kernel_id);
    if (stopped && k && k->container_id == kernel.container_id && k->state() == KernelState::kRunning) {
      const int64_t ended_at_ms = stop.ended_at ? *stop.ended_at * 1000 : clock_.UnixMillis();
      Ended(store_, kernel.kernel_id, KernelEnd{stop.exit_code, false, ended_at_ms, why, /*forced=*/true});
    } else if (!stopped) {
      spdlog::error("kernel {}: to be restarted ({}), but its container could not be stopped: {}", kernel.kernel_id,
                    why, stop.stopped.message());
    }
    store_.table.Release(*held);
  });
}

void KernelEnds::StopIntruder(const std::string& kernel_id, const std::string& container_id) {
  stops_.Push([this, kernel_id, container_id] {
    const ContainerStopper::Outcome stop = stopper_.Stop(container_id, StopContract{});
    MutexLock lock(store_.mutex);
    const Kernel* k = store_.table.Find(kernel_id);
    if (!k || k->container_id != container_id || k->state() != KernelState::kError) return;
    if (!stop.stopped.ok() && stop.stopped.code() != Status::Code::kNotFound) {
      spdlog::error("kernel {}: could not stop its container {}: {}", kernel_id, container_id, stop.stopped.message());
      return;
    }
    (void)store_.table.Terminated(kernel_id, std::nullopt, "stopped by slotd: its " + k->reason, stop.ended_at);
  });
}

void KernelEnds::Ended(KernelStore& store, const std::string& kernel_id, const KernelEnd& what_ended) {
  assert(&store == &store_);
  const Kernel* k = store.table.Find(kernel_id);
  if (!k) return;
  const KernelEnd& end = what_ended;
  const std::optional<int64_t> ended_at = end.ended_at_ms > 0 ? std::optional(end.ended_at_ms / 1000) : std::nullopt;
  const bool policy_applies = k->state() == KernelState::kRunning || k->state() == KernelState::kBackoff;
  if (!policy_applies) {
    (void)store.table.Terminated(kernel_id, end.exit_code, end.why, ended_at);
    return;
  }
  ExitOutcome outcome = DecideOnExit(ResolveRestart(k->request.restart, config_.container), k->restarts, end,
                                     k->deadline, clock_.UnixMillis());
  if (drain_deadline_ > 0) outcome = {false, 0, end.why};  // a drain with a deadline wins over a restart
  if (outcome.restart) {
    (void)store.table.BackOff(kernel_id, end.exit_code, outcome.reason, ended_at, outcome.restart_at_ms);
  } else {
    (void)store.table.Terminated(kernel_id, end.exit_code, outcome.reason, ended_at);
  }
}

}  // namespace slotd
