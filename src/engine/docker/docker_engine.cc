#include "engine/docker/docker_engine.h"

#include "common/json_reader.h"
#include "common/process_limits.h"
#include "engine/docker/docker_answers.h"
#include "engine/docker/docker_json.h"
#include "model/image_ref.h"

#include <spdlog/spdlog.h>

#include <sys/resource.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>

namespace slotd {

using namespace docker_json;

namespace {

using Clock = std::chrono::steady_clock;

// Every path starts with the API version this client speaks.
constexpr const char* kApi = "/v1.41";
// Time allowed for a plain API call.
constexpr std::chrono::seconds kCallTimeout(60);
// Time allowed beyond a stop/restart grace period for the engine to answer.
constexpr std::chrono::seconds kStopSlack(30);

// An image name as a path: each segment escaped, its "/"s kept (the
// engine's routes take them).
std::string EscapedImageName(const std::string& image) {
  std::string path;
  size_t start = 0;
  while (true) {
    const size_t slash = image.find('/', start);
    path += UrlEncode(image.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
    if (slash == std::string::npos) return path;
    path += '/';
    start = slash + 1;
  }
}

std::string ImagePath(const std::string& image) { return std::string(kApi) + "/images/" + EscapedImageName(image); }

std::string ContainerPath(const std::string& id) {
  return std::string(kApi) + "/containers/" + UrlEncode(id);
}

// The `filters` query value for label filters (and more keys in `extra`).
std::string LabelFilters(const std::vector<std::string>& label_filters,
                         json extra = json::object()) {
  if (!label_filters.empty()) extra["label"] = label_filters;
  return UrlEncode(Dump(extra));
}

std::string JoinCommand(const std::vector<std::string>& command) {
  std::string out;
  for (const auto& part : command) {
    if (!out.empty()) out += ' ';
    out += part;
  }
  return out;
}

}  // namespace


namespace {

// Splits a stream of newline-ended JSON lines (events, pull progress) as its
// pieces arrive, bounding the line it holds.
class LineSplitter {
 public:
  // A line past this bound is no message, and would otherwise be held for
  // as long as the engine keeps sending it.
  static constexpr size_t kMaxLine = 1u << 20;

  // Calls `on_line` for each complete, non-blank line (without its newline).
  // False when the line being held grew past kMaxLine.
  bool Feed(std::string_view chunk, const std::function<void(std::string_view)>& on_line) {
    pending_.append(chunk);
    size_t start = 0;
    for (size_t nl; (nl = pending_.find('\n', start)) != std::string::npos; start = nl + 1) {
      const std::string_view line(pending_.data() + start, nl - start);
      if (line.find_first_not_of(" \r\t") != std::string_view::npos) on_line(line);
    }
    pending_.erase(0, start);
    return pending_.size() <= kMaxLine;
  }

 private:
  std::string pending_;  // a line not yet complete
};

// The message of an engine's error body: its JSON "message", else the
// start of the body; without trailing line ends.
std::string EngineMessage(const std::string& body) {
  std::string message;
  if (const std::optional<json> j = ParseJsonWithin(body)) message = StringField(*j, "message");
  if (message.empty()) message = body.substr(0, 500);
  while (!message.empty() && (message.back() == '\n' || message.back() == '\r')) message.pop_back();
  return message;
}

// The engine's error for a non-2xx `response` to the operation `what`,
// keeping the engine's own message.
Status EngineError(const std::string& what, const HttpClient& http, const HttpResponse& response) {
  const std::string message = EngineMessage(response.body);
  return StatusForHttpError(DockerStatusOf(response.status, response.body), what + ": " + message + " (engine at " + http.Describe() +
                                                          ", HTTP " + std::to_string(response.status) + ")");
}

// OK when the engine reads `path` (up to its query) as the route it was
// built for: every segment, once the engine has decoded it, is a name, never
// empty, "." or ".." and without a "/" (the engine would resolve those to
// another route, or redirect). Names from a request (an image, an exec id)
// travel in paths; this is the last guard that none of them leaves its
// segment.
Status PathStaysOnItsRoute(const std::string& what, const std::string& path) {
  const std::string_view route = std::string_view(path).substr(0, path.find('?'));
  size_t start = 1;  // past the leading "/"
  while (start <= route.size()) {
    const size_t end = std::min(route.find('/', start), route.size());
    const std::string segment = PercentDecode(route.substr(start, end - start));
    if (segment.empty() || segment == "." || segment == ".." || segment.find('/') != std::string::npos)
      return Status::InvalidArgument(what + ": \"" + segment.substr(0, 128) +
                                     "\" cannot be one segment of an engine path (it is empty, \".\", \"..\" or has a "
                                     "\"/\"); check the name or id given");
    start = end + 1;
  }
  return Status::Ok();
}

// Sends one call; OK for a 2xx status and for any status in `also_ok`;
// otherwise the engine's error, prefixed with `what`.
Result<HttpResponse> Call(const HttpClient& http, const std::string& what,
                          const std::string& method, const std::string& path,
                          const std::string& body = "",
                          std::chrono::milliseconds timeout = kCallTimeout,
                          std::initializer_list<long> also_ok = {},
                          const std::vector<std::string>& headers = {}) {
  if (Status on_route = PathStaysOnItsRoute(what, path); !on_route.ok()) return on_route;
  auto response = http.Request(method, path, body, timeout, headers);
  if (!response.ok()) return response.status().WithPrefix(what);
  const long status = response->status;
  if (status >= 200 && status < 300) return response;
  for (const long ok : also_ok) {
    if (status == ok) return response;
  }
  return EngineError(what, http, *response);
}

// The hard limit of `resource` as this process has it.
int64_t OwnHardLimit(int resource) {
  rlimit limit{};
  if (::getrlimit(resource, &limit) != 0 || limit.rlim_max == RLIM_INFINITY)
    return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(limit.rlim_max);
}

}  // namespace

DockerEngine::DockerEngine(HttpClient http, std::string socket_path)
    : http_(std::move(http)), socket_path_(std::move(socket_path)) {}

Result<std::unique_ptr<DockerEngine>> DockerEngine::FromHost(const std::string& docker_host) {
  const std::string unix_prefix = "unix://";
  const std::string tcp_prefix = "tcp://";
  if (docker_host.rfind(unix_prefix, 0) == 0 && docker_host.size() > unix_prefix.size()) {
    const std::string path = docker_host.substr(unix_prefix.size());
    return std::unique_ptr<DockerEngine>(new DockerEngine(HttpClient::Unix(path), path));
  }
  if (docker_host.rfind(tcp_prefix, 0) == 0 && docker_host.size() > tcp_prefix.size()) {
    return std::unique_ptr<DockerEngine>(
        new DockerEngine(HttpClient::Tcp("http://" + docker_host.substr(tcp_prefix.size())), ""));
  }
  return Status::InvalidArgument("docker host \"" + docker_host +
                                 "\": expected unix:///path/to/docker.sock or tcp://HOST:PORT");
}

Result<EngineIdentity> DockerEngine::Identify() {
  const std::string what = "Docker engine version";
  auto response = Call(http_, what, "GET", std::string(kApi) + "/version");
  if (!response.ok()) return response.status();
  auto identity = ParseEngineIdentity(response->body, what);
  if (!identity.ok()) return identity.status();
  Learnt learnt{.podman = identity->name == "podman"};
  if (learnt.podman) {
    const pid_t engine = socket_path_.empty() ? 0 : UnixSocketListenerPid(socket_path_);
    for (const auto& [name, resource, row] : {std::tuple{"nofile", RLIMIT_NOFILE, "Max open files"},
                                              std::tuple{"nproc", RLIMIT_NPROC, "Max processes"}}) {
      int64_t limit = OwnHardLimit(resource);
      if (const auto engines = engine > 0 ? ProcessHardLimit(engine, row) : std::nullopt)
        limit = std::min(limit, *engines);
      if (limit != std::numeric_limits<int64_t>::max()) learnt.inherited_ulimits[name] = limit;
    }
  }
  MutexLock lock(identity_mutex_);
  learnt_ = std::move(learnt);
  return identity;
}

DockerEngine::Learnt DockerEngine::KnownEngine() {
  {
    MutexLock lock(identity_mutex_);
    if (learnt_) return *learnt_;
  }
  if (!Identify().ok()) return {};
  MutexLock lock(identity_mutex_);
  return learnt_.value_or(Learnt{});
}

Status DockerEngine::Ping(std::chrono::milliseconds timeout) {
  return Call(http_, "Docker engine ping", "GET", "/_ping", "", timeout).status();
}

Result<std::string> DockerEngine::Create(const ContainerSpec& spec) {
  const std::string what =
      "create container \"" + spec.name + "\" from image \"" + spec.image + "\"";
  json host = {{"NetworkMode", spec.network_mode}};
  if (!spec.cpuset_cpus.empty()) host["CpusetCpus"] = spec.cpuset_cpus;
  if (spec.cpu_quota_us > 0) {
    host["CpuQuota"] = spec.cpu_quota_us;
    host["CpuPeriod"] = spec.cpu_period_us;
  }
  if (spec.memory_bytes > 0) {
    host["Memory"] = spec.memory_bytes;
    host["MemorySwap"] = spec.memory_bytes;
  }
  json config = {{"Image", spec.image}, {"Env", spec.env}, {"Labels", spec.labels}};
  if (!spec.user.empty()) config["User"] = spec.user;
  if (!spec.command.empty()) config["Cmd"] = spec.command;
  if (!spec.ports.empty()) {
    json exposed = json::object();
    json bindings = json::object();
    for (const auto& p : spec.ports) {
      const std::string key = std::to_string(p.container_port) + "/tcp";
      exposed[key] = json::object();
      bindings[key] = json::array({{{"HostIp", ""}, {"HostPort", std::to_string(p.host_port)}}});
    }
    config["ExposedPorts"] = exposed;
    host["PortBindings"] = bindings;
  }
  const Learnt engine = KnownEngine();
  if ((!spec.device_requests.empty() || !spec.cdi_devices.empty()) && engine.podman)
    return Status::FailedPrecondition(
        what + ": the engine at " + http_.Describe() +
        " is Podman, whose Docker-compatible API ignores device requests (the NVIDIA driver's and CDI's alike), "
        "so the container would start without its devices; run GPU kernels on a Docker engine");
  json requests = json::array();
  for (const auto& d : spec.device_requests) {
    json caps = json::array();
    if (!d.capabilities.empty()) caps.push_back(d.capabilities);
    requests.push_back({{"Driver", d.driver}, {"DeviceIDs", d.device_ids}, {"Capabilities", caps}});
  }
  if (!spec.cdi_devices.empty()) {
    requests.push_back(
        {{"Driver", "cdi"}, {"DeviceIDs", spec.cdi_devices}, {"Capabilities", json::array()}});
  }
  if (!requests.empty()) host["DeviceRequests"] = requests;
  if (spec.pids_limit > 0) host["PidsLimit"] = spec.pids_limit;
  if (spec.shm_bytes > 0) host["ShmSize"] = spec.shm_bytes;
  std::map<std::string, int64_t> limits = spec.ulimits;
  for (const auto& [name, value] : engine.inherited_ulimits) limits.emplace(name, value);  // what the spec names stays
  if (!limits.empty()) {
    json ulimits = json::array();
    for (const auto& [name, value] : limits) ulimits.push_back({{"Name", name}, {"Soft", value}, {"Hard", value}});
    host["Ulimits"] = std::move(ulimits);
  }
  if (!spec.mounts.empty()) {
    json mounts = json::array();
    for (const Mount& m : spec.mounts) {
      json mount = {{"Target", m.target}, {"ReadOnly", m.read_only}};
      if (m.type == Mount::Type::kBind) {
        mount["Type"] = "bind";
        mount["Source"] = m.source;
      } else {
        mount["Type"] = "tmpfs";
        mount["TmpfsOptions"] = {{"Mode", 01777}};
        if (m.tmpfs_bytes > 0) mount["TmpfsOptions"]["SizeBytes"] = m.tmpfs_bytes;
      }
      mounts.push_back(std::move(mount));
    }
    host["Mounts"] = std::move(mounts);
  }
  if (spec.no_new_privileges) host["SecurityOpt"] = {"no-new-privileges:true"};
  if (spec.init) host["Init"] = true;
  if (!spec.stop_signal.empty()) config["StopSignal"] = spec.stop_signal;
  if (spec.stop_timeout_s > 0) config["StopTimeout"] = spec.stop_timeout_s;
  if (spec.log_max_bytes > 0)
    host["LogConfig"] = {{"Type", "json-file"},
                         {"Config", {{"max-size", std::to_string(spec.log_max_bytes)}, {"max-file", "2"}}}};
  config["HostConfig"] = host;

  std::string path = std::string(kApi) + "/containers/create";
  if (!spec.name.empty()) path += "?name=" + UrlEncode(spec.name);
  auto response = Call(http_, what, "POST", path, Dump(config));
  if (!response.ok()) return response.status();
  auto j = ParseJson(response->body, what);
  if (!j.ok()) return j.status();
  std::string id = StringField(*j, "Id");
  if (id.empty()) return Status::Internal(what + ": the answer has no Id: " + response->body);
  for (const auto& warning : StringListField(*j, "Warnings")) {
    spdlog::warn("{}: engine warning: {}", what, warning);
  }
  return id;
}

Status DockerEngine::Start(const std::string& id) {
  return Call(http_, "start container " + id, "POST", ContainerPath(id) + "/start", "",
              kCallTimeout, {304})
      .status();
}

Status DockerEngine::Stop(const std::string& id, std::chrono::seconds timeout) {
  return Call(http_, "stop container " + id, "POST",
              ContainerPath(id) + "/stop?t=" + std::to_string(timeout.count()), "",
              timeout + kStopSlack, {304})
      .status();
}

Status DockerEngine::Kill(const std::string& id, const std::string& signal) {
  return Call(http_, "kill container " + id + " with " + signal, "POST",
              ContainerPath(id) + "/kill?signal=" + UrlEncode(signal))
      .status();
}

Status DockerEngine::Restart(const std::string& id, std::chrono::seconds timeout) {
  return Call(http_, "restart container " + id, "POST",
              ContainerPath(id) + "/restart?t=" + std::to_string(timeout.count()), "",
              timeout + kStopSlack)
      .status();
}

Status DockerEngine::UpdateCpuset(const std::string& id, const std::string& cpuset) {
  if (KnownEngine().podman)
    return Status::FailedPrecondition("the engine (Podman) cannot change a running container's cores: its "
                                      "Docker-compatible API has no POST /containers/{id}/update");
  return Call(http_, "update the cores of container " + id, "POST", ContainerPath(id) + "/update",
              Dump(json{{"CpusetCpus", cpuset}}))
      .status();
}

Status DockerEngine::Rename(const std::string& id, const std::string& name) {
  return Call(http_, "rename container " + id + " to " + name, "POST",
              ContainerPath(id) + "/rename?name=" + UrlEncode(name))
      .status();
}

Status DockerEngine::Remove(const std::string& id, bool force) {
  return Call(http_, "remove container " + id, "DELETE",
              ContainerPath(id) + "?v=1&force=" + (force ? "1" : "0"))
      .status();
}

Result<ContainerInfo> DockerEngine::Inspect(const std::string& id) {
  const std::string what = "inspect container " + id;
  auto response = Call(http_, what, "GET", ContainerPath(id) + "/json");
  if (!response.ok()) return response.status();
  return ParseContainerInspect(response->body, what);
}

Result<std::string> DockerEngine::ReadFile(const std::string& id, const std::string& path, size_t max_bytes) {
  // Links are followed here, one archive per hop, inside the container's filesystem.
  constexpr int kMaxLinks = 8;
  std::string current = path;
  for (int hop = 0; hop <= kMaxLinks; ++hop) {
    const std::string what = "read " + current + " in container " + id;
    std::string tar;
    bool too_long = false;
    // The archive of one file is its bytes plus a few headers.
    const size_t limit = max_bytes + (64u << 10);
    auto response = http_.RequestStreamed(
        "GET", ContainerPath(id) + "/archive?path=" + UrlEncode(current), "", kCallTimeout,
        [&](std::string_view chunk) {
          if (tar.size() + chunk.size() > limit) {
            too_long = true;
            return false;
          }
          tar.append(chunk);
          return true;
        });
    if (too_long) return Status::InvalidArgument(what + ": longer than " + std::to_string(max_bytes) + " bytes");
    if (!response.ok()) return response.status().WithPrefix(what);
    if (response->status < 200 || response->status >= 300) return EngineError(what, http_, *response);
    Result<ArchivedFile> file = ParseFirstArchivedFile(tar);
    if (!file.ok()) return file.status().WithPrefix(what);
    switch (file->kind) {
      case ArchivedFile::Kind::kRegular:
        if (file->content.size() > max_bytes)
          return Status::InvalidArgument(what + ": longer than " + std::to_string(max_bytes) + " bytes");
        return std::move(file->content);
      case ArchivedFile::Kind::kSymlink:
        if (file->link.empty()) return Status::InvalidArgument(what + ": an empty symbolic link");
        current = file->link.front() == '/' ? file->link : current.substr(0, current.rfind('/') + 1) + file->link;
        continue;
      case ArchivedFile::Kind::kOther:
        return Status::InvalidArgument(what + ": not a regular file");
    }
  }
  return Status::InvalidArgument("read " + path + " in container " + id + ": more than " + std::to_string(kMaxLinks) +
                                 " symbolic links");
}

Result<ContainerStats> DockerEngine::Stats(const std::string& id) {
  const std::string what = "stats of container " + id;
  auto response = Call(http_, what, "GET", ContainerPath(id) + "/stats?stream=false");
  if (!response.ok()) return response.status();
  return ParseContainerStats(response->body, what);
}

Status DockerEngine::CreateVolume(const std::string& name, const Labels& labels) {
  json body = {{"Name", name}, {"Labels", json::object()}};
  for (const auto& [key, value] : labels) body["Labels"][key] = value;
  return Call(http_, "create volume " + name, "POST", std::string(kApi) + "/volumes/create", Dump(body)).status();
}

Result<std::vector<VolumeInfo>> DockerEngine::ListVolumes(const std::vector<std::string>& label_filters) {
  const std::string what = "list volumes";
  std::string path = std::string(kApi) + "/volumes";
  if (!label_filters.empty()) path += "?filters=" + LabelFilters(label_filters);
  auto response = Call(http_, what, "GET", path);
  if (!response.ok()) return response.status();
  auto parsed = ParseJson(response->body, what);
  if (!parsed.ok()) return parsed.status();
  const json* volumes = Field(*parsed, "Volumes");
  std::vector<VolumeInfo> out;
  if (volumes == nullptr || volumes->is_null()) return out;  // the engine sends null for none
  if (!volumes->is_array()) return Status::Internal(what + ": the engine sent no Volumes array");
  for (const json& v : *volumes) out.push_back({StringField(v, "Name"), StringMapField(v, "Labels")});
  return out;
}

Status DockerEngine::RemoveVolume(const std::string& name) {
  return Call(http_, "remove volume " + name, "DELETE", std::string(kApi) + "/volumes/" + UrlEncode(name)).status();
}

Result<std::vector<ContainerInfo>> DockerEngine::List(
    const std::vector<std::string>& label_filters) {
  const std::string what = "list containers";
  std::string path = std::string(kApi) + "/containers/json?all=1";
  if (!label_filters.empty()) path += "&filters=" + LabelFilters(label_filters);
  auto response = Call(http_, what, "GET", path);
  if (!response.ok()) return response.status();
  return ParseContainerList(response->body, what);
}

Result<ExecResult> DockerEngine::Exec(const std::string& id,
                                      const std::vector<std::string>& command,
                                      std::chrono::seconds timeout, const std::atomic<bool>* stop,
                                      std::string* exec_id_out) {
  const std::string what = "exec \"" + JoinCommand(command) + "\" in container " + id;
  const auto deadline = Clock::now() + timeout;
  const Status late =
      Status::DeadlineExceeded(what + ": did not finish within " + std::to_string(timeout.count()) +
                               " s; the command may still be running in the container");
  const Status abandoned =
      Status::Unavailable(what + ": abandoned, its caller stopped waiting; the command may still be running");
  auto stopped = [&] { return stop != nullptr && stop->load(); };
  // Time left before the deadline, or nothing when it has passed.
  auto left = [&]() -> std::optional<std::chrono::milliseconds> {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (ms.count() <= 0) return std::nullopt;
    return ms;
  };
  auto with_deadline = [&](const Status& s) {
    return s.code() == Status::Code::kDeadlineExceeded ? late : s;
  };

  const json create = {{"AttachStdin", false},
                       {"AttachStdout", true},
                       {"AttachStderr", true},
                       {"Tty", false},
                       {"Cmd", command}};
  auto remaining = left();
  if (!remaining) return late;
  auto created = Call(http_, what, "POST", ContainerPath(id) + "/exec", Dump(create), *remaining);
  if (!created.ok()) return with_deadline(created.status());
  auto created_json = ParseJson(created->body, what);
  if (!created_json.ok()) return created_json.status();
  const std::string exec_id = StringField(*created_json, "Id");
  if (exec_id.empty()) return Status::Internal(what + ": the answer has no Id: " + created->body);
  if (exec_id_out != nullptr) *exec_id_out = exec_id;
  const std::string exec_path = std::string(kApi) + "/exec/" + UrlEncode(exec_id);

  // The engine answers the start with the multiplexed output until the
  // command's streams close.
  remaining = left();
  if (!remaining) return late;
  if (stopped()) return abandoned;
  ExecResult result;
  DockerStreamDemuxer demuxer;
  // What this exec took of exec_output_, given back when it returns.
  struct Held {
    ByteBudget& budget;
    size_t bytes = 0;
    ~Held() { budget.Give(bytes); }
  } held{exec_output_};
  auto keep_bounded = [&](bool is_stderr, std::string_view payload) {
    std::string& text = is_stderr ? result.stderr_text : result.stdout_text;
    const size_t room = exec_output_.Take(std::min(payload.size(), ExecResult::kMaxExecOutput - text.size()));
    held.bytes += room;
    text.append(payload.substr(0, room));
    if (payload.size() > room) (is_stderr ? result.stderr_truncated : result.stdout_truncated) = true;
    return true;
  };
  auto started = http_.RequestStreamed("POST", exec_path + "/start", Dump({{"Detach", false}, {"Tty", false}}),
                                       *remaining,
                                       [&](std::string_view chunk) { return demuxer.Feed(chunk, keep_bounded); },
                                       stop);
  if (stopped()) return abandoned;
  if (!started.ok()) return with_deadline(started.status().WithPrefix(what));
  if (started->status < 200 || started->status >= 300) return EngineError(what, http_, *started);
  if (Status demux = demuxer.Finish(); !demux.ok()) return demux.WithPrefix(what);

  // The output can end a moment before the engine records the exit code.
  while (true) {
    remaining = left();
    if (!remaining) return late;
    if (stopped()) return abandoned;
    auto inspected = Call(http_, what, "GET", exec_path + "/json", "", *remaining);
    if (!inspected.ok()) return with_deadline(inspected.status());
    auto j = ParseJson(inspected->body, what);
    if (!j.ok()) return j.status();
    if (!BoolField(*j, "Running")) {
      const json* code = Field(*j, "ExitCode");
      if (code == nullptr || !code->is_number_integer()) {
        return Status::Internal(what + ": the engine reports no exit code: " + inspected->body);
      }
      result.exit_code = code->get<int>();
      return result;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

Result<ExecSession> DockerEngine::ExecInteractive(const std::string& id, const std::vector<std::string>& command,
                                                  int rows, int cols) {
  const std::string what = "interactive exec \"" + JoinCommand(command) + "\" in container " + id;
  const json create = {{"AttachStdin", true}, {"AttachStdout", true}, {"AttachStderr", true},
                       {"Tty", true},         {"OpenStdin", true},    {"Cmd", command}};
  auto created = Call(http_, what, "POST", ContainerPath(id) + "/exec", Dump(create));
  if (!created.ok()) return created.status();
  auto created_json = ParseJson(created->body, what);
  if (!created_json.ok()) return created_json.status();
  ExecSession session;
  session.exec_id = StringField(*created_json, "Id");
  if (session.exec_id.empty()) return Status::Internal(what + ": the answer has no Id: " + created->body);
  auto upgraded = http_.Upgrade("POST", std::string(kApi) + "/exec/" + UrlEncode(session.exec_id) + "/start",
                                Dump({{"Detach", false}, {"Tty", true}}), {}, kCallTimeout, /*accept_200=*/true);
  if (!upgraded.ok()) return upgraded.status().WithPrefix(what);
  session.fd = upgraded->fd;
  session.early = std::move(upgraded->early);
  // A resize before the start is refused: the exec has no terminal yet.
  if (Status resized = ResizeExec(session.exec_id, rows, cols); !resized.ok())
    spdlog::debug("{}: setting its terminal size: {}", what, resized.message());
  return session;
}

Status DockerEngine::ResizeExec(const std::string& exec_id, int rows, int cols) {
  return Call(http_, "resizing exec " + exec_id, "POST",
              std::string(kApi) + "/exec/" + UrlEncode(exec_id) + "/resize?h=" + std::to_string(rows) +
                  "&w=" + std::to_string(cols))
      .status();
}

Result<ExecInfo> DockerEngine::InspectExec(const std::string& exec_id) {
  const std::string what = "inspecting exec " + exec_id;
  auto answer = Call(http_, what, "GET", std::string(kApi) + "/exec/" + UrlEncode(exec_id) + "/json");
  if (!answer.ok()) return answer.status();
  auto j = ParseJson(answer->body, what);
  if (!j.ok()) return j.status();
  ExecInfo info;
  info.container_id = StringField(*j, "ContainerID");
  info.running = BoolField(*j, "Running");
  const int64_t pid = IntField(*j, "Pid");
  if (info.running && pid > 0 && pid <= std::numeric_limits<int>::max()) info.pid = static_cast<int>(pid);
  const json* code = Field(*j, "ExitCode");
  if (!info.running && code != nullptr && code->is_number_integer()) info.exit_code = code->get<int>();
  return info;
}

Status DockerEngine::StreamLogs(const std::string& id, int tail, bool follow, const std::function<void()>& on_started,
                                const std::function<bool(std::string_view)>& on_output,
                                const std::atomic<bool>& stop) {
  const std::string what = "logs of container " + id;
  const std::string path = ContainerPath(id) + "/logs?stdout=1&stderr=1&follow=" + (follow ? "1" : "0") +
                           "&tail=" + (tail > 0 ? std::to_string(tail) : std::string("all"));
  DockerStreamDemuxer demuxer;
  bool stopped_by_reader = false;
  auto on_chunk = [&](std::string_view chunk) {
    return demuxer.Feed(chunk, [&](bool, std::string_view payload) {
      if (on_output(payload)) return true;
      stopped_by_reader = true;
      return false;
    });
  };
  Status s = http_.Stream("GET", path, "", on_started, on_chunk, stop, /*end_is_ok=*/true);
  if (stopped_by_reader || stop) return Status::Ok();
  if (Status demux = demuxer.Finish(); !demux.ok()) return demux.WithPrefix(what);
  return s.WithPrefix(what);
}

Status DockerEngine::StreamEvents(const std::vector<std::string>& label_filters,
                                  const std::vector<std::string>& actions,
                                  const std::function<void()>& on_connected,
                                  const std::function<void(const EngineEvent&)>& on_event,
                                  const std::atomic<bool>& stop) {
  json extra = {{"type", json::array({"container"})}};
  if (!actions.empty()) extra["event"] = actions;
  // Podman sends a death as "die" but filters it by its own name, "died";
  // Docker takes an event name it does not know as matching nothing.
  if (std::find(actions.begin(), actions.end(), "die") != actions.end()) extra["event"].push_back("died");
  const std::string path = std::string(kApi) + "/events?filters=" + LabelFilters(label_filters, std::move(extra));
  LineSplitter lines;
  bool overlong = false;
  auto on_chunk = [&](std::string_view chunk) {
    overlong = !lines.Feed(chunk, [&](std::string_view line) {
      std::optional<EngineEvent> event = ParseEngineEvent(line);
      if (!event) {
        spdlog::warn("Docker event stream on {}: skipping a malformed event: {}", http_.Describe(),
                     std::string(line.substr(0, 200)));
        return;
      }
      on_event(*event);
    });
    return !overlong;
  };
  Status streamed = http_.Stream("GET", path, "", on_connected, on_chunk, stop);
  if (overlong)
    return Status::Unavailable("Docker event stream on " + http_.Describe() + ": a line of over " +
                               std::to_string(LineSplitter::kMaxLine) + " bytes without a line break; reconnecting");
  return streamed.WithPrefix("Docker event stream");
}

namespace {

// The X-Registry-Auth header for `registry_auth`; none when it is empty.
std::vector<std::string> AuthHeader(const std::string& registry_auth) {
  if (registry_auth.empty()) return {};
  return {"X-Registry-Auth: " + registry_auth};
}

}  // namespace

Status DockerEngine::Pull(const std::string& image, const std::string& registry_auth,
                          const std::function<void(const PullMessage&)>& on_message, const std::atomic<bool>& stop) {
  const std::string what = "pulling " + image;
  const ImageRef ref = ParseImageRef(image);
  // fromImage with an empty tag would pull every tag of the repository.
  const std::string path = std::string(kApi) + "/images/create?fromImage=" + UrlEncode(ref.repository) +
                           "&tag=" + UrlEncode(ref.digest.empty() ? ref.tag : ref.digest);
  LineSplitter lines;
  bool overlong = false;
  Status failed;  // the error a line of the stream reported
  auto on_chunk = [&](std::string_view chunk) {
    overlong = !lines.Feed(chunk, [&](std::string_view line) {
      std::optional<Result<PullMessage>> message = ParsePullLine(line);
      if (!message) return;
      if (!message->ok()) {
        if (failed.ok()) failed = message->status();
        return;
      }
      on_message(**message);
    });
    return !overlong;
  };
  Status streamed =
      http_.Stream("POST", path, "", nullptr, on_chunk, stop, /*end_is_ok=*/true, AuthHeader(registry_auth));
  if (stop) return Status::Ok();
  if (overlong)
    return Status::Internal(what + ": the engine sent a line of over " + std::to_string(LineSplitter::kMaxLine) +
                            " bytes");
  if (!failed.ok()) return failed.WithPrefix(what);
  if (!streamed.ok()) {
    // The engine's refusal before any progress: its JSON message, classified.
    const std::string text = streamed.message();
    const size_t brace = text.find('{');
    const std::string message = brace == std::string::npos ? text : EngineMessage(text.substr(brace));
    if (streamed.code() == Status::Code::kUnavailable && text.find("HTTP ") == std::string::npos)
      return streamed.WithPrefix(what);  // the engine itself could not be reached
    const long http_status = streamed.code() == Status::Code::kNotFound          ? 404
                             : streamed.code() == Status::Code::kInvalidArgument ? 400
                                                                                 : 500;
    return PullError(http_status, message).WithPrefix(what);
  }
  return Status::Ok();
}

Result<std::string> DockerEngine::RegistryDigest(const std::string& image, const std::string& registry_auth) {
  const std::string what = "asking the registry for " + image;
  const std::string path = std::string(kApi) + "/distribution/" + EscapedImageName(image) + "/json";
  if (Status on_route = PathStaysOnItsRoute(what, path); !on_route.ok()) return on_route;
  auto response = http_.Request("GET", path, "", kCallTimeout, AuthHeader(registry_auth));
  if (!response.ok()) return response.status().WithPrefix(what);
  // The engine's own 404 is a JSON message about the image; a router's
  // plain "Not Found" means the engine has no such route (Podman).
  if (response->status == 404 && !ParseJsonWithin(response->body))
    return Status::FailedPrecondition(
        what + ": the engine at " + http_.Describe() +
        " cannot ask a registry which digest a tag names (it has no GET /distribution/{name}/json; Podman has "
        "none); create with \"pull\": \"missing\" or \"always\", or name the image by its digest "
        "(name@sha256:...)");
  if (response->status < 200 || response->status >= 300)
    return PullError(response->status, EngineMessage(response->body)).WithPrefix(what);
  auto j = ParseJson(response->body, what);
  if (!j.ok()) return j.status();
  const std::string digest = StringField(ObjectField(*j, "Descriptor"), "digest");
  if (digest.empty())
    return Status::Internal(what + ": the engine's answer has no digest: " + response->body.substr(0, 200));
  return digest;
}

Result<ImageInfo> DockerEngine::InspectImage(const std::string& image) {
  const std::string what = "inspecting image " + image;
  auto response = Call(http_, what, "GET", ImagePath(image) + "/json");
  if (!response.ok()) return response.status();
  return ParseImageInspect(response->body, what);
}

Result<std::vector<ImageInfo>> DockerEngine::ListImages() {
  const std::string what = "listing images";
  auto response = Call(http_, what, "GET", std::string(kApi) + "/images/json");
  if (!response.ok()) return response.status();
  return ParseImageList(response->body, what);
}

Result<EngineInfo> DockerEngine::Info() {
  const std::string what = "reading the engine's info";
  auto response = Call(http_, what, "GET", std::string(kApi) + "/info");
  if (!response.ok()) return response.status();
  auto j = ParseJson(response->body, what);
  if (!j.ok()) return j.status();
  EngineInfo info{StringField(*j, "DockerRootDir"), StringField(*j, "CgroupDriver"), StringField(*j, "CgroupVersion")};
  if (info.data_root.empty()) return Status::Internal(what + ": it names no DockerRootDir");
  return info;
}

Status DockerEngine::RemoveImage(const std::string& id) {
  auto response = Call(http_, "removing image " + id, "DELETE", ImagePath(id));
  return response.status();
}

}  // namespace slotd
