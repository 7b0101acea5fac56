#include "model/kernel.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <regex>
#include <set>

#include "common/paths.h"
#include "common/units.h"
#include "model/image_ref.h"

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

Status Bad(const std::string& field, const std::string& what) {
  return Status::InvalidArgument(field + ": " + what);
}

}  // namespace

std::string GenerateKernelId() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[20];
  snprintf(buf, sizeof buf, "k-%012llx", static_cast<unsigned long long>(rng() & 0xffffffffffffULL));
  return buf;
}

namespace {

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

Status ParseMounts(const json& body, const RequestLimits& limits, std::vector<RequestedMount>& out) {
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

// What resources.cpu asks for: millicores, and whether from the shared pool.
struct CpuAsked {
  int millis = 1000;
  bool shared = false;
};

// resources.cpu: a whole number of exclusive cores (2), a fraction of a
// core's time from the shared pool (0.25), or millicores ("250m", shared).
Result<CpuAsked> CpuOf(const json& value, const std::string& field) {
  constexpr int64_t kMaxMillis = 4096 * 1000, kMinShared = 10;  // the engine's least quota: 1 ms of 100 ms
  const std::string expected = "expected a whole number of exclusive cores (2), a fraction of a core from the "
                               "shared pool (0.25), or millicores (\"250m\"), from 10m to 4096 cores";
  if (value.is_number_integer()) {
    if (value.get<int64_t>() < 1 || value.get<int64_t>() > 4096) return Bad(field, expected);
    return CpuAsked{static_cast<int>(value.get<int64_t>() * 1000), false};
  }
  double cores = 0;
  if (value.is_number_float()) {
    cores = value.get<double>();
  } else if (value.is_string()) {
    const std::string& text = value.get_ref<const std::string&>();
    const bool millicores = text.size() >= 2 && text.size() <= 9 && text.back() == 'm' &&
                            std::all_of(text.begin(), text.end() - 1, [](char c) { return c >= '0' && c <= '9'; });
    if (!millicores) return Bad(field, expected);
    cores = std::stod(text.substr(0, text.size() - 1)) / 1000.0;
  } else {
    return Bad(field, expected);
  }
  const double millis = cores * 1000.0;
  if (!(millis >= kMinShared && millis <= kMaxMillis)) return Bad(field, expected);
  const int64_t whole = std::llround(millis);
  if (std::fabs(millis - static_cast<double>(whole)) > 1e-6)
    return Bad(field, "a share of a core is counted in whole millicores (0.001): " + expected);
  return CpuAsked{static_cast<int>(whole), true};
}

Status ParseResources(const json& body, ResourceRequest& out) {
  if (!body.contains("resources")) return Status::Ok();
  const json& r = body["resources"];
  if (!r.is_object()) return Bad("resources", "expected an object like {\"cpu\": 1, \"mem\": \"256m\"}");
  CpuAsked asked{out.cpu * 1000, false};
  std::string policy;
  for (const auto& [key, value] : r.items()) {
    const std::string field = "resources." + key;
    if (key == "cpu") {
      Result<CpuAsked> cpu = CpuOf(value, field);
      if (!cpu.ok()) return cpu.status();
      asked = *cpu;
    } else if (key == "cpu_policy") {
      if (!value.is_string() || (value != "shared" && value != "exclusive"))
        return Bad(field, "expected \"shared\" (a quota from the shared pool) or \"exclusive\" (whole cores)");
      policy = value.get<std::string>();
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
      return Bad(field, "unknown slot type; known: cpu, cpu_policy, mem, shm, scratch, <kind>.device and other device "
                        "slots of the agent's plugins like cuda.mig-1c18g (slotctl info lists them)");
    }
  }
  if (policy == "shared") asked.shared = true;
  if (policy == "exclusive" && asked.shared)
    return Bad("resources.cpu_policy", "exclusive cores are whole: ask for a whole number of cpu, or leave cpu_policy out");
  out.cpu = asked.shared ? 0 : asked.millis / 1000;
  out.shared_cpu_millis = asked.shared ? asked.millis : 0;
  return Status::Ok();
}

}  // namespace

bool IsValidKernelId(const std::string& id) {
  static const std::regex kPattern("[A-Za-z0-9][A-Za-z0-9._-]{0,63}");
  return std::regex_match(id, kPattern);
}

namespace {

// Refuses a field of `body` that a create request does not have.
Status CheckKnownFields(const json& body) {
  static const std::vector<std::string> kKnown = {
      "kernel_id",    "session_id", "image", "command",     "env",          "resources", "ports",   "labels",
      "max_lifetime", "mounts",     "pull",  "stop_signal", "stop_timeout", "pre_stop",  "restart", "health",
      "warn_before", "idle"};
  for (const auto& [key, value] : body.items()) {
    if (std::find(kKnown.begin(), kKnown.end(), key) == kKnown.end()) {
      std::string known;
      for (const std::string& name : kKnown) known += (known.empty() ? "" : ", ") + name;
      return Bad(key, "unknown field; known: " + known);
    }
  }
  return Status::Ok();
}

// Reads kernel_id and session_id (generated, and the kernel id, when absent) into `req`.
Status ParseIds(const json& body, CreateRequest& req) {
  for (const char* field : {"kernel_id", "session_id"}) {
    if (!body.contains(field)) continue;
    if (!body[field].is_string() || !IsValidKernelId(body[field].get<std::string>()))
      return Bad(field, "expected a string matching [A-Za-z0-9][A-Za-z0-9._-]{0,63}");
  }
  req.kernel_id = body.contains("kernel_id") ? body["kernel_id"].get<std::string>() : GenerateKernelId();
  req.session_id = body.contains("session_id") ? body["session_id"].get<std::string>() : req.kernel_id;
  req.ids.kernel_generated = !body.contains("kernel_id");
  req.ids.session_generated = !body.contains("session_id");
  return Status::Ok();
}

// Reads the required image reference into `req`.
Status ParseImage(const json& body, CreateRequest& req) {
  if (!body.contains("image") || !body["image"].is_string() || body["image"].get<std::string>().empty())
    return Bad("image", "required: the image to run, e.g. \"slotd-test/busybox:latest\"");
  const std::string image = body["image"].get<std::string>();
  if (image.size() > kMaxImageName)
    return Bad("image", "longer than " + std::to_string(kMaxImageName) + " bytes");
  if (Status valid = ValidateImageRef(image); !valid.ok()) return Bad("image", valid.message());
  req.image = ParseImageRef(image);
  return Status::Ok();
}

// Reads the command, within `limits`, into `req`.
Status ParseCommand(const json& body, const RequestLimits& limits, CreateRequest& req) {
  if (!body.contains("command")) return Status::Ok();
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
  return Status::Ok();
}

// Reads the environment, within `limits`, into `req`: valid names, none the agent sets.
Status ParseEnv(const json& body, const RequestLimits& limits, CreateRequest& req) {
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
  return Status::Ok();
}

// Reads max_lifetime (1s to limits.max_lifetime) and pull into `req`.
Status ParseLifetimeAndPull(const json& body, const RequestLimits& limits, CreateRequest& req) {
  if (body.contains("max_lifetime")) {
    Result<std::chrono::milliseconds> duration =
        ParseDurationField(body["max_lifetime"], "max_lifetime", std::chrono::seconds(1), limits.max_lifetime);
    if (!duration.ok()) return duration.status();
    req.max_lifetime = *duration;
  }
  if (body.contains("pull")) {
    const json& pull = body["pull"];
    std::optional<PullPolicy> policy = pull.is_string() ? ParsePullPolicy(pull.get<std::string>()) : std::nullopt;
    if (!policy) return Bad("pull", "expected \"none\", \"tag\" or \"digest\"");
    req.pull = *policy;
  }
  return Status::Ok();
}

// Reads the container ports that need a host port (each once) into `req`.
Status ParsePorts(const json& body, CreateRequest& req) {
  if (!body.contains("ports")) return Status::Ok();
  const json& p = body["ports"];
  if (!p.is_array()) return Bad("ports", "expected an array of container port numbers");
  std::set<int> seen;
  for (const auto& port : p) {
    if (!port.is_number_integer() || port.get<int64_t>() < 1 || port.get<int64_t>() > 65535)
      return Bad("ports", "expected container port numbers between 1 and 65535");
    if (!seen.insert(port.get<int>()).second) return Bad("ports", "port " + port.dump() + " is listed twice");
    req.resources.ports.push_back(port.get<int>());
  }
  return Status::Ok();
}

// Reads the user labels, within `limits`, into `req`; none may use the agent's prefix.
Status ParseUserLabels(const json& body, const RequestLimits& limits, CreateRequest& req) {
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
  return Status::Ok();
}

}  // namespace

Result<CreateRequest> ParseRequestWithin(const json& body, const RequestLimits& limits) {
  if (!body.is_object()) return Bad("request body", "expected a JSON object");
  if (Status s = CheckKnownFields(body); !s.ok()) return s;
  CreateRequest req;
  if (Status s = ParseIds(body, req); !s.ok()) return s;
  if (Status s = ParseImage(body, req); !s.ok()) return s;
  if (Status s = ParseCommand(body, limits, req); !s.ok()) return s;
  if (Status s = ParseEnv(body, limits, req); !s.ok()) return s;
  if (Status s = ParseResources(body, req.resources); !s.ok()) return s;
  if (req.resources.shm_bytes && *req.resources.shm_bytes > req.resources.mem_bytes)
    return Status::ResourceExhausted("resources.shm: " + FormatSize(*req.resources.shm_bytes) + " is more than mem (" +
                                     FormatSize(req.resources.mem_bytes) +
                                     "); /dev/shm is counted within the kernel's memory: ask for more mem or less shm");
  if (Status s = ParseLifetimeAndPull(body, limits, req); !s.ok()) return s;
  if (Status s = ParsePorts(body, req); !s.ok()) return s;
  if (Status s = ParseMounts(body, limits, req.mounts); !s.ok()) return s;
  if (Status s = ParseUserLabels(body, limits, req); !s.ok()) return s;
  if (Status s = ParseStopContract(body, limits.command_args, limits.command_total, req.stop); !s.ok()) return s;
  if (Status s = ParseRestartPolicy(body, req.restart); !s.ok()) return s;
  if (Status s = ParseHealthCheck(body, req.resources.ports, limits.command_args, limits.command_total, req.health);
      !s.ok())
    return s;
  if (Status s = ParseIdlePolicy(body, req.idle); !s.ok()) return s;
  return req;
}

std::optional<PullPolicy> ParsePullPolicy(std::string_view name) { return ChoiceOf(PullPolicyWords(), name); }

const char* PullPolicyName(PullPolicy policy) { return WordOf(PullPolicyWords(), policy).c_str(); }

const char* KernelStateName(KernelState state) {
  switch (state) {
    case KernelState::kPulling: return "PULLING";
    case KernelState::kPreparing: return "PREPARING";
    case KernelState::kWarm: return "WARM";
    case KernelState::kRunning: return "RUNNING";
    case KernelState::kBackoff: return "BACKOFF";
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
  add(pool_condition);
  return text;
}

json Kernel::ToJson() const {
  json ports = json::array();
  for (const auto& p : allocation.ports) ports.push_back({{"container", p.container_port}, {"host", p.host_port}});
  return {{"kernel_id", request.kernel_id},
          {"session_id", request.session_id},
          {"agent_id", agent_id},
          {"container_id", container_id},
          {"image", request.image.name},
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
          {"deadline", deadline ? json(*deadline) : json(nullptr)},
          {"restarts", restarts},
          {"warm_pool", warm_pool.empty() ? json(nullptr) : json(warm_pool)},
          {"next_restart_at_ms", next_restart_at_ms ? json(*next_restart_at_ms) : json(nullptr)},
          {"warned", warned},
          {"idle_since_ms", idle_since_ms ? json(*idle_since_ms) : json(nullptr)},
          {"ready", state_ == KernelState::kRunning && (!request.health || (health && health->ready))},
          {"health", health ? health->ToJson() : json(nullptr)}};
}

std::string ContainerName(const std::string& agent_id, const std::string& kernel_id, NameMarks marks) {
  std::string prefix = "slotd";
  if (marks.restarts > 0 || marks.warned) {
    prefix += ".";
    if (marks.restarts > 0) prefix += "r" + std::to_string(marks.restarts);
    if (marks.warned) prefix += "w";
  }
  return prefix + "-" + std::to_string(agent_id.size()) + "-" + agent_id + "-" + kernel_id;
}

std::string UserProbeName(const std::string& agent_id, const std::string& kernel_id) {
  return "slotd_user-" + std::to_string(agent_id.size()) + "-" + agent_id + "-" + kernel_id;
}

NameMarks MarksInName(const std::string& name) {
  constexpr std::string_view kPrefix = "slotd.";
  if (name.compare(0, kPrefix.size(), kPrefix) != 0) return {};
  NameMarks marks;
  size_t i = kPrefix.size();
  if (i < name.size() && name[i] == 'r') {
    const size_t first = ++i;
    for (; i < name.size() && i < first + 9 && name[i] >= '0' && name[i] <= '9'; ++i)
      marks.restarts = marks.restarts * 10 + (name[i] - '0');
    if (i == first) return {};
  }
  if (i < name.size() && name[i] == 'w') {
    marks.warned = true;
    ++i;
  }
  return i < name.size() && name[i] == '-' ? marks : NameMarks{};
}

}  // namespace slotd
