// Files the agent and its tools keep (the agent's state record, node
// claims, etcd lease ids, Prometheus targets, a generated API token) are
// written through one function, so that a full disk, a failed write or a
// crash never leaves a truncated or half-written file where the previous
// one was.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "common/status.h"

namespace slotd {

// Replaces `path` with `text` whole or not at all: writes a temporary file
// in the same directory, writes it fully, fsyncs and closes it (each step
// checked), renames it over `path` and fsyncs the directory. The file gets
// `mode`. On failure `path` is left as it was, the temporary file is
// removed, and the status (kUnavailable) names `path`, the step and the
// system's error, with what to do.
Status WriteFileAtomically(const std::string& path, std::string_view text, mode_t mode = 0644);

}  // namespace slotd
