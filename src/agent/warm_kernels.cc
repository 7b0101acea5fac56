#include "agent/warm_kernels.h"

#include <algorithm>
#include <cassert>

#include <spdlog/spdlog.h>

namespace slotd {

namespace {

// How long FillPools waits before trying a pool again after a kernel of it
// could not be made (an image missing, no room): kPoolRetryMs after the
// first failure, twice as long after each further failure in a row, at
// most kPoolRetryCapMs.
constexpr int64_t kPoolRetryMs = 10'000;
constexpr int64_t kPoolRetryCapMs = 300'000;

int64_t PoolRetryDelayMs(int failures) {
  return std::min(kPoolRetryCapMs, kPoolRetryMs << std::clamp(failures - 1, 0, 8));
}

}  // namespace

WarmKernels::WarmKernels(const Config& config, ContainerEngine& engine, const Clock& clock, KernelStore& store,
                         KernelCreator& creator, KernelEnds& ends, KernelFiles& files, NodeImages& images,
                         DeviceManager& devices)
    : config_(config),
      engine_(engine),
      clock_(clock),
      store_(store),
      creator_(creator),
      ends_(ends),
      files_(files),
      images_(images),
      devices_(devices) {
  Result<std::vector<WarmPool>> pools = WarmPoolsOf(config_);
  if (pools.ok()) pools_ = std::move(*pools);
  pools_status_ = pools.status();
}

std::optional<WarmKernels::CreateOutcome> WarmKernels::Give(const CreateRequest& request) {
  if (pools_.empty() || !request.ids.kernel_generated) return std::nullopt;
  auto pool = std::find_if(pools_.begin(), pools_.end(), [&](const WarmPool& p) { return MatchesPool(request, p); });
  if (pool == pools_.end()) return std::nullopt;
  // What the agent refuses of any request it refuses of this one: the create
  // that follows says so.
  if (devices_.Draining().draining || !creator_.Admit(request).ok()) return std::nullopt;
  std::string kernel_id;
  KernelHold hold;  // declared before the locks below: given back after them
  {
    MutexLock lock(store_.mutex);
    for (const auto& [id, kernel] : store_.table.All()) {
      if (kernel.state() == KernelState::kWarm && kernel.warm_pool == pool->name && !store_.table.OwnedByACall(kernel)) {
        kernel_id = id;
        break;
      }
    }
    if (kernel_id.empty()) return std::nullopt;
    Result<KernelHold> held = store_.table.Hold(kernel_id, KernelTable::Act::kGiveWarm);
    if (!held.ok()) return std::nullopt;
    hold = std::move(*held);
  }
  const int64_t now = clock_.UnixSeconds();
  WarmClaims::Claim claim{request, now, creator_.DeadlineOf(request, now)};
  claim.request.kernel_id = kernel_id;
  if (request.ids.session_generated) claim.request.session_id = kernel_id;
  // Recorded before it is given: an agent killed from here on finds the kernel given.
  const Status recorded = files_.claims().Write(kernel_id, claim);
  MutexLock lock(store_.mutex);
  store_.table.Release(hold);
  if (!recorded.ok()) {
    spdlog::error("warm pool {}: kernel {} cannot be given to a create, which makes a kernel of its own: {}",
                  pool->name, kernel_id, recorded.message());
    return std::nullopt;
  }
  Kernel* kernel = store_.table.Change(kernel_id);
  if (!kernel || kernel->state() != KernelState::kWarm) {  // it ended or was deleted meanwhile
    files_.claims().Remove(kernel_id);
    return std::nullopt;
  }
  kernel->warm_pool.clear();
  if (Status given = store_.table.Given(kernel_id, claim.request, claim.given_at, claim.deadline); !given.ok()) {
    files_.claims().Remove(kernel_id);
    return std::nullopt;
  }
  spdlog::info("kernel {}: given from warm pool {} (session {})", kernel_id, pool->name, claim.request.session_id);
  return CreateOutcome{*kernel, true};
}

Result<KernelState> WarmKernels::StateOf(Kernel& kernel) const {
  Result<std::optional<WarmClaims::Claim>> claim = files_.claims().Read(kernel.id());
  if (!claim.ok()) return claim.status();
  if (!*claim) return KernelState::kWarm;
  kernel.request = std::move((*claim)->request);
  kernel.created_at = (*claim)->given_at;
  kernel.deadline = (*claim)->deadline;
  kernel.warm_pool.clear();
  return KernelState::kRunning;
}

Status WarmKernels::RemoveUnkept(bool at_start) {
  std::vector<Unkept> unkept;
  {
    MutexLock lock(store_.mutex);
    unkept.swap(unkept_);
  }
  for (const Unkept& warm : unkept) {
    const Status removed = engine_.Remove(warm.container_id, /*force=*/true);
    if (removed.ok() || removed.code() == Status::Code::kNotFound) {
      spdlog::info("warm kernel {}: removed: made for warm pool {}, which this agent's config no longer has in that "
                   "shape, and never given",
                   warm.kernel_id, warm.pool);
      files_.Remove(warm.kernel_id);
      continue;
    }
    const Status why = Status::Unavailable(
        "warm kernel " + warm.kernel_id + " (container " + warm.container_name + "), made for warm pool " +
        warm.pool + ", which this agent's config no longer has in that shape, cannot be removed: " +
        removed.message() + "; remove it (docker rm -f " + warm.container_name + "), then start the agent again");
    if (at_start) return why;
    spdlog::error("{} (tried again at the next relist)", why.message());
  }
  return Status::Ok();
}

Status WarmKernels::ImageReady(const WarmPool& pool) {
  const std::string& image = pool.shape.image.name;
  Result<std::optional<ImageInfo>> ensured = images_.Ensure(pool.shape.image, config_.container.auto_pull);
  if (!ensured.ok()) return ensured.status();
  if (*ensured) return Status::Ok();
  Result<ImageInfo> info = engine_.InspectImage(image);
  if (info.ok()) return Status::Ok();
  if (info.status().code() != Status::Code::kNotFound) return info.status().WithPrefix("inspecting image " + image);
  return Status::NotFound("image " + image + " not found on this node's engine (" + info.status().message() +
                          "); load or pull it (slotctl pull " + image + "), let the agent pull it ([container] "
                          "auto-pull), or name another image in [[pool]] \"" + pool.name + "\"");
}

std::map<std::string, WarmKernels::PoolCount> WarmKernels::Count() const {
  std::map<std::string, PoolCount> counts;
  for (const WarmPool& pool : pools_) counts[pool.name];
  MutexLock lock(store_.mutex);
  for (const auto& [name, trouble] : trouble_) {
    if (!counts.count(name)) continue;
    counts[name].trouble = trouble.reason;
    counts[name].retry_at = (trouble.retry_at_ms + 999) / 1000;
  }
  for (const auto& [id, kernel] : store_.table.All()) {
    if (kernel.warm_pool.empty()) continue;
    const KernelState state = kernel.state();
    if (state == KernelState::kWarm) ++counts[kernel.warm_pool].warm;
    if (state == KernelState::kPulling || state == KernelState::kPreparing) ++counts[kernel.warm_pool].making;
  }
  return counts;
}

void WarmKernels::Fill(const std::stop_token& stop) {
  if (pools_.empty()) return;
  const bool draining = devices_.Draining().draining;  // asked first: its lock is never taken inside store_.mutex
  std::vector<KernelHold> unwanted;  // held until removed
  std::vector<const WarmPool*> wanted;
  {
    MutexLock lock(store_.mutex);
    std::map<std::string, int> have;
    for (const auto& [id, kernel] : store_.table.All()) {
      if (kernel.warm_pool.empty()) continue;
      const KernelState state = kernel.state();
      if (state == KernelState::kPulling || state == KernelState::kPreparing) {
        ++have[kernel.warm_pool];
        continue;
      }
      if (store_.table.OwnedByACall(kernel)) continue;
      const std::string& name = kernel.warm_pool;
      auto pool = std::find_if(pools_.begin(), pools_.end(), [&](const WarmPool& p) { return p.name == name; });
      const bool fits = pool != pools_.end() && HasPoolsShape(kernel.request, *pool);
      if (state == KernelState::kWarm && fits && !draining && have[kernel.warm_pool] < pool->count) {
        ++have[kernel.warm_pool];
        continue;
      }
      if (state == KernelState::kWarm || state == KernelState::kTerminated || state == KernelState::kError) {
        if (Result<KernelHold> hold = store_.table.Hold(id, KernelTable::Act::kRemoveWarm); hold.ok())
          unwanted.push_back(std::move(*hold));
      }
    }
    const int64_t now_ms = clock_.UnixMillis();
    for (const WarmPool& pool : pools_) {
      auto trouble = trouble_.find(pool.name);
      if (draining || (trouble != trouble_.end() && trouble->second.retry_at_ms > now_ms)) continue;
      for (int i = have[pool.name]; i < pool.count; ++i) wanted.push_back(&pool);
    }
  }
  for (KernelHold& hold : unwanted) {
    Result<Kernel> removed = ends_.Delete(hold);
    if (!removed.ok())
      spdlog::warn("warm kernel {}: cannot remove it: {}", hold.kernel_id(), removed.status().message());
  }
  std::set<std::string> failed;  // pools that could not make a kernel this round
  std::set<std::string> ready;   // pools whose image is on the node, as found this round
  for (const WarmPool* pool : wanted) {
    if (stop.stop_requested()) return;
    if (failed.count(pool->name)) continue;
    // The image first: no core or quota is held (and no shared kernel's
    // cpuset moves) for a kernel whose image is not there.
    Status made = ready.count(pool->name) ? Status::Ok() : ImageReady(*pool);
    if (made.ok()) {
      ready.insert(pool->name);
      CreateRequest request = pool->shape;
      request.kernel_id = GenerateKernelId();
      request.session_id = request.kernel_id;
      made = creator_.Create(request, pool->name).status();
    }
    int64_t delay_ms = 0;
    {
      MutexLock lock(store_.mutex);
      if (made.ok()) {
        trouble_.erase(pool->name);
        continue;
      }
      Trouble& trouble = trouble_[pool->name];
      delay_ms = PoolRetryDelayMs(++trouble.failures);
      trouble.retry_at_ms = clock_.UnixMillis() + delay_ms;
      trouble.reason = made.message();
    }
    failed.insert(pool->name);
    spdlog::warn("warm pool {}: cannot make a kernel (tried again in {} s): {}", pool->name, delay_ms / 1000,
                 made.message());
  }
}

bool WarmKernels::Keeps(KernelStore& store, const Kernel& kernel, const ContainerInfo& info) {
  assert(&store == &store_);
  if (PoolKeeps(pools_, kernel.warm_pool, kernel.request)) return true;
  store_.mutex.AssertHeld();  // as `store.mutex`, which the caller holds
  unkept_.push_back({kernel.id(), info.id, info.name, kernel.warm_pool});
  return false;
}

void WarmKernels::DropStaleClaims() {
  files_.claims().RemoveLeftovers();
  const std::vector<std::string> claimed = files_.claims().KernelIds();
  std::vector<std::string> stale;
  {
    MutexLock lock(store_.mutex);
    for (const std::string& kernel_id : claimed)
      if (!store_.table.Find(kernel_id)) stale.push_back(kernel_id);
  }
  for (const std::string& kernel_id : stale) files_.claims().Remove(kernel_id);
}

}  // namespace slotd
