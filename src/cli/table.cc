#include "cli/table.h"

#include <algorithm>

namespace slotctl {

std::string FormatTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size());
  for (size_t i = 0; i < header.size(); ++i) width[i] = header[i].size();
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) width[i] = std::max(width[i], row[i].size());
  std::string text;
  auto add = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size(); ++i) {
      text += row[i];
      if (i + 1 < row.size()) text += std::string(width[i] - row[i].size() + 2, ' ');
    }
    text += "\n";
  };
  add(header);
  for (const auto& row : rows) add(row);
  return text;
}

}  // namespace slotctl
