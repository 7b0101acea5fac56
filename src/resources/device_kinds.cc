#include "resources/device_kinds.h"

#include "resources/cuda/cuda_kind.h"
#include "resources/mock/mock_kind.h"

namespace slotd {

const std::vector<DeviceKind>& DeviceKinds() {
  static const std::vector<DeviceKind> kinds = {
      CudaKind(),
      MockKind(),
  };
  return kinds;
}

const std::map<std::string, std::string>& DeviceVariablesSelectingNone() {
  static const std::map<std::string, std::string> variables = [] {
    std::map<std::string, std::string> merged;
    for (const DeviceKind& kind : DeviceKinds())
      merged.insert(kind.variables_selecting_none.begin(), kind.variables_selecting_none.end());
    return merged;
  }();
  return variables;
}

}  // namespace slotd
