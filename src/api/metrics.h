// RenderMetrics: GET /metrics, the Prometheus text exposition of one stats
// snapshot (docs/api.md lists every family).
//
// Each call builds a fresh registry from the snapshot and serialises it; no
// state is kept between scrapes, so the series of a kernel that is no longer
// in the snapshot are gone from the next scrape. Every series has the label
// agent_id; kernel series add kernel_id, device series plugin and device,
// core series core. Values are in base units (bytes, seconds) and ratios
// (1.0 = one whole core or device); counters end in _total.
//
// Thread-safety: a pure function of its arguments; call from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "stats/measures.h"

namespace slotd {

// What /metrics tells besides the snapshot; facts of the agent core at scrape time.
struct MetricsFacts {
  // Kernels in the agent's table per state name ("RUNNING", ...); every
  // state should be present, 0 where none is in it.
  std::map<std::string, int> kernels_by_state;
  bool engine_reachable = false;  // as GET /health reports it
  bool draining = false;          // the agent takes no new kernels (POST /v1/agent/drain)
  int kernels_with_condition = 0;  // RUNNING kernels whose container was changed behind the agent's back
  // Restarts by their restart policy, by kernel id, of the kernels that
  // have a policy or were restarted.
  std::map<std::string, int64_t> kernel_restarts;
  // The health of the RUNNING kernels that have a health check, by kernel id.
  struct KernelHealth {
    bool ready = false;
    bool healthy = false;
    int64_t checks = 0;  // probes since its container started
  };
  std::map<std::string, KernelHealth> kernel_health;
  // The owned devices of plugins that watch health, with their health and drain.
  struct Device {
    std::string plugin;
    std::string device;
    bool healthy = true;  // false: unhealthy or unknown
    bool drained = false;
  };
  std::vector<Device> devices;
  // The agent's etcd registration ([etcd]); absent when the agent runs standalone.
  struct Etcd {
    bool registered = false;  // the key is the agent's and current
    uint64_t writes = 0;      // documents written so far
    uint64_t keep_alives = 0; // lease renewals so far
  };
  std::optional<Etcd> etcd;
  // What build the agent is (common/version.h, label::kCurrentFormat): the
  // labels of slotd_build_info.
  struct Build {
    std::string version;
    std::string commit;
    int label_format = 0;
  };
  Build build;
};

// The Content-Type of RenderMetrics' text (the exposition format 0.0.4).
inline constexpr char kMetricsContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// The exposition of `snapshot` and `facts`.
std::string RenderMetrics(const StatsSnapshot& snapshot, const MetricsFacts& facts);

}  // namespace slotd
