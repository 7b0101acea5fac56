#include "common/paths.h"

#include <filesystem>

namespace slotd {

std::string NormalPath(const std::string& path) {
  std::string normal = std::filesystem::path(path).lexically_normal().string();
  while (normal.size() > 1 && normal[0] == '/' && normal[1] == '/') normal.erase(0, 1);  // "//proc" is /proc
  while (normal.size() > 1 && normal.back() == '/') normal.pop_back();
  return normal;
}

bool IsWithin(const std::string& path, const std::string& dir) {
  return path == dir || dir == "/" || path.rfind(dir + "/", 0) == 0;
}

}  // namespace slotd
