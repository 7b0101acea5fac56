#include "common/token_file.h"

#include <sys/random.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/atomic_file.h"
#include "common/regular_file.h"

namespace slotd {

namespace {

// A token file larger than this holds no token.
constexpr size_t kMaxTokenFileBytes = 64 * 1024;

}  // namespace

Result<std::string> ReadTokenFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return Status::InvalidArgument("token file " + path + " is a directory; point token-file at a file whose first "
                                   "line is the token");
  Result<std::string> text = ReadRegularFile(path, kMaxTokenFileBytes);
  if (!text.ok())
    return Status::InvalidArgument("cannot read token file " + path + ": it " + text.status().message() +
                                   "; create it as a file with the token on its first line, readable by this user");
  std::string token = text->substr(0, text->find('\n'));
  const auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!token.empty() && space(token.back())) token.pop_back();
  size_t start = 0;
  while (start < token.size() && space(token[start])) ++start;
  token.erase(0, start);
  if (token.empty())
    return Status::InvalidArgument("token file " + path + " has no token on its first line; put the token there");
  return token;
}

std::string GeneratedTokenPath(const std::string& var_base_path) { return var_base_path + "/api.token"; }

Result<std::string> ReadOrMakeToken(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::symlink_status(path, ec).type() != std::filesystem::file_type::not_found)
    return ReadTokenFile(path);
  unsigned char bytes[32];
  if (::getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes))
    return Status::Unavailable("cannot make an API token for " + path + ": getrandom: " + std::strerror(errno) +
                               "; set [agent] token-file instead");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char byte : bytes) token += {kHex[byte >> 4], kHex[byte & 15]};
  if (Status s = WriteFileAtomically(path, token + "\n", 0600); !s.ok()) return s;
  return token;
}

}  // namespace slotd
