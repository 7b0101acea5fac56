// Absolute paths compared as text: the one rule for "is this path that
// directory or inside it", used wherever slotd keeps paths apart (pseudo
// filesystems, agents' paths on a node, kernels' mounts).
#pragma once

#include <string>

namespace slotd {

// `path` without ".", "..", repeated slashes or a trailing slash ("//a/./b/"
// is "/a/b"); "/" stays "/". Symbolic links are not followed.
std::string NormalPath(const std::string& path);

// Whether `path` is `dir` or lies inside it; both normal (NormalPath).
bool IsWithin(const std::string& path, const std::string& dir);

}  // namespace slotd
