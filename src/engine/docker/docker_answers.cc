// The answers of the Docker engine read from their bytes (docker_answers.h,
// docker_json.h): apart from the calls that fetch them, so that they can be
// tested and fuzzed on bytes alone.
#include "engine/docker/docker_answers.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <limits>
#include <optional>

#include "common/ascii.h"
#include "common/json_reader.h"
#include "common/rfc3339.h"
#include "engine/docker/docker_engine.h"
#include "engine/docker/docker_json.h"

namespace slotd {
namespace docker_json {

const json* Field(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

const json& ObjectField(const json& j, const char* key) {
  static const json kEmpty = json::object();
  const json* f = Field(j, key);
  return f != nullptr && f->is_object() ? *f : kEmpty;
}

std::string StringField(const json& j, const char* key) {
  const json* f = Field(j, key);
  return f != nullptr && f->is_string() ? f->get<std::string>() : std::string();
}

int64_t IntField(const json& j, const char* key) {
  const json* f = Field(j, key);
  return f != nullptr && f->is_number_integer() ? f->get<int64_t>() : 0;
}

uint64_t CountField(const json& j, const char* key) {
  const json* f = Field(j, key);
  if (f == nullptr || !f->is_number_integer()) return 0;
  if (f->is_number_unsigned()) return f->get<uint64_t>();
  const int64_t value = f->get<int64_t>();
  return value < 0 ? 0 : static_cast<uint64_t>(value);
}

bool BoolField(const json& j, const char* key) {
  const json* f = Field(j, key);
  return f != nullptr && f->is_boolean() && f->get<bool>();
}

Labels StringMapField(const json& j, const char* key) {
  Labels out;
  for (const auto& [k, v] : ObjectField(j, key).items()) {
    if (v.is_string()) out[k] = v.get<std::string>();
  }
  return out;
}

std::vector<std::string> StringListField(const json& j, const char* key) {
  std::vector<std::string> out;
  const json* f = Field(j, key);
  if (f == nullptr || !f->is_array()) return out;
  for (const auto& v : *f) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

Result<json> ParseJson(const std::string& body, const std::string& what) {
  std::optional<json> j = ParseJsonWithin(body);
  if (!j) return Status::Internal(what + ": the engine sent malformed JSON: " + body.substr(0, 200));
  return std::move(*j);
}

int64_t ParseRfc3339Millis(const std::string& text) {
  const std::optional<int64_t> millis = slotd::ParseRfc3339Millis(text);
  return millis && *millis > 0 ? *millis : 0;
}

int64_t ParseRfc3339(const std::string& text) {
  const std::optional<int64_t> millis = slotd::ParseRfc3339Millis(text);
  if (!millis) return 0;
  // Whole seconds, rounded down (also before the epoch).
  return *millis >= 0 ? *millis / 1000 : -((-*millis + 999) / 1000);
}

}  // namespace docker_json

using namespace docker_json;

namespace {

// A container name without the engine's leading "/".
std::string StripSlash(std::string name) {
  if (!name.empty() && name.front() == '/') name.erase(0, 1);
  return name;
}

}  // namespace

bool DockerStreamDemuxer::Feed(std::string_view bytes, const Sink& sink) {
  if (!error_.empty()) return false;
  while (!bytes.empty()) {
    if (payload_left_ > 0) {
      const size_t n = std::min(payload_left_, bytes.size());
      payload_left_ -= n;
      offset_ += n;
      const std::string_view piece = bytes.substr(0, n);
      bytes.remove_prefix(n);
      if (!sink(is_stderr_, piece)) return false;
      continue;
    }
    const size_t n = std::min(sizeof(header_) - header_have_, bytes.size());
    std::memcpy(header_ + header_have_, bytes.data(), n);
    header_have_ += n;
    offset_ += n;
    bytes.remove_prefix(n);
    if (header_have_ < sizeof(header_)) break;
    header_have_ = 0;
    const unsigned char* h = header_;
    if (h[0] > 2 || h[1] != 0 || h[2] != 0 || h[3] != 0) {
      error_ = "docker output stream: malformed frame header at byte " + std::to_string(offset_ - 8) +
               " (was the container created with a TTY?)";
      return false;
    }
    is_stderr_ = h[0] == 2;
    payload_left_ = (size_t{h[4]} << 24) | (size_t{h[5]} << 16) | (size_t{h[6]} << 8) | h[7];
  }
  return true;
}

Status DockerStreamDemuxer::Finish() const {
  if (!error_.empty()) return Status::Internal(error_);
  if (header_have_ > 0)
    return Status::Internal("docker output stream: frame header cut short at byte " +
                            std::to_string(offset_ - header_have_));
  if (payload_left_ > 0)
    return Status::Internal("docker output stream: the last frame ends " + std::to_string(payload_left_) +
                            " bytes early, at byte " + std::to_string(offset_));
  return Status::Ok();
}

Status DemultiplexDockerStream(std::string_view stream, std::string& out, std::string& err) {
  DockerStreamDemuxer demuxer;
  demuxer.Feed(stream, [&](bool is_stderr, std::string_view payload) {
    (is_stderr ? err : out).append(payload);
    return true;
  });
  return demuxer.Finish();
}

// --- The answers of the engine (docker_answers.h).

Result<EngineIdentity> ParseEngineIdentity(const std::string& body, const std::string& what) {
  auto parsed = ParseJson(body, what);
  if (!parsed.ok()) return parsed.status();
  EngineIdentity identity;
  identity.name = "docker";
  identity.version = StringField(*parsed, "Version");
  identity.api_version = StringField(*parsed, "ApiVersion");
  if (identity.version.empty()) return Status::Internal(what + ": the answer has no Version: " + body.substr(0, 200));
  if (const json* components = Field(*parsed, "Components"); components != nullptr && components->is_array())
    for (const json& component : *components)
      if (StringField(component, "Name") == "Podman Engine") identity.name = "podman";
  return identity;
}

Result<std::vector<ContainerInfo>> ParseContainerList(const std::string& body, const std::string& what) {
  auto parsed = ParseJson(body, what);
  if (!parsed.ok()) return parsed.status();
  if (!parsed->is_array()) {
    return Status::Internal(what + ": the engine sent no array: " + body.substr(0, 200));
  }
  std::vector<ContainerInfo> out;
  for (const json& c : *parsed) {
    ContainerInfo info;
    info.id = StringField(c, "Id");
    const auto names = StringListField(c, "Names");
    if (!names.empty()) info.name = StripSlash(names.front());
    info.image = StringField(c, "Image");
    info.image_id = StringField(c, "ImageID");
    info.labels = StringMapField(c, "Labels");
    info.state = StringField(c, "State");
    info.running = info.state == "running";
    info.created_unix = IntField(c, "Created");
    out.push_back(std::move(info));
  }
  return out;
}

Result<ContainerInfo> ParseContainerInspect(const std::string& body, const std::string& what) {
  auto parsed = ParseJson(body, what);
  if (!parsed.ok()) return parsed.status();
  const json& j = *parsed;
  const json& config = ObjectField(j, "Config");
  const json& state = ObjectField(j, "State");
  const json& host = ObjectField(j, "HostConfig");

  ContainerInfo info;
  info.id = StringField(j, "Id");
  info.name = StripSlash(StringField(j, "Name"));
  info.image = StringField(config, "Image");
  info.image_id = StringField(j, "Image");
  info.labels = StringMapField(config, "Labels");
  info.state = StringField(state, "Status");
  info.running = BoolField(state, "Running");
  info.exit_code = static_cast<int>(IntField(state, "ExitCode"));
  info.pid = static_cast<int>(IntField(state, "Pid"));
  info.created_unix = ParseRfc3339(StringField(j, "Created"));
  info.started_at = StringField(state, "StartedAt");
  info.finished_at = StringField(state, "FinishedAt");
  info.started_ms = ParseRfc3339Millis(info.started_at);  // "0001-01-01T...": never
  info.finished_ms = ParseRfc3339Millis(info.finished_at);
  info.cpuset_cpus = StringField(host, "CpusetCpus");
  info.memory_bytes = IntField(host, "Memory");
  info.pids_limit = IntField(host, "PidsLimit");
  info.env = StringListField(config, "Env");
  return info;
}

Result<ContainerStats> ParseContainerStats(const std::string& body, const std::string& what) {
  auto parsed = ParseJson(body, what);
  if (!parsed.ok()) return parsed.status();
  const json& j = *parsed;
  // A container that is not running is answered with an empty reading, dated
  // at the zero time.
  if (StringField(j, "read").rfind("0001-01-01", 0) == 0)
    return Status::FailedPrecondition(what + ": the container is not running");
  const json& memory = ObjectField(j, "memory_stats");
  const json& memory_detail = ObjectField(memory, "stats");
  ContainerStats stats;
  stats.cpu_usage_ns = CountField(ObjectField(ObjectField(j, "cpu_stats"), "cpu_usage"), "total_usage");
  stats.memory_used_bytes = CountField(memory, "usage");
  stats.memory_limit_bytes = CountField(memory, "limit");
  for (const char* key : {"total_cache", "cache", "file"}) {
    if (Field(memory_detail, key) != nullptr) {
      stats.memory_cache_bytes = CountField(memory_detail, key);
      break;
    }
  }
  stats.pids = CountField(ObjectField(j, "pids_stats"), "current");
  const json* io = Field(ObjectField(j, "blkio_stats"), "io_service_bytes_recursive");
  if (io != nullptr && io->is_array()) {
    for (const json& entry : *io) {
      const std::string op = AsciiLowered(StringField(entry, "op"));
      if (op == "read") stats.io_read_bytes += CountField(entry, "value");
      if (op == "write") stats.io_write_bytes += CountField(entry, "value");
    }
  }
  return stats;
}

std::optional<EngineEvent> ParseEngineEvent(std::string_view line) {
  const json j = ParseJsonWithin(line).value_or(json());
  if (!j.is_object()) return std::nullopt;
  EngineEvent event;
  event.type = StringField(j, "Type");
  event.action = StringField(j, "Action");
  const json& actor = ObjectField(j, "Actor");
  event.id = StringField(actor, "ID");
  event.attributes = StringMapField(actor, "Attributes");
  event.time_nano = IntField(j, "timeNano");
  return event;
}

Result<std::vector<ImageInfo>> ParseImageList(const std::string& body, const std::string& what) {
  auto parsed = ParseJson(body, what);
  if (!parsed.ok()) return parsed.status();
  if (!parsed->is_array()) return Status::Internal(what + ": the engine sent no array: " + body.substr(0, 200));
  std::vector<ImageInfo> out;
  for (const json& i : *parsed) {
    ImageInfo info;
    info.id = StringField(i, "Id");
    for (std::string& tag : StringListField(i, "RepoTags"))
      if (tag != "<none>:<none>") info.tags.push_back(std::move(tag));
    for (std::string& digest : StringListField(i, "RepoDigests"))
      if (digest != "<none>@<none>") info.digests.push_back(std::move(digest));
    info.size_bytes = IntField(i, "Size");
    info.created_unix = IntField(i, "Created");
    out.push_back(std::move(info));
  }
  return out;
}

Result<ImageInfo> ParseImageInspect(const std::string& body, const std::string& what) {
  auto parsed = ParseJson(body, what);
  if (!parsed.ok()) return parsed.status();
  const json& j = *parsed;
  ImageInfo info;
  info.id = StringField(j, "Id");
  info.tags = StringListField(j, "RepoTags");
  info.digests = StringListField(j, "RepoDigests");
  info.size_bytes = IntField(j, "Size");
  info.created_unix = ParseRfc3339(StringField(j, "Created"));
  info.user = StringField(ObjectField(j, "Config"), "User");
  return info;
}

std::optional<Result<PullMessage>> ParsePullLine(std::string_view line) {
  const json j = ParseJsonWithin(line).value_or(json());
  if (!j.is_object()) return std::nullopt;
  if (Field(j, "error") != nullptr || Field(j, "errorDetail") != nullptr) {
    std::string message = StringField(ObjectField(j, "errorDetail"), "message");
    if (message.empty()) message = StringField(j, "error");
    return Result<PullMessage>(PullError(0, message));
  }
  PullMessage message;
  message.layer = StringField(j, "id");
  message.status = StringField(j, "status");
  const json& detail = ObjectField(j, "progressDetail");
  message.current = CountField(detail, "current");
  message.total = CountField(detail, "total");
  return Result<PullMessage>(std::move(message));
}

namespace {

// The number in a tar header's numeric field: octal digits (spaces and NULs
// around them), or a big-endian base-256 number when its first byte has the
// high bit set.
std::optional<uint64_t> TarNumber(std::string_view field) {
  if (!field.empty() && (static_cast<unsigned char>(field[0]) & 0x80)) {
    uint64_t value = static_cast<unsigned char>(field[0]) & 0x7f;
    for (size_t i = 1; i < field.size(); ++i) {
      if (value >> 56) return std::nullopt;
      value = (value << 8) | static_cast<unsigned char>(field[i]);
    }
    return value;
  }
  uint64_t value = 0;
  bool digits = false;
  for (const char c : field) {
    if (c == ' ' || c == '\0') {
      if (digits) break;
      continue;
    }
    if (c < '0' || c > '7' || (value >> 60)) return std::nullopt;
    value = value * 8 + static_cast<uint64_t>(c - '0');
    digits = true;
  }
  return value;
}

// A NUL-terminated string field of a tar header.
std::string TarString(std::string_view field) { return std::string(field.substr(0, field.find('\0'))); }

}  // namespace

Result<ArchivedFile> ParseFirstArchivedFile(std::string_view tar) {
  constexpr size_t kBlock = 512;
  size_t at = 0;
  while (at + kBlock <= tar.size()) {
    const std::string_view header = tar.substr(at, kBlock);
    if (header.find_first_not_of('\0') == std::string_view::npos) break;  // the end-of-archive blocks
    const std::optional<uint64_t> size = TarNumber(header.substr(124, 12));
    if (!size || *size > tar.size()) return Status::Internal("the archive has a header with a bad size");
    const size_t data = at + kBlock;
    const char type = header[156];
    if (type == 'x' || type == 'g' || type == 'L' || type == 'K') {  // pax and GNU long-name headers
      at = data + (*size + kBlock - 1) / kBlock * kBlock;
      continue;
    }
    ArchivedFile file;
    if (type == '0' || type == '\0' || type == '7') {
      if (data + *size > tar.size()) return Status::Internal("the archive ends inside its first file");
      file.kind = ArchivedFile::Kind::kRegular;
      file.content = std::string(tar.substr(data, *size));
    } else if (type == '2') {
      file.kind = ArchivedFile::Kind::kSymlink;
      file.link = TarString(header.substr(157, 100));
    }
    return file;
  }
  return Status::Internal("the archive holds no file");
}

long DockerStatusOf(long http_status, const std::string& body) {
  if (http_status != 500) return http_status;
  const std::optional<json> j = ParseJsonWithin(body);
  const std::string cause = j ? StringField(*j, "cause") : "";
  if (cause == "that name is already in use" || cause == "container state improper") return 409;
  return cause == "no such container" ? 404 : 500;
}

Status PullError(long http_status, const std::string& message) {
  auto says = [&](std::initializer_list<const char*> words) {
    return std::any_of(words.begin(), words.end(), [&](const char* w) { return message.find(w) != std::string::npos; });
  };
  if (http_status == 404 || says({"manifest unknown", "not found", "does not exist", "name unknown"}))
    return Status::NotFound(message);
  if (says({"unauthorized", "authentication required", "no basic auth credentials", "denied", "forbidden"}))
    return Status::PermissionDenied(message);
  if (says({"connection refused", "dial tcp", "no such host", "i/o timeout", "connection reset", "EOF",
            "server misbehaving", "network is unreachable"}))
    return Status::Unavailable(message);
  // The engine refused the request itself ("invalid reference format"): the asker's error.
  if (http_status >= 400 && http_status < 500) return Status::InvalidArgument(message);
  return Status::Internal(message);
}

}  // namespace slotd
