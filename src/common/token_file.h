// The API token file ([agent] token-file): read the same way by slotd, which
// requires the token, and by slotctl, which sends it. Without token-file the
// agent makes a token of its own at first start, so that its TCP API never
// goes without one.
#pragma once

#include <string>

#include "common/status.h"

namespace slotd {

// The token: the file's first line, surrounding white space trimmed.
// kInvalidArgument naming the file when it cannot be read, is a directory
// or anything but a regular file (never waiting on a FIFO), is over 64 KiB,
// or its first line is empty.
Result<std::string> ReadTokenFile(const std::string& path);

// Where an agent without [agent] token-file keeps the token it made:
// <var-base-path>/api.token.
std::string GeneratedTokenPath(const std::string& var_base_path);

// The token in `path` (ReadTokenFile) when the file exists; otherwise a new
// one (256 random bits, as hex) written there with mode 0600. Errors name
// the file and what to do.
Result<std::string> ReadOrMakeToken(const std::string& path);

}  // namespace slotd
