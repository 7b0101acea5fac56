// Fuzz target: DockerStreamDemuxer, the splitter of the multiplexed
// stdout/stderr stream of container logs and exec output.
//
// Input: byte 0 gives the number of piece sizes (1 to 8), the next bytes the
// sizes (0 to 63); the rest is the stream. The stream is fed whole, then in
// pieces of those sizes, in turn. Invariants: both ways give the same
// stdout, stderr and end status, and these are what a plain frame-by-frame
// reading of the whole stream gives (DemultiplexDockerStream too).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/docker/docker_answers.h"
#include "fuzz_check.h"

namespace {

using slotd::DockerStreamDemuxer;
using slotd::Status;

struct Output {
  std::string out;
  std::string err;
  Status end;
};

// Feeds `stream` in pieces of `sizes`, in turn (the whole at once when empty).
Output Demultiplex(std::string_view stream, const std::vector<size_t>& sizes) {
  Output result;
  DockerStreamDemuxer demuxer;
  auto sink = [&](bool is_stderr, std::string_view payload) {
    (is_stderr ? result.err : result.out).append(payload);
    return true;
  };
  if (sizes.empty()) {
    demuxer.Feed(stream, sink);
  } else {
    for (size_t i = 0; !stream.empty(); ++i) {
      const size_t n = std::min(sizes[i % sizes.size()], stream.size());
      const bool more = demuxer.Feed(stream.substr(0, n), sink);
      stream.remove_prefix(n);
      if (!more) break;
    }
  }
  result.end = demuxer.Finish();
  return result;
}

// The reading the format defines, frame by frame over the whole stream:
// whether it is well formed, and its stdout and stderr.
struct Reference {
  bool well_formed = true;
  std::string out;
  std::string err;
};

Reference ReadFrames(std::string_view stream) {
  Reference ref;
  while (!stream.empty()) {
    const auto* h = reinterpret_cast<const unsigned char*>(stream.data());
    if (stream.size() < 8 || h[0] > 2 || h[1] != 0 || h[2] != 0 || h[3] != 0) {
      ref.well_formed = false;  // a header cut short or malformed
      return ref;
    }
    const size_t size = (size_t{h[4]} << 24) | (size_t{h[5]} << 16) | (size_t{h[6]} << 8) | h[7];
    const std::string_view payload = stream.substr(8, size);
    (h[0] == 2 ? ref.err : ref.out).append(payload);
    if (payload.size() < size) {
      ref.well_formed = false;  // the last frame cut short: what came is delivered
      return ref;
    }
    stream.remove_prefix(8 + size);
  }
  return ref;
}

std::string Describe(const Output& o) {
  return "stdout " + std::to_string(o.out.size()) + " bytes, stderr " + std::to_string(o.err.size()) +
         " bytes, end: " + (o.end.ok() ? std::string("OK") : o.end.message());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t count = data[0] % 8 + 1;
  if (size < 1 + count) return 0;
  std::vector<size_t> sizes;
  for (size_t i = 0; i < count; ++i) sizes.push_back(data[1 + i] % 64);
  if (std::all_of(sizes.begin(), sizes.end(), [](size_t s) { return s == 0; })) sizes.back() = 1;
  const std::string_view stream(reinterpret_cast<const char*>(data) + 1 + count, size - 1 - count);

  const Output whole = Demultiplex(stream, {});
  const Output pieces = Demultiplex(stream, sizes);
  FUZZ_CHECK(whole.out == pieces.out && whole.err == pieces.err, "whole: " + Describe(whole) + "; in pieces: " + Describe(pieces));
  FUZZ_CHECK(whole.end.ok() == pieces.end.ok() && whole.end.message() == pieces.end.message(),
             "whole: " + Describe(whole) + "; in pieces: " + Describe(pieces));

  const Reference ref = ReadFrames(stream);
  FUZZ_CHECK(whole.end.ok() == ref.well_formed,
             std::string("the demuxer says ") + (whole.end.ok() ? "OK" : whole.end.message()) + ", the frames are " +
                 (ref.well_formed ? "well formed" : "malformed"));
  FUZZ_CHECK(whole.out == ref.out && whole.err == ref.err,
             "demuxer: " + Describe(whole) + "; frames: stdout " + std::to_string(ref.out.size()) + " bytes, stderr " +
                 std::to_string(ref.err.size()) + " bytes");

  std::string out, err;
  const Status all = slotd::DemultiplexDockerStream(stream, out, err);
  FUZZ_CHECK(out == whole.out && err == whole.err && all.ok() == whole.end.ok(),
             "DemultiplexDockerStream differs from the demuxer fed whole");
  return 0;
}
