// The parsers of what the Docker engine answers, apart from the calls that
// fetch it, so that they can be tested and fuzzed on bytes alone. DockerEngine
// uses exactly these; they are defined in docker_answers.cc.
//
// An answer is untrusted: each parser takes any bytes, never throws, and
// reads a missing or mistyped field as empty ("", 0, false, no labels).
// Thread-safety: free functions without state; safe from any thread.
#pragma once

#include <cstdint>
#include <functional>
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

// The HTTP status Docker answers where Podman answers 500 with a "cause"
// in `body` that says the same: 409 for a name in use or a container in the
// wrong state, 404 for a container that does not exist (Podman's inspect of
// one being removed). Any other answer keeps `http_status`.
long DockerStatusOf(long http_status, const std::string& body);

// Splits a Docker multiplexed stream (8-byte frame headers: stream byte 1 =
// stdout, 2 = stderr, 0 = stdin echo counted as stdout; 3 zero bytes; size as
// big-endian uint32) as it arrives, in pieces cut anywhere.
class DockerStreamDemuxer {
 public:
  // Receives each piece of a frame's payload; `is_stderr` tells its stream.
  // Returns false to stop.
  using Sink = std::function<bool(bool is_stderr, std::string_view payload)>;

  // Feeds the next bytes of the stream. False when the sink asked to stop or
  // the stream is malformed (then error() says why).
  bool Feed(std::string_view bytes, const Sink& sink);
  // At the end of the stream: OK, or kInternal when the stream was malformed
  // or its last frame was cut short.
  Status Finish() const;

 private:
  unsigned char header_[8] = {};
  size_t header_have_ = 0;  // bytes of the next header received so far
  size_t payload_left_ = 0; // bytes of the current frame still to come
  bool is_stderr_ = false;
  uint64_t offset_ = 0;     // bytes fed so far, for messages
  std::string error_;
};

// The whole of a multiplexed `stream` into `out` and `err`; `err` may be the
// same string as `out` to interleave them. kInternal when a header is
// malformed or a frame is cut short.
Status DemultiplexDockerStream(std::string_view stream, std::string& out, std::string& err);

}  // namespace slotd
