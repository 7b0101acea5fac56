#include "model/create_request.h"

namespace slotd {

Result<CreateRequest> ParseCreateRequest(const nlohmann::json& body) {
  return ParseRequestWithin(body, kApiRequestLimits);
}

}  // namespace slotd
