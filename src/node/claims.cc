#include "node/claims.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <optional>
#include <fstream>
#include <sstream>

#include "common/atomic_file.h"
#include "common/json_reader.h"
#include "common/paths.h"
#include "common/units.h"

namespace slotd {

using nlohmann::json;

json AgentClaims::ToJson() const {
  json devices_json = json::object();
  for (const auto& [plugin, ids] : devices) devices_json[plugin] = ids;
  return {{"agent_id", agent_id},       {"pid", pid},
          {"config_path", config_path}, {"api_host", api_host},
          {"api_port", api_port},       {"ipc_base_path", ipc_base_path},
          {"var_base_path", var_base_path}, {"scratch_root", scratch_root}, {"port_range", {port_first, port_last}},
          {"cores", cores},             {"memory_bytes", memory_bytes},
          {"devices", devices_json}};
}

Result<AgentClaims> AgentClaims::FromJson(json j) {
  const JsonReader reader(std::move(j));
  const JsonField root = reader.Root();
  AgentClaims c;
  c.agent_id = root["agent_id"].String();
  c.pid = static_cast<int>(root["pid"].IntIn(0, std::numeric_limits<int>::max()));
  c.config_path = root.Optional("config_path").String();
  c.api_host = root["api_host"].String();
  c.api_port = static_cast<int>(root["api_port"].IntIn(0, 65535));
  c.ipc_base_path = root["ipc_base_path"].String();
  c.var_base_path = root["var_base_path"].String();
  c.scratch_root = root.Optional("scratch_root").String();
  c.port_first = static_cast<int>(root["port_range"].At(0).IntIn(0, 65535));
  c.port_last = static_cast<int>(root["port_range"].At(1).IntIn(0, 65535));
  for (const JsonField& core : root["cores"].Elements()) c.cores.push_back(static_cast<int>(core.Count(kCoreLimit - 1)));
  c.memory_bytes = root["memory_bytes"].Count();
  for (const auto& [plugin, ids] : root["devices"].Members()) {
    std::vector<std::string>& owned = c.devices[plugin];
    for (const JsonField& id : ids.Elements()) owned.push_back(id.String());
  }
  if (Status s = reader.Check("malformed claim"); !s.ok()) return s;
  return c;
}

AgentClaims ClaimsOf(const Config& config, const std::map<std::string, std::vector<std::string>>& devices) {
  AgentClaims c;
  c.agent_id = config.agent.id;
  c.pid = static_cast<int>(::getpid());
  // Absolute, so that advice naming it (slotctl node) works from any directory.
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(config.path, ec);
  c.config_path = ec ? config.path : absolute.lexically_normal().string();
  c.api_host = config.agent.rpc_host;
  c.api_port = config.agent.rpc_port;
  c.ipc_base_path = config.agent.ipc_base_path;
  c.var_base_path = config.agent.var_base_path;
  c.scratch_root = ScratchRoot(config);
  c.port_first = config.container.port_range_start;
  c.port_last = config.container.port_range_end;
  c.cores = config.resource.allowed_cores;
  c.memory_bytes = config.resource.memory_size;
  c.devices = devices;
  return c;
}

namespace {

// Whether `a` and `b` (both non-empty) are one path, or one lies inside the other.
bool PathsNest(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return false;
  const std::string x = NormalPath(a), y = NormalPath(b);
  return IsWithin(x, y) || IsWithin(y, x);
}

// The first of `a`'s and `b`'s paths that a scratch root of the other meets.
std::optional<Clash> ScratchClash(const AgentClaims& a, const AgentClaims& b) {
  for (const auto& [mine, theirs] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
    for (const std::string* path : {&theirs->scratch_root, &theirs->ipc_base_path, &theirs->var_base_path}) {
      if (!PathsNest(mine->scratch_root, *path)) continue;
      const bool same = *path == mine->scratch_root;
      return Clash{"container.scratch-root", mine->scratch_root + (same ? "" : " and " + *path)};
    }
  }
  return std::nullopt;
}

}  // namespace

bool DevicesOverlap(const std::string& a, const std::string& b) {
  if (a == b) return true;
  auto inside = [](const std::string& part, const std::string& whole) { return part.rfind(whole + "/", 0) == 0; };
  auto leaf = [](const std::string& claim) { return claim.substr(claim.rfind('/') + 1); };
  return inside(a, b) || inside(b, a) || leaf(a) == leaf(b);
}

std::vector<Clash> FindClashes(const AgentClaims& a, const AgentClaims& b) {
  std::vector<Clash> clashes;
  if (a.agent_id == b.agent_id) clashes.push_back({"agent id", a.agent_id});
  if (a.api_port != 0 && a.api_port == b.api_port)
    clashes.push_back({"API port (agent.rpc-listen-addr)", std::to_string(a.api_port)});
  if (a.ipc_base_path == b.ipc_base_path) clashes.push_back({"agent.ipc-base-path", a.ipc_base_path});
  if (a.var_base_path == b.var_base_path) clashes.push_back({"agent.var-base-path", a.var_base_path});
  if (std::optional<Clash> scratch = ScratchClash(a, b); scratch && a.var_base_path != b.var_base_path)
    clashes.push_back(*scratch);  // (with one var path, the default scratch roots meet too: one clash says it)
  int lo = std::max(a.port_first, b.port_first), hi = std::min(a.port_last, b.port_last);
  if (lo <= hi)
    clashes.push_back({"container.port-range", std::to_string(lo) + (lo == hi ? "" : "-" + std::to_string(hi))});
  std::vector<int> cores;
  std::set_intersection(a.cores.begin(), a.cores.end(), b.cores.begin(), b.cores.end(), std::back_inserter(cores));
  if (!cores.empty()) clashes.push_back({"cpu core" + std::string(cores.size() > 1 ? "s" : ""), FormatCoreList(cores)});
  for (const auto& [plugin, ids] : a.devices) {
    auto other = b.devices.find(plugin);
    if (other == b.devices.end()) continue;
    for (const auto& id : ids)
      for (const auto& theirs : other->second)
        if (DevicesOverlap(id, theirs)) clashes.push_back({plugin + " device", id == theirs ? id : id + " and " + theirs});
  }
  return clashes;
}

namespace {

std::string ClaimPath(const std::string& dir, const std::string& id) { return dir + "/" + id + ".json"; }
std::string LivePath(const std::string& dir, const std::string& id) { return dir + "/" + id + ".live"; }

// Writes `mine` to its claim file, whole or not at all.
Status WriteClaim(const std::string& dir, const AgentClaims& mine) {
  return WriteFileAtomically(ClaimPath(dir, mine.agent_id), mine.ToJson().dump(2) + "\n");
}

}  // namespace

bool NodeClaims::IsLive(const std::string& dir, const std::string& agent_id) {
  return LockFile::IsHeld(LivePath(dir, agent_id));
}

Result<std::vector<AgentClaims>> NodeClaims::ReadLive(const std::string& dir) {
  std::vector<AgentClaims> live;
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) return Status::Unavailable("cannot read claims directory " + dir + ": " + ec.message());
  for (const auto& entry : it) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".json") continue;
    const std::string id = name.substr(0, name.size() - 5);
    if (!IsLive(dir, id)) continue;  // its agent is gone: the claim is void
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    std::optional<json> j = ParseJsonWithin(text.str());
    auto claims = j ? AgentClaims::FromJson(std::move(*j)) : Result<AgentClaims>(Status::InvalidArgument("not JSON"));
    if (!claims.ok()) return claims.status().WithPrefix("claim file " + entry.path().string());
    live.push_back(std::move(*claims));
  }
  std::sort(live.begin(), live.end(), [](const auto& a, const auto& b) { return a.agent_id < b.agent_id; });
  return live;
}

Result<std::unique_ptr<NodeClaims>> NodeClaims::Register(const std::string& dir, const AgentClaims& mine,
                                                         uint64_t node_memory,
                                                         const std::function<Status()>& extra_check) {
  if (Status s = MakeDirs(dir); !s.ok()) return s.WithPrefix("node.claims-dir");
  auto dir_lock = LockFile::AcquireWaiting(dir + "/claims.lock", std::chrono::seconds(30));
  if (!dir_lock.ok()) return dir_lock.status().WithPrefix("node.claims-dir");
  auto live = ReadLive(dir);
  if (!live.ok()) return live.status();

  std::string refusals;
  uint64_t memory = mine.memory_bytes;
  std::string shares = mine.agent_id + " " + FormatSize(mine.memory_bytes);
  for (const auto& other : *live) {
    memory += other.memory_bytes;
    shares += ", " + other.agent_id + " " + FormatSize(other.memory_bytes);
    for (const auto& clash : FindClashes(mine, other))
      refusals += "\n  " + clash.what + " " + clash.value + ": held by agent " + other.agent_id + " (pid " +
                  std::to_string(other.pid) + ", config " + other.config_path + ")";
  }
  if (memory > node_memory)
    refusals += "\n  memory shares add up to " + FormatSize(memory) + " (" + shares + "), more than this node's " +
                FormatSize(node_memory);
  if (!refusals.empty())
    return Status::FailedPrecondition("agent " + mine.agent_id + " clashes with live agents of this node (claims in " +
                                      dir + "):" + refusals +
                                      "\n  Give each agent its own values (slotd check can compare the configs)");
  if (Status s = extra_check(); !s.ok()) return s;

  auto live_lock = LockFile::Acquire(LivePath(dir, mine.agent_id));
  if (!live_lock.ok()) return live_lock.status().WithPrefix("agent id " + mine.agent_id);
  if (Status s = WriteClaim(dir, mine); !s.ok()) return s;
  return std::unique_ptr<NodeClaims>(new NodeClaims(dir, mine, std::move(*live_lock)));
}

Status NodeClaims::SetApiPort(int port) {
  mine_.api_port = port;
  return WriteClaim(dir_, mine_);
}

NodeClaims::~NodeClaims() { ::unlink(ClaimPath(dir_, mine_.agent_id).c_str()); }

}  // namespace slotd
