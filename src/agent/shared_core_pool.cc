#include "agent/shared_core_pool.h"

#include <algorithm>
#include <utility>

#include <spdlog/spdlog.h>

#include "common/units.h"
#include "model/reconcile.h"

namespace slotd {

SharedCorePool::SharedCorePool(KernelStore& store, ContainerEngine& engine, std::vector<int> allowed_cores)
    : store_(store), engine_(engine), allowed_(std::move(allowed_cores)) {
  std::sort(allowed_.begin(), allowed_.end());
}

void SharedCorePool::Check(const std::string& kernel_id) {
  MutexLock lock(to_check_mutex_);
  to_check_.insert(kernel_id);
}

std::string SharedCorePool::PoolNow() const {
  // Every shared kernel is given the same cores: the pool, as the cpu plugin applies it.
  Allocation shared;
  shared.shared_cpu_millis = 1;
  ContainerSpec now;
  for (const auto& plugin : store_.plugins)
    if (plugin->Name() == "cpu") plugin->Apply(shared, now);
  return now.cpuset_cpus;
}

Status SharedCorePool::CheckAdopted() const {
  MutexLock lock(store_.mutex);
  std::vector<reconcile::AdoptedShared> shared;
  for (const auto& [id, k] : store_.table.All())
    if (k.allocation.shared_cpu_millis > 0 && k.holds_resources && !k.container_id.empty())
      shared.push_back({id, k.container_id, k.allocation.shared_cpu_millis, k.applied_cpuset, k.pool_condition});
  const std::string pool_text = PoolNow();
  Result<std::vector<int>> pool = ParseCoreList(pool_text);
  return reconcile::CheckAdoptedShared(allowed_, pool.ok() && !pool_text.empty() ? *pool : std::vector<int>{}, shared);
}

void SharedCorePool::Converge() {
  struct Move {
    std::string kernel_id, container_id, cpuset, applied;
  };
  std::vector<Move> moves;
  // One convergence at a time, from deciding its moves to their end: a later
  // pool's moves never reach the engine before an earlier one's.
  MutexLock converging(converging_);
  {
    MutexLock lock(store_.mutex);
    ContainerSpec now;
    now.cpuset_cpus = PoolNow();
    if (now.cpuset_cpus.empty()) return;  // no pool: nothing to give
    std::vector<const Kernel*> candidates;
    MutexLock checking(to_check_mutex_);
    if (now.cpuset_cpus != converged_pool_) {
      for (const auto& [id, k] : store_.table.All()) candidates.push_back(&k);
      converged_pool_ = now.cpuset_cpus;
    } else {
      for (const std::string& id : to_check_)
        if (const Kernel* k = store_.table.Find(id)) candidates.push_back(k);
    }
    for (const Kernel* k : candidates) {
      // Every container that holds the kernel's quota, whether it runs yet or
      // not: one still starting, or waiting for a restart, starts on the pool.
      if (k->allocation.shared_cpu_millis == 0 || !k->holds_resources || k->container_id.empty()) continue;
      if (now.cpuset_cpus == k->applied_cpuset) continue;
      moves.push_back({k->id(), k->container_id, now.cpuset_cpus, k->applied_cpuset});
      Kernel& moving = *store_.table.Change(k->id());
      moving.pending_cpuset = now.cpuset_cpus;
      ++moving.cpuset_moves;
    }
    to_check_.clear();
  }
  for (Move& move : moves) {
    // Adopted: what its container runs on is learnt first (a list does not say).
    if (move.applied.empty())
      if (Result<ContainerInfo> info = engine_.Inspect(move.container_id); info.ok()) move.applied = info->cpuset_cpus;
    const Status updated =
        move.applied == move.cpuset ? Status::Ok() : engine_.UpdateCpuset(move.container_id, move.cpuset);
    MutexLock lock(store_.mutex);
    Kernel* k = store_.table.Change(move.kernel_id);
    if (!k || k->container_id != move.container_id) continue;
    k->pending_cpuset.clear();
    ++k->cpuset_moves;
    std::string condition;
    if (updated.ok()) {
      if (move.applied != move.cpuset)
        spdlog::info("kernel {}: its cores follow the shared pool, now {} (were {})", move.kernel_id, move.cpuset,
                     move.applied);
      k->applied_cpuset = move.cpuset;
    } else {
      k->applied_cpuset = move.applied;
      Check(move.kernel_id);  // tried again by the next call
      condition = "its cores could not follow the shared pool to \"" + move.cpuset + "\" (it runs on \"" +
                  move.applied + "\"): " + updated.message();
    }
    if (condition == k->pool_condition) continue;
    k->pool_condition = std::move(condition);
    if (!k->pool_condition.empty()) spdlog::warn("kernel {}: {}", move.kernel_id, k->pool_condition);
    store_.table.Announce(EventType::kKernelCondition, *k);
  }
}

}  // namespace slotd
