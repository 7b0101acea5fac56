// What build of slotd this is: reported by --version, GET /v1/agent, the
// etcd registration and the slotd_build_info metric.
#pragma once

namespace slotd {

// The release, "x.y.z": project(slotd VERSION ...) in the top CMakeLists.txt,
// its one source (compiled from src/common/version.cc.in).
extern const char* const kSlotdVersion;
// The source commit the binary was built from (`git describe --always
// --dirty`, e.g. "8c648e4" or "8c648e4-dirty"), or "unknown" when it was not
// built from a git checkout. Written at build time by cmake/write_commit.cmake.
extern const char* const kSlotdCommit;

}  // namespace slotd
