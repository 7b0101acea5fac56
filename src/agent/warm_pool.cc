#include "agent/warm_pool.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "model/label_codec.h"
#include "common/atomic_file.h"
#include "common/json_reader.h"
#include "common/regular_file.h"

namespace slotd {

using nlohmann::json;

namespace {

// A pool's cpu as a request writes it: a whole number ("2"), a fraction
// ("0.5"), or else the text as it is ("250m"), which the request's parser
// accepts or refuses with its own message. Never throws: a number too large
// or malformed is passed on as text, and refused as such.
json CpuJson(const std::string& cpu) {
  const char* const end = cpu.data() + cpu.size();
  int64_t whole = 0;
  if (auto [at, error] = std::from_chars(cpu.data(), end, whole); error == std::errc() && at == end) return whole;
  if (cpu.find_first_not_of("0123456789.") == std::string::npos) {
    char* parsed = nullptr;
    const double fraction = std::strtod(cpu.c_str(), &parsed);
    if (!cpu.empty() && parsed == cpu.c_str() + cpu.size()) return fraction;
  }
  return cpu;
}

constexpr char kSuffix[] = ".json";
constexpr char kTempMark[] = ".json.tmp.";  // WriteFileAtomically's temporary files

}  // namespace

Result<std::vector<WarmPool>> WarmPoolsOf(const Config& config) {
  std::vector<WarmPool> pools;
  std::set<std::string> names;
  for (const PoolConfig& entry : config.pools) {
    const std::string where = "[[pool]] \"" + entry.name + "\"";
    if (!names.insert(entry.name).second)
      return Status::InvalidArgument(where + " is given twice in " + config.path + "; give each pool its own name");
    json resources = {{"cpu", CpuJson(entry.cpu)}};
    if (entry.mem > 0) resources["mem"] = entry.mem;
    for (const auto& [slot, count] : entry.devices) resources[slot] = count;
    // A request's bounds; a pool's shape has no labels, env, command or mounts to bound.
    constexpr RequestLimits kShapeLimits{.labels = 0, .label_key = 0, .label_value = 0,
                                         .env_vars = 0, .env_name = 0, .env_value = 0, .env_total = 0,
                                         .command_args = 1024, .command_total = 256 << 10, .mounts = 0,
                                         .max_lifetime = std::chrono::milliseconds(0)};
    json body = {{"image", entry.image}, {"resources", resources}};
    if (!entry.command.empty()) body["command"] = entry.command;
    Result<CreateRequest> shape = ParseRequestWithin(body, kShapeLimits);
    if (!shape.ok())
      return Status::InvalidArgument(where + " in " + config.path + ": " + shape.status().message() +
                                     " (its image, command, cpu, mem and devices are read as a create request's)");
    shape->kernel_id.clear();
    shape->session_id.clear();
    pools.push_back(WarmPool{entry.name, std::move(*shape), static_cast<int>(entry.count)});
  }
  return pools;
}

bool HasPoolsShape(const CreateRequest& request, const WarmPool& pool) {
  return request.image == pool.shape.image && request.command == pool.shape.command &&
         request.resources == pool.shape.resources;
}

bool PoolKeeps(const std::vector<WarmPool>& pools, const std::string& pool_name, const CreateRequest& request) {
  return std::any_of(pools.begin(), pools.end(),
                     [&](const WarmPool& pool) { return pool.name == pool_name && HasPoolsShape(request, pool); });
}

bool MatchesPool(const CreateRequest& request, const WarmPool& pool) {
  return request.ids.kernel_generated && HasPoolsShape(request, pool) && request.env.empty() &&
         request.mounts.empty() && request.stop.signal.empty() && !request.stop.timeout && !request.pull;
}

WarmClaims::WarmClaims(std::string dir) : dir_(std::move(dir)) {}

std::string WarmClaims::PathOf(const std::string& kernel_id) const { return dir_ + "/" + kernel_id + kSuffix; }

Status WarmClaims::Write(const std::string& kernel_id, const Claim& claim) const {
  if (dir_.empty()) return Status::Ok();
  if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST)
    return Status::Unavailable("cannot make " + dir_ + " (" + std::strerror(errno) +
                               "): check that [agent] var-base-path is writable by the agent");
  json record = {{"request", RequestLabel(claim.request)}, {"given_at", claim.given_at}};
  if (claim.deadline) record["deadline"] = *claim.deadline;
  return WriteFileAtomically(PathOf(kernel_id), record.dump(), 0600);
}

Result<std::optional<WarmClaims::Claim>> WarmClaims::Read(const std::string& kernel_id) const {
  if (dir_.empty()) return std::optional<Claim>();
  const std::string path = PathOf(kernel_id);
  const auto bad = [&](const std::string& what) {
    return Status::InvalidArgument(path + ": " + what + "; remove it (the kernel is then warm again) or delete the "
                                   "kernel's container");
  };
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return std::optional<Claim>();
    return Status::Unavailable("cannot read " + path + ": " + std::strerror(errno));
  }
  if (S_ISLNK(info.st_mode)) return bad("a symbolic link, never followed");
  constexpr size_t kMaxRecord = 1 << 20;  // a request's labels, env and command are bounded far below this
  Result<std::string> text = ReadRegularFile(path, kMaxRecord);
  if (!text.ok()) return bad(text.status().message());
  std::optional<json> record = ParseJsonWithin(*text);
  if (!record || !record->is_object() || !record->contains("request") || !record->contains("given_at") ||
      !(*record)["given_at"].is_number_integer())
    return bad("not a record of a warm kernel given to a create");
  Result<CreateRequest> request = RequestFromLabel((*record)["request"]);
  if (!request.ok()) return bad(request.status().message());
  if (request->kernel_id != kernel_id) return bad("it records kernel " + request->kernel_id);
  Claim claim{std::move(*request), (*record)["given_at"].get<int64_t>(), std::nullopt};
  if (record->contains("deadline")) {
    if (!(*record)["deadline"].is_number_integer()) return bad("its deadline is not unix seconds");
    claim.deadline = (*record)["deadline"].get<int64_t>();
  }
  return std::optional<Claim>(std::move(claim));
}

void WarmClaims::Remove(const std::string& kernel_id) const {
  if (dir_.empty()) return;
  const std::string path = PathOf(kernel_id);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    spdlog::error("kernel {}: cannot remove its record {}: {}", kernel_id, path, std::strerror(errno));
}

namespace {

// The names in `dir` (none when it cannot be read).
std::vector<std::string> NamesIn(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = dir.empty() ? nullptr : ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const dirent* entry = ::readdir(d)) names.emplace_back(entry->d_name);
  ::closedir(d);
  return names;
}

}  // namespace

std::vector<std::string> WarmClaims::KernelIds() const {
  std::vector<std::string> ids;
  const size_t suffix = sizeof kSuffix - 1;
  for (const std::string& name : NamesIn(dir_)) {
    if (name.size() <= suffix || name.compare(name.size() - suffix, suffix, kSuffix) != 0) continue;
    const std::string id = name.substr(0, name.size() - suffix);
    if (IsValidKernelId(id)) ids.push_back(id);
  }
  return ids;
}

void WarmClaims::RemoveLeftovers() const {
  for (const std::string& name : NamesIn(dir_)) {
    if (name.find(kTempMark) == std::string::npos) continue;
    const std::string path = dir_ + "/" + name;
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      spdlog::error("cannot remove the half-written record {}: {}", path, std::strerror(errno));
  }
}

}  // namespace slotd
