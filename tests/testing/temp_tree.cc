#include "testing/temp_tree.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace slotd {

namespace fs = std::filesystem;

TempTree::TempTree(const std::string& prefix) {
  std::string pattern = (fs::temp_directory_path() / (prefix + ".XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp " + pattern + " failed");
  root_ = pattern;
}

TempTree::~TempTree() {
  std::error_code ignored;
  fs::remove_all(root_, ignored);
}

void TempTree::Write(const std::string& relative, const std::string& content) const {
  const fs::path path = fs::path(root_) / relative;
  fs::create_directories(path.parent_path());
  std::ofstream(path) << content;
}

void TempTree::Remove(const std::string& relative) const { fs::remove_all(fs::path(root_) / relative); }

}  // namespace slotd
