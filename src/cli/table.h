// Aligned text tables for slotctl's outputs.
#pragma once

#include <string>
#include <vector>

namespace slotctl {

// `header` and `rows` (each as long as `header`) as lines of columns separated by two spaces or more,
// each column as wide as its widest cell; the last cell of a line is not
// padded. Every line ends with "\n".
std::string FormatTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);

}  // namespace slotctl
