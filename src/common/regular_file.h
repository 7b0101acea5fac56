// Reading a small file an operator names (a token file, registry
// credentials): only a regular file is read, and opening never blocks, so a
// FIFO or a device put in its place cannot hang the agent's start or its
// SIGHUP reload.
#pragma once

#include <cstddef>
#include <string>

#include "common/status.h"

namespace slotd {

// The contents of `path`, which must be a regular file (a symbolic link to
// one is followed) of at most `max_bytes`. kInvalidArgument saying what is
// wrong (missing, unreadable, a FIFO, socket, device or directory, too
// large), without `path`: callers name the file and its key.
Result<std::string> ReadRegularFile(const std::string& path, size_t max_bytes);

}  // namespace slotd
