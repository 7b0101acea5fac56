#include "common/token_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace slotd {

Result<std::string> ReadTokenFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return Status::InvalidArgument("token file " + path + " is a directory; point token-file at a file whose first "
                                   "line is the token");
  std::ifstream in(path);
  if (!in)
    return Status::InvalidArgument("cannot read token file " + path + ": " + std::strerror(errno) +
                                   "; create it with the token on its first line, readable by this user");
  std::string token;
  std::getline(in, token);
  const auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!token.empty() && space(token.back())) token.pop_back();
  size_t start = 0;
  while (start < token.size() && space(token[start])) ++start;
  token.erase(0, start);
  if (token.empty())
    return Status::InvalidArgument("token file " + path + " has no token on its first line; put the token there");
  return token;
}

}  // namespace slotd
