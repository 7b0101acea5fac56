// The API token file ([agent] token-file): read the same way by slotd, which
// requires the token, and by slotctl, which sends it.
#pragma once

#include <string>

#include "common/status.h"

namespace slotd {

// The token: the file's first line, surrounding white space trimmed.
// kInvalidArgument naming the file when it cannot be read, is a directory,
// or its first line is empty.
Result<std::string> ReadTokenFile(const std::string& path);

}  // namespace slotd
