// Base64 (RFC 4648), for exact bytes in JSON answers and for registry
// credentials (docker login's "auth", the engine's X-Registry-Auth).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace slotd {

// Standard base64, with padding.
std::string Base64(std::string_view bytes);
// The URL-safe alphabet ("-" and "_"), with padding.
std::string Base64Url(std::string_view bytes);
// Decodes either alphabet, padded or not; nullopt for any other character
// or a length no encoding gives.
std::optional<std::string> DecodeBase64(std::string_view text);

}  // namespace slotd
