#include "model/label_codec.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>

#include "common/json_reader.h"
#include "common/units.h"

namespace slotd {

using nlohmann::json;

namespace {

// Restoring applies no bound of the API's (RequestLimits): see RequestFromLabel.
constexpr size_t kUnbounded = std::numeric_limits<size_t>::max();
constexpr RequestLimits kRestoreLimits{kUnbounded, kUnbounded, kUnbounded, kUnbounded,
                                       kUnbounded, kUnbounded, kUnbounded, kUnbounded,
                                       kUnbounded, kUnbounded, std::chrono::milliseconds::max()};

// A label's whole number: 1 to `max_digits` decimal digits, or nullopt.
std::optional<int64_t> LabelNumber(const std::string& text, size_t max_digits) {
  const bool digits = !text.empty() && text.size() <= max_digits &&
                      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) return std::nullopt;
  return std::stoll(text);
}

}  // namespace

json RequestLabel(const CreateRequest& request) {
  const ResourceRequest& asked = request.resources;
  // A shared quota as millicores ("250m"), which read back as the same quota.
  json res = {{"cpu", asked.shared_cpu_millis > 0 ? json(FormatMillicores(asked.shared_cpu_millis)) : json(asked.cpu)},
              {"mem", asked.mem_bytes}};
  if (request.resources.shm_bytes) res["shm"] = *request.resources.shm_bytes;
  if (request.resources.scratch_bytes) res["scratch"] = *request.resources.scratch_bytes;
  for (const auto& [slot, count] : request.resources.devices) res[slot] = count;
  json canonical = {{"kernel_id", request.kernel_id}, {"session_id", request.session_id}, {"image", request.image.name},
                    {"command", request.command}, {"env", request.env}, {"resources", res},
                    {"ports", request.resources.ports}, {"labels", request.labels}};
  // Fields added after the first label format appear only when given, so
  // that a request recorded by an older slotd stays the same request.
  if (request.max_lifetime) canonical["max_lifetime"] = FormatDuration(*request.max_lifetime);
  if (request.pull) canonical["pull"] = PullPolicyName(*request.pull);
  if (!request.mounts.empty()) {
    json list = json::array();
    for (const RequestedMount& m : request.mounts)
      list.push_back({{"source", m.source}, {"target", m.target}, {"readonly", m.read_only}});
    canonical["mounts"] = std::move(list);
  }
  WriteStopContract(request.stop, canonical);
  if (request.restart != RestartPolicy{}) canonical["restart"] = RestartPolicyJson(request.restart);
  if (request.health) canonical["health"] = HealthCheckJson(*request.health);
  if (request.idle) canonical["idle"] = IdlePolicyJson(*request.idle);
  return canonical;
}

Result<CreateRequest> RequestFromLabel(const json& label) {
  auto req = ParseRequestWithin(label, kRestoreLimits);
  if (!req.ok()) return req.status().WithPrefix("label " + std::string(label::kRequest));
  return req;
}

json AllocationLabel(const Allocation& allocation) {
  json ports = json::array();
  for (const auto& p : allocation.ports) ports.push_back({{"container", p.container_port}, {"host", p.host_port}});
  json devices = json::object();
  for (const auto& [plugin, ids] : allocation.devices) devices[plugin] = ids;
  json label = {{"cpu", allocation.cores}, {"mem", allocation.mem_bytes}, {"devices", devices}, {"ports", ports}};
  if (allocation.numa_node) label["numa_node"] = *allocation.numa_node;
  if (allocation.shared_cpu_millis > 0) label["cpu_shared"] = allocation.shared_cpu_millis;
  return label;
}

Result<Allocation> AllocationFromLabel(json label) {
  const JsonReader reader(std::move(label), "allocations");
  const JsonField root = reader.Root().Object();
  auto whole = [](const JsonField& f) { return static_cast<int>(f.Count(std::numeric_limits<int>::max())); };
  Allocation a;
  for (const JsonField& core : root.Optional("cpu").Elements()) a.cores.push_back(whole(core));
  std::sort(a.cores.begin(), a.cores.end());
  a.mem_bytes = root.Optional("mem").Count();
  for (const auto& [plugin, ids] : root.Optional("devices").Members()) {
    std::vector<std::string>& held = a.devices[plugin];
    for (const JsonField& id : ids.Elements()) held.push_back(id.String());
  }
  for (const JsonField& port : root.Optional("ports").Elements())
    a.ports.push_back({whole(port["container"]), whole(port["host"])});
  if (root.Has("numa_node")) a.numa_node = whole(root["numa_node"]);
  if (root.Has("cpu_shared")) a.shared_cpu_millis = whole(root["cpu_shared"]);
  if (Status s = reader.Check("label " + std::string(label::kAllocations)); !s.ok()) return s;
  return a;
}

Labels KernelLabels(const Kernel& kernel) {
  Labels labels(kernel.request.labels.begin(), kernel.request.labels.end());
  labels[label::kOwner] = kernel.agent_id;
  labels[label::kAgentId] = kernel.agent_id;
  labels[label::kKernelId] = kernel.request.kernel_id;
  labels[label::kSessionId] = kernel.request.session_id;
  labels[label::kAllocations] = AllocationLabel(kernel.allocation).dump();
  labels[label::kRequest] = RequestLabel(kernel.request).dump();
  if (kernel.deadline) labels[label::kDeadline] = std::to_string(*kernel.deadline);
  if (kernel.run_as) labels[label::kRunAs] = kernel.run_as->Text();
  labels[label::kFormat] = std::to_string(LabelFormatFor(kernel.request));
  if (!kernel.warm_pool.empty()) {
    labels[label::kWarmPool] = kernel.warm_pool;
    labels[label::kFormat] = "7";  // an older slotd would take a warm kernel for a running one
  }
  return labels;
}

int LabelFormatFor(const CreateRequest& request) {
  if (request.resources.shared_cpu_millis > 0) return 6;
  if (request.stop != StopContract{} || request.restart != RestartPolicy{} || request.health || request.idle) return 5;
  return request.resources.scratch_bytes ? 4 : 3;
}

Result<Labels> MigrateLabels(const Labels& labels, const std::string& container_name) {
  int format = 1;
  if (auto it = labels.find(label::kFormat); it != labels.end()) {
    const std::string& text = it->second;
    format = static_cast<int>(LabelNumber(text, 5).value_or(0));
    if (format < 1)
      return Status::InvalidArgument("container " + container_name + ": label " + label::kFormat + " is \"" + text +
                                     "\", not a label format");
  }
  if (format > label::kCurrentFormat)
    return Status::FailedPrecondition(
        "container " + container_name + " was written by a newer slotd (label format " + std::to_string(format) +
        "; this slotd reads formats 1 to " + std::to_string(label::kCurrentFormat) +
        "): run the newer slotd on this node again, or remove the container (docker rm -f " + container_name + ")");
  Labels migrated = labels;
  // 1 -> 2 -> ... -> 7: only the format label changes (see label::kCurrentFormat).
  migrated[label::kFormat] = std::to_string(label::kCurrentFormat);
  return migrated;
}

Result<Kernel> KernelFromContainer(const ContainerInfo& info) {
  Result<Labels> labels = MigrateLabels(info.labels, info.name);
  if (!labels.ok()) return labels.status();
  auto get = [&](const char* key) -> Result<std::string> {
    auto it = labels->find(key);
    if (it == labels->end())
      return Status::InvalidArgument("container " + info.name + " has no label " + key);
    return it->second;
  };
  auto parse = [&](const char* key) -> Result<json> {
    auto text = get(key);
    if (!text.ok()) return text.status();
    std::optional<json> j = ParseJsonWithin(*text);
    if (!j) return Status::InvalidArgument("container " + info.name + ": label " + key + " is not JSON");
    return std::move(*j);
  };
  auto owner = get(label::kOwner);
  auto request_json = parse(label::kRequest);
  auto alloc_json = parse(label::kAllocations);
  if (!owner.ok()) return owner.status();
  if (!request_json.ok()) return request_json.status();
  if (!alloc_json.ok()) return alloc_json.status();
  auto request = RequestFromLabel(*request_json);
  if (!request.ok()) return request.status().WithPrefix("container " + info.name);
  auto allocation = AllocationFromLabel(std::move(*alloc_json));
  if (!allocation.ok()) return allocation.status().WithPrefix("container " + info.name);

  Kernel kernel;
  kernel.request = std::move(*request);
  kernel.agent_id = *owner;
  kernel.container_id = info.id;
  kernel.allocation = std::move(*allocation);
  kernel.created_at = info.created_unix;
  const NameMarks marks = MarksInName(info.name);
  kernel.restarts = marks.restarts;
  kernel.warned = marks.warned;
  if (auto pool = labels->find(label::kWarmPool); pool != labels->end()) kernel.warm_pool = pool->second;
  if (auto run_as = labels->find(label::kRunAs); run_as != labels->end()) {
    kernel.run_as = ParseRunAs(run_as->second);
    if (!kernel.run_as)
      return Status::InvalidArgument("container " + info.name + ": label " + label::kRunAs + " is \"" +
                                     run_as->second + "\", not uid:gid");
  }
  if (auto deadline = labels->find(label::kDeadline); deadline != labels->end()) {
    const std::string& text = deadline->second;
    kernel.deadline = LabelNumber(text, 18);
    if (!kernel.deadline)
      return Status::InvalidArgument("container " + info.name + ": label " + label::kDeadline + " is \"" + text +
                                     "\", not unix seconds");
  }
  return kernel;
}

}  // namespace slotd
