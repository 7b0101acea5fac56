// Text views of an agent's measures for `slotctl stats`, `slotctl top` and
// `slotctl node --top`. Each view takes the API's JSON as it is
// (GET /v1/stats, GET /v1/kernels/{id}/stats; docs/api.md) and returns the
// text to print, every line ending with "\n". A value the agent leaves absent
// (a kernel's cpu percent before its second sample, a core's utilisation
// before the second sweep) prints as "-".
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace slotctl {

// A size for reading at a glance: FormatSize's exact form when it is short
// ("256m", "1536k", "17"), else rounded to one decimal ("97.7m").
std::string ShortSize(uint64_t bytes);

// The order of a kernels table.
enum class KernelOrder {
  kById,               // as the agent lists them
  kByCpuPercentDesc,   // busiest first; kernels without a percent last, by id
};

// The kernels of a GET /v1/stats body as a table: KERNEL, CPU% (of one core),
// MEM (used/limit, "-" for no limit), PIDS, IO R/W (bytes read/written),
// GPU MEM (the kernel's memory over all its devices; "-" when it has none
// measured).
std::string FormatKernelsTable(const nlohmann::json& stats, KernelOrder order);

// The agent's slice in a GET /v1/stats body: a line of per-core utilisation,
// a line of memory used of the agent's share, a table of its devices
// (PLUGIN, DEVICE, MEASURED, MEM used/total, UTIL%, FOREIGN MEM, FOREIGN
// PIDS) when it has any, and a "warning:" line for each device used by
// processes that are not this agent's kernels', each device whose meter
// failed, and when GPU processes cannot be attributed on this host.
std::string FormatAgentSlice(const nlohmann::json& stats);

// One line about a GET /v1/stats body: the agent id, the local time of the
// sweep, how long it took and how many kernels it measured ("no sweep yet"
// before the first).
std::string FormatStatsHeader(const nlohmann::json& stats);

// A GET /v1/kernels/{id}/stats body: the kernel's state and measures (cpu,
// memory, pids, io, and a table of its GPU processes per device), or its
// state and the agent's reason when it is not measured.
std::string FormatKernelStats(const nlohmann::json& kernel);

}  // namespace slotctl
