// RunProgram: runs a program of the node (mkfs.ext4 for a scratch image) to
// completion, with a bounded output and a deadline.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/status.h"

namespace slotd {

// The most of a program's output (stdout and stderr together) kept for messages.
inline constexpr size_t kMaxProgramOutput = 16 << 10;

// Runs `argv` (argv[0] looked up in PATH) with stdin from /dev/null and
// without the agent's other descriptors; waits until it exits or `timeout`
// passes (then it is killed). Returns its output (the first
// kMaxProgramOutput bytes; the rest is read and dropped). kUnavailable
// naming the program when it cannot be started, is killed, or exits with a
// status other than 0 (with the last lines of its output).
Result<std::string> RunProgram(const std::vector<std::string>& argv, std::chrono::milliseconds timeout);

}  // namespace slotd
