#include "cli/stats_view.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <vector>

#include "cli/table.h"
#include "common/units.h"

namespace slotctl {

using nlohmann::json;

// The views read the agent's JSON through non-const copies, so that a field
// an agent leaves out reads as null instead of being undefined behaviour.
namespace {

// The whole number of 0 or more at `j`, or 0 when it is absent or anything
// else (a float is not converted: one out of range would be undefined).
uint64_t Bytes(const json& j) { return j.is_number_unsigned() ? j.get<uint64_t>() : 0; }

// The whole number at `j` that fits int64, or 0 when it is absent or anything else.
int64_t Whole(const json& j) {
  if (j.is_number_unsigned()) return j.get<uint64_t>() <= uint64_t(INT64_MAX) ? j.get<int64_t>() : 0;
  return j.is_number_integer() ? j.get<int64_t>() : 0;
}

// "12.5" for a number, "-" for anything else (null: not measured yet).
std::string Percent(const json& j) {
  if (!j.is_number()) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", j.get<double>());
  return text;
}

// The string at `j`, or "-".
std::string Text(const json& j) { return j.is_string() ? j.get<std::string>() : j.is_null() ? "-" : j.dump(); }

// Local "HH:MM:SS" of unix milliseconds.
std::string ClockTime(int64_t unix_ms) {
  const time_t seconds = static_cast<time_t>(unix_ms / 1000);
  struct tm local {};
  localtime_r(&seconds, &local);
  char text[16];
  std::strftime(text, sizeof text, "%H:%M:%S", &local);
  return text;
}

// "used/total" sizes; "-" for a total of 0 (no limit).
std::string UsedOf(uint64_t used, uint64_t total) {
  return ShortSize(used) + "/" + (total == 0 ? "-" : ShortSize(total));
}

// The first 12 hex digits of a container id.
std::string ShortId(const std::string& id) { return id.substr(0, 12); }

// "pid 4321 (container 0123456789ab) 1g" for a foreign process.
std::string ForeignProcess(json& p) {
  const std::string where =
      p["container_id"].is_string() ? "container " + ShortId(p["container_id"].get<std::string>()) : "no container";
  return "pid " + Text(p["host_pid"]) + " (" + where + ") " + ShortSize(Bytes(p["memory_bytes"]));
}

}  // namespace

std::string ShortSize(uint64_t bytes) {
  const std::string exact = slotd::FormatSize(bytes);
  if (exact.size() <= 5) return exact;
  static const char* kSuffix[] = {"", "k", "m", "g", "t"};
  double value = static_cast<double>(bytes);
  int i = 0;
  while (i < 4 && value >= 1024) {
    value /= 1024;
    ++i;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%s", value, kSuffix[i]);
  return text;
}

std::string FormatKernelsTable(const json& stats, KernelOrder order) {
  json s = stats;
  // (cpu percent, row); -1 sorts a kernel without a percent after every measured one.
  std::vector<std::pair<double, std::vector<std::string>>> kernels;
  for (auto& k : s["kernels"]) {
    uint64_t gpu_memory = 0;
    for (auto& device : k["devices"]) gpu_memory += Bytes(device["memory_used_bytes"]);
    json& percent = k["cpu"]["percent"];
    kernels.push_back({percent.is_number() ? percent.get<double>() : -1.0,
                       {Text(k["kernel_id"]), Percent(percent),
                        UsedOf(Bytes(k["memory"]["used_bytes"]), Bytes(k["memory"]["limit_bytes"])), Text(k["pids"]),
                        ShortSize(Bytes(k["io"]["read_bytes"])) + "/" + ShortSize(Bytes(k["io"]["write_bytes"])),
                        k["devices"].empty() ? "-" : ShortSize(gpu_memory)}});
  }
  if (order == KernelOrder::kByCpuPercentDesc)
    std::stable_sort(kernels.begin(), kernels.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::vector<std::string>> rows;
  for (auto& [cpu, row] : kernels) rows.push_back(std::move(row));
  return FormatTable({"KERNEL", "CPU%", "MEM", "PIDS", "IO R/W", "GPU MEM"}, rows);
}

std::string FormatAgentSlice(const json& stats) {
  json s = stats;
  json& agent = s["agent"];
  std::string text = "cores:";
  for (auto& core : agent["cores"])
    text += "  " + Text(core["core"]) + " " + Percent(core["utilization_percent"]) +
            (core["utilization_percent"].is_number() ? "%" : "");
  text += "\nmemory: " + ShortSize(Bytes(agent["memory"]["used_bytes"])) + " used of " +
          ShortSize(Bytes(agent["memory"]["capacity_bytes"])) + "\n";

  const bool attributed = !s["attribution_unavailable"].is_string();
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> warnings;
  for (auto& d : agent["devices"]) {
    const std::string name = Text(d["plugin"]) + " " + Text(d["device"]);
    const bool measured = d.value("measured", false);
    std::string pids;
    std::vector<std::string> foreign;
    for (auto& p : d["foreign"]) {
      pids += (pids.empty() ? "" : ",") + Text(p["host_pid"]);
      foreign.push_back(ForeignProcess(p));
    }
    rows.push_back({Text(d["plugin"]), Text(d["device"]), measured ? "yes" : "no",
                    measured ? UsedOf(Bytes(d["memory_used_bytes"]), Bytes(d["memory_total_bytes"])) : "-",
                    measured ? Text(d["utilization_percent"]) : "-",
                    measured && attributed ? ShortSize(Bytes(d["foreign_memory_bytes"])) : "-",
                    pids.empty() ? "-" : pids});
    if (d["error"].is_string()) warnings.push_back("warning: " + name + " not measured: " + d["error"].get<std::string>());
    if (!foreign.empty()) {
      std::string list;
      for (const auto& p : foreign) list += (list.empty() ? "" : ", ") + p;
      warnings.push_back("warning: " + name + " is also used by processes that are not this agent's kernels': " + list);
    }
  }
  if (!attributed)
    warnings.push_back("warning: GPU processes are not attributed to kernels on this host, so foreign usage is unknown: " +
                       s["attribution_unavailable"].get<std::string>());
  if (!rows.empty())
    text += "\n" + FormatTable({"PLUGIN", "DEVICE", "MEASURED", "MEM", "UTIL%", "FOREIGN MEM", "FOREIGN PIDS"}, rows);
  for (const auto& w : warnings) text += w + "\n";
  return text;
}

std::string FormatStatsHeader(const json& stats) {
  json s = stats;
  std::string text = "agent " + Text(s["agent_id"]);
  const int64_t at = Whole(s["collected_at_ms"]);
  if (at == 0) return text + "  no sweep yet\n";
  char sweep[48];
  std::snprintf(sweep, sizeof sweep, "sweep %.1f ms", static_cast<double>(Whole(s["sweep_us"])) / 1000);
  const size_t kernels = s["kernels"].size();
  return text + "  " + ClockTime(at) + "  " + sweep + "  " + std::to_string(kernels) +
         (kernels == 1 ? " kernel" : " kernels") + "\n";
}

std::string FormatKernelStats(const json& kernel) {
  json k = kernel;
  std::string text = "kernel " + Text(k["kernel_id"]) + ": " + Text(k["state"]);
  if (!k.value("measured", false)) return text + ", not measured: " + Text(k["reason"]) + "\n";
  char cpu_time[32];
  std::snprintf(cpu_time, sizeof cpu_time, "%.1fs", static_cast<double>(Bytes(k["cpu"]["usage_ns"])) / 1e9);
  json& cpu_percent = k["cpu"]["percent"];
  text += ", container " + ShortId(Text(k["container_id"])) + ", sampled at " +
          ClockTime(Whole(k["sampled_at_ms"])) + "\n";
  // A shared kernel's use against its quota too: "23.0% of one core, 92.0% of its 250m quota".
  std::string quota;
  if (k["cpu"].contains("quota_millis") && k["cpu"]["quota_percent"].is_number())
    quota = ", " + Percent(k["cpu"]["quota_percent"]) + "% of its " + slotd::FormatMillicores(Whole(k["cpu"]["quota_millis"])) +
            " quota";
  text += "cpu     " + Percent(cpu_percent) + (cpu_percent.is_number() ? "% of one core" : " (known from the next sample)") +
          quota + ", " + cpu_time + " in all\n";
  const uint64_t limit = Bytes(k["memory"]["limit_bytes"]);
  text += "memory  " + ShortSize(Bytes(k["memory"]["used_bytes"])) +
          (limit == 0 ? std::string(" used, no limit") : " used of " + ShortSize(limit)) + ", cache " +
          ShortSize(Bytes(k["memory"]["cache_bytes"])) + "\n";
  text += "pids    " + Text(k["pids"]) + "\n";
  text += "io      " + ShortSize(Bytes(k["io"]["read_bytes"])) + " read, " + ShortSize(Bytes(k["io"]["write_bytes"])) +
          " written\n";
  std::vector<std::vector<std::string>> rows;
  for (auto& d : k["devices"]) {
    std::string processes;
    for (auto& p : d["processes"])
      processes += (processes.empty() ? "" : ", ") + Text(p["host_pid"]) +
                   (p["kernel_pid"].is_number() ? " (" + Text(p["kernel_pid"]) + " in the kernel)" : "") + " " +
                   ShortSize(Bytes(p["memory_bytes"]));
    rows.push_back({Text(d["plugin"]), Text(d["device"]), ShortSize(Bytes(d["memory_used_bytes"])),
                    processes.empty() ? "-" : processes});
  }
  if (!rows.empty()) text += "\n" + FormatTable({"PLUGIN", "DEVICE", "MEM", "PROCESSES (HOST PID)"}, rows);
  return text;
}

}  // namespace slotctl
