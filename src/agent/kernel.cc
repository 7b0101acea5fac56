#include "agent/kernel.h"

#include <algorithm>
#include <limits>
#include <random>
#include <regex>
#include <set>

#include "common/paths.h"
#include "common/units.h"
#include "engine/image_ref.h"

namespace slotd {
namespace {

// Whether `key` has the form of a device slot type: "<kind>.<name>" in
// lower-case letters, digits, dots and dashes ("cuda.device", "cuda.mig-1c18g").
bool IsDeviceSlotName(const std::string& key) {
  const size_t dot = key.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == key.size() || key.size() > 64) return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-';
  });
}

using nlohmann::json;

// Variables that identify the kernel; with the device variables, the agent sets them and users may not.
const std::set<std::string> kIdentityEnv = {"SLOTD_KERNEL_ID", "SLOTD_AGENT_ID"};

constexpr uint64_t kMinMemory = 6ull << 20;  // the engine refuses less
constexpr uint64_t kMinShm = 1ull << 20;      // below it no ordinary program can use /dev/shm
constexpr uint64_t kMinScratch = 16ull << 20; // below it an ext4 image holds little but its own journal
constexpr size_t kMaxPath = 4096;

// How much a create request may store on the container. The API's bounds
// (docs/api.md, "Limits"): the engine keeps labels, env and command in its
// own records, twice over, so each is bounded, whatever [api] max-body-size
// allows. Restoring a kernel from its labels applies none of them: what an
// earlier agent stored under its own bounds is adopted as it is, so that
// tightening a bound never makes an agent refuse its own running kernels.
struct StoredLimits {
  size_t labels, label_key, label_value;
  size_t env_vars, env_name, env_value, env_total;
  size_t command_args, command_total;
  size_t mounts;
  std::chrono::milliseconds max_lifetime;
};
constexpr StoredLimits kApiLimits{64, 128, 4 << 10, 1024, 256, 32 << 10, 256 << 10, 1024, 256 << 10, 32,
                                  std::chrono::hours(24 * 366)};
constexpr size_t kUnbounded = std::numeric_limits<size_t>::max();
constexpr StoredLimits kRestoreLimits{kUnbounded, kUnbounded, kUnbounded, kUnbounded,
                                      kUnbounded, kUnbounded, kUnbounded, kUnbounded,
                                      kUnbounded, kUnbounded, std::chrono::milliseconds::max()};

Status Bad(const std::string& field, const std::string& what) {
  return Status::InvalidArgument(field + ": " + what);
}

std::string GenerateKernelId() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[20];
  snprintf(buf, sizeof buf, "k-%012llx", static_cast<unsigned long long>(rng() & 0xffffffffffffULL));
  return buf;
}

Status ParseStringMap(const json& body, const char* field, std::map<std::string, std::string>& out) {
  if (!body.contains(field)) return Status::Ok();
  const json& j = body[field];
  if (!j.is_object()) return Bad(field, "expected an object of string values");
  for (const auto& [key, value] : j.items()) {
    if (!value.is_string()) return Bad(std::string(field) + "." + key, "expected a string value");
    out[key] = value.get<std::string>();
  }
  return Status::Ok();
}

// A label's whole number: 1 to `max_digits` decimal digits, or nullopt.
std::optional<int64_t> LabelNumber(const std::string& text, size_t max_digits) {
  const bool digits = !text.empty() && text.size() <= max_digits &&
                      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) return std::nullopt;
  return std::stoll(text);
}

// A size field: a size string ("256m") or a whole number of bytes.
Result<uint64_t> SizeOf(const json& value, const std::string& field) {
  if (value.is_number_integer() && value.get<int64_t>() >= 0) return value.get<uint64_t>();
  if (!value.is_string()) return Bad(field, "expected a size like \"256m\" or a number of bytes");
  auto size = ParseSize(value.get<std::string>());
  if (!size.ok()) return Bad(field, size.status().message());
  return *size;
}

// An absolute path of at most kMaxPath bytes at `field`, normalised
// (no ".", "..", repeated or trailing slashes), or a refusal naming it.
Result<std::string> AbsolutePath(const json& value, const std::string& field) {
  if (!value.is_string()) return Bad(field, "expected an absolute path");
  const std::string path = value.get<std::string>();
  if (path.empty() || path.front() != '/') return Bad(field, "\"" + path + "\" is not an absolute path");
  if (path.size() > kMaxPath) return Bad(field, "longer than " + std::to_string(kMaxPath) + " bytes");
  if (path.find('\0') != std::string::npos) return Bad(field, "has a NUL byte");
  return NormalPath(path);
}

Status ParseMounts(const json& body, const StoredLimits& limits, std::vector<RequestedMount>& out) {
  if (!body.contains("mounts")) return Status::Ok();
  const json& mounts = body["mounts"];
  if (!mounts.is_array()) return Bad("mounts", "expected an array like [{\"source\": \"/srv/data\", \"target\": \"/data\"}]");
  if (mounts.size() > limits.mounts) return Bad("mounts", "too many: at most " + std::to_string(limits.mounts));
  for (size_t i = 0; i < mounts.size(); ++i) {
    const std::string field = "mounts[" + std::to_string(i) + "]";
    const json& m = mounts[i];
    if (!m.is_object()) return Bad(field, "expected an object with source, target and readonly");
    for (const auto& [key, value] : m.items())
      if (key != "source" && key != "target" && key != "readonly")
        return Bad(field + "." + key, "unknown field; known: source, target, readonly");
    if (!m.contains("source")) return Bad(field + ".source", "required: the host directory to mount");
    if (!m.contains("target")) return Bad(field + ".target", "required: where the kernel sees it, e.g. \"/data\"");
    RequestedMount mount;
    Result<std::string> source = AbsolutePath(m["source"], field + ".source");
    if (!source.ok()) return source.status();
    Result<std::string> target = AbsolutePath(m["target"], field + ".target");
    if (!target.ok()) return target.status();
    mount.source = *source;
    mount.target = *target;
    if (m.contains("readonly")) {
      if (!m["readonly"].is_boolean()) return Bad(field + ".readonly", "expected true or false");
      mount.read_only = m["readonly"].get<bool>();
    }
    for (const RequestedMount& earlier : out)
      if (earlier.target == mount.target) return Bad(field + ".target", mount.target + " is the target of an earlier mount");
    out.push_back(std::move(mount));
  }
  return Status::Ok();
}

Status ParseResources(const json& body, ResourceRequest& out) {
  if (!body.contains("resources")) return Status::Ok();
  const json& r = body["resources"];
  if (!r.is_object()) return Bad("resources", "expected an object like {\"cpu\": 1, \"mem\": \"256m\"}");
  for (const auto& [key, value] : r.items()) {
    const std::string field = "resources." + key;
    if (key == "cpu") {
      if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > 4096)
        return Bad(field, "expected a whole number of cores, at least 1");
      out.cpu = value.get<int>();
    } else if (key == "mem") {
      Result<uint64_t> size = SizeOf(value, field);
      if (!size.ok()) return size.status();
      out.mem_bytes = *size;
      if (out.mem_bytes < kMinMemory) return Bad(field, "must be at least 6m (the engine's minimum)");
    } else if (key == "shm") {
      Result<uint64_t> size = SizeOf(value, field);
      if (!size.ok()) return size.status();
      if (*size < kMinShm) return Bad(field, "must be at least 1m");
      out.shm_bytes = *size;
    } else if (key == "scratch") {
      Result<uint64_t> size = SizeOf(value, field);
      if (!size.ok()) return size.status();
      if (*size < kMinScratch) return Bad(field, "must be at least 16m");
      out.scratch_bytes = *size;
    } else if (IsDeviceSlotName(key)) {
      if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() > 1024)
        return Bad(field, "expected a whole number of devices, 0 or more");
      if (value.get<int>() > 0) out.devices[key] = value.get<int>();
    } else {
      return Bad(field, "unknown slot type; known: cpu, mem, shm, scratch, <kind>.device and other device slots of the "
                        "agent's plugins like cuda.mig-1c18g (slotctl info lists them)");
    }
  }
  return Status::Ok();
}

}  // namespace

bool IsValidKernelId(const std::string& id) {
  static const std::regex kPattern("[A-Za-z0-9][A-Za-z0-9._-]{0,63}");
  return std::regex_match(id, kPattern);
}

namespace {

Result<CreateRequest> ParseRequest(const json& body, const StoredLimits& limits) {
  if (!body.is_object()) return Bad("request body", "expected a JSON object");
  static const std::vector<std::string> kKnown = {"kernel_id", "session_id", "image",  "command",     "env",
                                                  "resources", "ports",      "labels", "max_lifetime",
                                                  "mounts",    "pull"};
  for (const auto& [key, value] : body.items()) {
    if (std::find(kKnown.begin(), kKnown.end(), key) == kKnown.end()) {
      std::string known;
      for (const std::string& name : kKnown) known += (known.empty() ? "" : ", ") + name;
      return Bad(key, "unknown field; known: " + known);
    }
  }
  CreateRequest req;
  for (const char* field : {"kernel_id", "session_id"}) {
    if (!body.contains(field)) continue;
    if (!body[field].is_string() || !IsValidKernelId(body[field].get<std::string>()))
      return Bad(field, "expected a string matching [A-Za-z0-9][A-Za-z0-9._-]{0,63}");
  }
  req.kernel_id = body.contains("kernel_id") ? body["kernel_id"].get<std::string>() : GenerateKernelId();
  req.session_id = body.contains("session_id") ? body["session_id"].get<std::string>() : req.kernel_id;

  if (!body.contains("image") || !body["image"].is_string() || body["image"].get<std::string>().empty())
    return Bad("image", "required: the image to run, e.g. \"slotd-test/busybox:latest\"");
  req.image = body["image"].get<std::string>();
  if (req.image.size() > kMaxImageName)
    return Bad("image", "longer than " + std::to_string(kMaxImageName) + " bytes");
  if (Status valid = ValidateImageRef(req.image); !valid.ok()) return Bad("image", valid.message());

  if (body.contains("command")) {
    const json& c = body["command"];
    if (!c.is_array()) return Bad("command", "expected an array of strings");
    for (const auto& arg : c) {
      if (!arg.is_string()) return Bad("command", "expected an array of strings");
      req.command.push_back(arg.get<std::string>());
    }
    size_t total = 0;
    for (const auto& arg : req.command) total += arg.size();
    if (req.command.size() > limits.command_args || total > limits.command_total)
      return Bad("command", "too large: at most " + std::to_string(limits.command_args) + " arguments of " +
                                std::to_string(limits.command_total >> 10) + " KiB in all");
  }

  if (Status s = ParseStringMap(body, "env", req.env); !s.ok()) return s;
  if (req.env.size() > limits.env_vars)
    return Bad("env", "too many variables: " + std::to_string(req.env.size()) + ", at most " + std::to_string(limits.env_vars));
  static const std::regex kEnvName("[A-Za-z_][A-Za-z0-9_]*");
  size_t env_total = 0;
  for (const auto& [name, value] : req.env) {
    if (name.size() > limits.env_name)
      return Bad("env", "a variable name is longer than " + std::to_string(limits.env_name) + " bytes");
    if (value.size() > limits.env_value)
      return Bad("env." + name, "the value is longer than " + std::to_string(limits.env_value >> 10) + " KiB");
    env_total += name.size() + value.size() + 2;
    if (!std::regex_match(name, kEnvName)) return Bad("env." + name, "not a valid variable name");
    if (kIdentityEnv.count(name)) return Bad("env." + name, "is set by the agent and may not be overridden");
  }
  if (env_total > limits.env_total)
    return Bad("env", "too large: " + std::to_string(env_total >> 10) + " KiB in all, at most " +
                          std::to_string(limits.env_total >> 10) + " KiB");

  if (Status s = ParseResources(body, req.resources); !s.ok()) return s;
  if (req.resources.shm_bytes && *req.resources.shm_bytes > req.resources.mem_bytes)
    return Status::ResourceExhausted("resources.shm: " + FormatSize(*req.resources.shm_bytes) + " is more than mem (" +
                                     FormatSize(req.resources.mem_bytes) +
                                     "); /dev/shm is counted within the kernel's memory: ask for more mem or less shm");

  if (body.contains("max_lifetime")) {
    const json& lifetime = body["max_lifetime"];
    if (!lifetime.is_string()) return Bad("max_lifetime", "expected a duration like \"2h\", \"30m\" or \"90s\"");
    Result<std::chrono::milliseconds> duration = ParseDuration(lifetime.get<std::string>());
    if (!duration.ok()) return Bad("max_lifetime", duration.status().message());
    if (*duration < std::chrono::seconds(1) || *duration > limits.max_lifetime)
      return Bad("max_lifetime", "must be from 1s to " + FormatDuration(limits.max_lifetime));
    req.max_lifetime = *duration;
  }

  if (body.contains("pull")) {
    const json& pull = body["pull"];
    std::optional<PullPolicy> policy = pull.is_string() ? ParsePullPolicy(pull.get<std::string>()) : std::nullopt;
    if (!policy) return Bad("pull", "expected \"none\", \"tag\" or \"digest\"");
    req.pull = *policy;
  }

  if (body.contains("ports")) {
    const json& p = body["ports"];
    if (!p.is_array()) return Bad("ports", "expected an array of container port numbers");
    std::set<int> seen;
    for (const auto& port : p) {
      if (!port.is_number_integer() || port.get<int64_t>() < 1 || port.get<int64_t>() > 65535)
        return Bad("ports", "expected container port numbers between 1 and 65535");
      if (!seen.insert(port.get<int>()).second) return Bad("ports", "port " + port.dump() + " is listed twice");
      req.resources.ports.push_back(port.get<int>());
    }
  }

  if (Status s = ParseMounts(body, limits, req.mounts); !s.ok()) return s;
  if (Status s = ParseStringMap(body, "labels", req.labels); !s.ok()) return s;
  if (req.labels.size() > limits.labels)
    return Bad("labels", "too many: " + std::to_string(req.labels.size()) + ", at most " + std::to_string(limits.labels));
  for (const auto& [key, value] : req.labels) {
    if (key.size() > limits.label_key)
      return Bad("labels", "a key is longer than " + std::to_string(limits.label_key) + " bytes");
    if (value.size() > limits.label_value)
      return Bad("labels." + key, "the value is longer than " + std::to_string(limits.label_value >> 10) + " KiB");
    if (key.rfind(label::kReservedPrefix, 0) == 0)
      return Bad("labels." + key, "the ai.backend. prefix is reserved for the agent's own labels");
  }
  return req;
}

}  // namespace

Result<CreateRequest> ParseCreateRequest(const json& body) { return ParseRequest(body, kApiLimits); }

json CreateRequest::Canonical() const {
  json res = {{"cpu", resources.cpu}, {"mem", resources.mem_bytes}};
  if (resources.shm_bytes) res["shm"] = *resources.shm_bytes;
  if (resources.scratch_bytes) res["scratch"] = *resources.scratch_bytes;
  for (const auto& [slot, count] : resources.devices) res[slot] = count;
  json canonical = {{"kernel_id", kernel_id}, {"session_id", session_id}, {"image", image},
                    {"command", command},     {"env", env},               {"resources", res},
                    {"ports", resources.ports}, {"labels", labels}};
  // Fields added after the first label format appear only when given, so
  // that a request recorded by an older slotd stays the same request.
  if (max_lifetime) canonical["max_lifetime"] = FormatDuration(*max_lifetime);
  if (pull) canonical["pull"] = PullPolicyName(*pull);
  if (!mounts.empty()) {
    json list = json::array();
    for (const RequestedMount& m : mounts)
      list.push_back({{"source", m.source}, {"target", m.target}, {"readonly", m.read_only}});
    canonical["mounts"] = std::move(list);
  }
  return canonical;
}

Result<CreateRequest> CreateRequestFromCanonical(const json& canonical) {
  auto req = ParseRequest(canonical, kRestoreLimits);
  if (!req.ok()) return req.status().WithPrefix("label " + std::string(label::kRequest));
  return req;
}

std::optional<PullPolicy> ParsePullPolicy(std::string_view name) { return ChoiceOf(PullPolicyWords(), name); }

const char* PullPolicyName(PullPolicy policy) { return WordOf(PullPolicyWords(), policy).c_str(); }

const char* KernelStateName(KernelState state) {
  switch (state) {
    case KernelState::kPulling: return "PULLING";
    case KernelState::kPreparing: return "PREPARING";
    case KernelState::kRunning: return "RUNNING";
    case KernelState::kTerminating: return "TERMINATING";
    case KernelState::kTerminated: return "TERMINATED";
    case KernelState::kError: return "ERROR";
  }
  return "ERROR";
}

std::string Kernel::Conditions() const {
  std::string text;
  auto add = [&text](const std::string& part) {
    if (!part.empty()) text += (text.empty() ? "" : "; ") + part;
  };
  add(condition);
  if (oom_kills > 0)
    add(std::to_string(oom_kills) + (oom_kills == 1 ? " process" : " processes") + " killed for lack of memory");
  add(device_condition);
  return text;
}

json Kernel::ToJson() const {
  json ports = json::array();
  for (const auto& p : allocation.ports) ports.push_back({{"container", p.container_port}, {"host", p.host_port}});
  return {{"kernel_id", request.kernel_id},
          {"session_id", request.session_id},
          {"agent_id", agent_id},
          {"container_id", container_id},
          {"image", request.image},
          {"command", request.command},
          {"state", KernelStateName(state_)},
          {"exit_code", exit_code ? json(*exit_code) : json(nullptr)},
          {"reason", reason},
          {"condition", Conditions().empty() ? json(nullptr) : json(Conditions())},
          {"allocations", allocation.ToJson()},
          {"ports", ports},
          {"labels", request.labels},
          {"created_at", created_at},
          {"terminated_at", terminated_at ? json(*terminated_at) : json(nullptr)},
          {"deadline", deadline ? json(*deadline) : json(nullptr)}};
}

Labels KernelLabels(const Kernel& kernel) {
  Labels labels(kernel.request.labels.begin(), kernel.request.labels.end());
  labels[label::kOwner] = kernel.agent_id;
  labels[label::kAgentId] = kernel.agent_id;
  labels[label::kKernelId] = kernel.request.kernel_id;
  labels[label::kSessionId] = kernel.request.session_id;
  labels[label::kAllocations] = kernel.allocation.ToJson().dump();
  labels[label::kRequest] = kernel.request.Canonical().dump();
  if (kernel.deadline) labels[label::kDeadline] = std::to_string(*kernel.deadline);
  labels[label::kFormat] = std::to_string(LabelFormatFor(kernel.request));
  return labels;
}

int LabelFormatFor(const CreateRequest& request) { return request.resources.scratch_bytes ? 4 : 3; }

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
  // 1 -> 2 -> 3 -> 4: only the format label changes (see label::kCurrentFormat).
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
    json j = json::parse(*text, nullptr, false);
    if (j.is_discarded()) return Status::InvalidArgument("container " + info.name + ": label " + key + " is not JSON");
    return j;
  };
  auto owner = get(label::kOwner);
  auto request_json = parse(label::kRequest);
  auto alloc_json = parse(label::kAllocations);
  if (!owner.ok()) return owner.status();
  if (!request_json.ok()) return request_json.status();
  if (!alloc_json.ok()) return alloc_json.status();
  auto request = CreateRequestFromCanonical(*request_json);
  if (!request.ok()) return request.status().WithPrefix("container " + info.name);
  auto allocation = Allocation::FromJson(*alloc_json);
  if (!allocation.ok()) return allocation.status().WithPrefix("container " + info.name);

  Kernel kernel;
  kernel.request = std::move(*request);
  kernel.agent_id = *owner;
  kernel.container_id = info.id;
  kernel.allocation = std::move(*allocation);
  kernel.created_at = info.created_unix;
  if (auto deadline = labels->find(label::kDeadline); deadline != labels->end()) {
    const std::string& text = deadline->second;
    kernel.deadline = LabelNumber(text, 18);
    if (!kernel.deadline)
      return Status::InvalidArgument("container " + info.name + ": label " + label::kDeadline + " is \"" + text +
                                     "\", not unix seconds");
  }
  return kernel;
}

std::string ContainerName(const std::string& agent_id, const std::string& kernel_id) {
  return "slotd-" + std::to_string(agent_id.size()) + "-" + agent_id + "-" + kernel_id;
}

}  // namespace slotd
