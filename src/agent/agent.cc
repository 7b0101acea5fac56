#include "agent/agent.h"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace slotd {

using nlohmann::json;

Agent::Agent(Config config, ContainerEngine& engine, std::vector<std::unique_ptr<ResourcePlugin>> plugins,
             EventHub& hub, Clock& clock)
    : config_(std::move(config)),
      engine_(engine),
      hub_(hub),
      clock_(clock),
      store_(config_.agent.id, std::move(plugins), hub_, clock_),
      exec_(store_, engine_, clock_),
      stopper_(engine_, clock_, config_.container.stop_timeout),
      shared_pool_(store_, engine_, config_.resource.allowed_cores),
      files_(config_),
      images_(config_, engine, hub, clock),
      users_(config_.agent.id, config_.container, engine),
      devices_(config_.agent.id,
               config_.agent.var_base_path.empty() ? "" : config_.agent.var_base_path + "/state.json", store_.plugins,
               store_.mutex, hub_, clock_),
      engine_health_(clock_),
      ends_(config_, engine_, clock_, store_, stopper_, files_, shared_pool_),
      creator_(config_, engine_, clock_, store_, stopper_, shared_pool_, files_, images_, users_, devices_),
      warm_(config_, engine_, clock_, store_, creator_, ends_, files_, images_, devices_),
      converger_(config_, engine_, clock_, store_, shared_pool_, files_, users_, warm_, ends_, engine_health_),
      lifetimes_(config_, engine_, clock_, store_, stopper_, users_, ends_),
      health_(config_, store_, ends_, converger_, devices_) {}

Status Agent::Restore(std::optional<std::vector<ContainerInfo>> listed) {
  devices_.Start();
  ends_.SetDrainDeadline(devices_.Draining().deadline.value_or(0));
  if (!warm_.status().ok()) return warm_.status();
  if (Status s = converger_.Restore(std::move(listed)); !s.ok()) return s;
  health_.ApplyDeviceHealth();
  warm_.DropStaleClaims();
  MutexLock lock(store_.mutex);
  spdlog::info("restored {} kernel(s) from container labels", store_.table.All().size());
  return Status::Ok();
}

Result<Agent::CreateOutcome> Agent::CreateKernel(const CreateRequest& request) {
  if (std::optional<CreateOutcome> given = warm_.Give(request)) return *given;
  return creator_.Create(request, "");
}

std::vector<Kernel> Agent::ListKernels() const {
  MutexLock lock(store_.mutex);
  std::vector<Kernel> out;
  out.reserve(store_.table.All().size());
  for (const auto& [id, kernel] : store_.table.All()) out.push_back(kernel);
  return out;
}

std::vector<std::shared_ptr<const std::string>> Agent::ListKernelRecords(bool with_warm) const {
  MutexLock lock(store_.mutex);
  std::vector<std::shared_ptr<const std::string>> out;
  out.reserve(store_.table.All().size());
  for (const auto& [id, kernel] : store_.table.All())
    if (with_warm || kernel.warm_pool.empty()) out.push_back(store_.table.Record(kernel));
  return out;
}

Result<std::shared_ptr<const std::string>> Agent::KernelRecord(const std::string& kernel_id) const {
  MutexLock lock(store_.mutex);
  const Kernel* kernel = store_.table.Find(kernel_id);
  if (!kernel) return store_.Unknown(kernel_id);
  return store_.table.Record(*kernel);
}

Result<Agent::Drain> Agent::SetDraining(bool drain, std::optional<std::chrono::milliseconds> within) {
  std::optional<int64_t> deadline;
  if (within) deadline = clock_.UnixSeconds() + (within->count() + 999) / 1000;
  Result<Drain> now = devices_.SetDraining(drain, deadline);
  if (now.ok()) ends_.SetDrainDeadline(now->deadline.value_or(0));
  return now;
}

json Agent::DescribeResources() const {
  MutexLock lock(store_.mutex);
  json out = json::object();
  for (const auto& plugin : store_.plugins) out.update(plugin->Describe());
  return out;
}


}  // namespace slotd
