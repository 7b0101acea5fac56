// TempTree: a fresh directory under the system's temp dir for a fake file
// tree (a fake proc/ and sys/fs/cgroup/, for readers given a root), removed
// with its contents on destruction.
#pragma once

#include <string>

namespace slotd {

class TempTree {
 public:
  // Creates <tmp>/<prefix>.XXXXXX.
  explicit TempTree(const std::string& prefix);
  ~TempTree();
  TempTree(const TempTree&) = delete;
  TempTree& operator=(const TempTree&) = delete;

  // Writes `content` to root/`relative`, creating its directories.
  void Write(const std::string& relative, const std::string& content) const;
  // Removes root/`relative` and everything under it.
  void Remove(const std::string& relative) const;
  // The directory, without a trailing "/".
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

}  // namespace slotd
