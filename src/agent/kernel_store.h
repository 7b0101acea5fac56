// KernelStore: the agent's kernels and what they hold, under the one core
// lock: the kernel table (each kernel's record, lifecycle and holds) and
// the resource plugins (every allocation). It holds no other state and
// calls no engine. The agent's owners (creating, stopping, converging, exec, ...)
// each take the store: they read and change kernels under `mutex`, and call
// the engine without it.
//
// Thread-safety: `table` and `plugins` are guarded by `mutex`, which no
// owner holds across an engine call or file I/O.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/event_hub.h"
#include "agent/kernel_table.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "model/kernel.h"
#include "resources/plugin.h"

namespace slotd {

class KernelStore {
 public:
  // `hub` and `clock` must outlive the store. `agent_id` names the agent in
  // its events and its refusals.
  KernelStore(std::string agent_id, std::vector<std::unique_ptr<ResourcePlugin>> plugins, EventHub& hub,
              const Clock& clock);
  KernelStore(const KernelStore&) = delete;
  KernelStore& operator=(const KernelStore&) = delete;

  // A copy of kernel `kernel_id`; kNotFound naming it and the agent.
  Result<Kernel> Get(const std::string& kernel_id) const EXCLUDES(mutex);
  // kNotFound for `kernel_id`, as Get and the API say it.
  Status Unknown(const std::string& kernel_id) const;

  // A RUNNING kernel as the stats loop measures it: its container and the
  // devices it holds (plugin name -> device ids); no more is copied.
  struct RunningKernel {
    std::string kernel_id;
    std::string container_id;
    std::map<std::string, std::vector<std::string>> devices;
    int shared_cpu_millis = 0;  // its quota from the shared pool; 0: exclusive cores
  };
  // Every RUNNING kernel that has a container, in kernel id order.
  std::vector<RunningKernel> RunningKernels() const EXCLUDES(mutex);
  // How many kernels of the agent's users have not ended (neither
  // TERMINATED nor ERROR); a warm pool's kernels, made or WARM, are not
  // theirs until given.
  int ActiveKernels() const EXCLUDES(mutex);

  mutable Mutex mutex;
  std::vector<std::unique_ptr<ResourcePlugin>> plugins GUARDED_BY(mutex);
  KernelTable table GUARDED_BY(mutex);

 private:
  const std::string agent_id_;
};

}  // namespace slotd
