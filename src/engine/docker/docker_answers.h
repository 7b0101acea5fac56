// The parsers of what the Docker engine answers, apart from the calls that
// fetch it, so that they can be tested and fuzzed on bytes alone. DockerEngine
// uses exactly these; they are defined in docker_answers.cc.
//
// An answer is untrusted: each parser takes any bytes, never throws, and
// reads a missing or mistyped field as empty ("", 0, false, no labels).
// Thread-safety: free functions without state; safe from any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/container_engine.h"

namespace slotd {

// GET /version. The name is "podman" when a component is Podman's engine
// ("Podman Engine"), else "docker". kInternal, prefixed with `what`, when
// `body` is not JSON or has no Version.
Result<EngineIdentity> ParseEngineIdentity(const std::string& body, const std::string& what);

// GET /containers/json: one ContainerInfo per element of the array, in its
// order. kInternal, prefixed with `what`, when `body` is not JSON or not an array.
Result<std::vector<ContainerInfo>> ParseContainerList(const std::string& body, const std::string& what);

// GET /containers/{id}/json. kInternal, prefixed with `what`, when `body` is not JSON.
Result<ContainerInfo> ParseContainerInspect(const std::string& body, const std::string& what);

// GET /containers/{id}/stats?stream=false. kInternal, prefixed with `what`,
// when `body` is not JSON; kFailedPrecondition for the empty reading (dated
// 0001-01-01) the engine sends for a container that is not running.
Result<ContainerStats> ParseContainerStats(const std::string& body, const std::string& what);

// One line of GET /events (without its newline); nothing when the line is
// not a JSON object.
std::optional<EngineEvent> ParseEngineEvent(std::string_view line);

// One file of a tar archive, as GET /containers/{id}/archive sends it.
struct ArchivedFile {
  enum class Kind { kRegular, kSymlink, kOther };
  Kind kind = Kind::kOther;
  std::string content;  // kRegular: the file's bytes
  std::string link;     // kSymlink: where it points
};
// The first entry of the tar archive `tar` (pax and GNU long-name headers
// skipped). kInternal when `tar` holds no whole entry.
Result<ArchivedFile> ParseFirstArchivedFile(std::string_view tar);

// GET /images/json: one ImageInfo per element. kInternal, prefixed with
// `what`, when `body` is not JSON or not an array.
Result<std::vector<ImageInfo>> ParseImageList(const std::string& body, const std::string& what);

// GET /images/{name}/json. kInternal, prefixed with `what`, when `body` is not JSON.
Result<ImageInfo> ParseImageInspect(const std::string& body, const std::string& what);

// One line of POST /images/create's progress stream: the message, or the
// error the line reports ({"error": ...}) as PullError(0, ...) classifies it.
// Nothing when the line is not a JSON object.
std::optional<Result<PullMessage>> ParsePullLine(std::string_view line);

// What a failed pull or registry lookup means, from the engine's HTTP status
// (0 for an error inside a 200 stream) and its message: kNotFound (404, or
// "manifest unknown" / "not found"), kPermissionDenied (the registry wants
// or refused credentials), kUnavailable (it cannot be reached), kInternal
// otherwise. The message is kept.
Status PullError(long http_status, const std::string& message);

}  // namespace slotd
