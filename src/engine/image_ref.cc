#include "engine/image_ref.h"

namespace slotd {

std::string ImageRef::Canonical() const {
  return digest.empty() ? repository + ":" + tag : repository + "@" + digest;
}

ImageRef ParseImageRef(const std::string& image) {
  ImageRef ref;
  std::string name = image;
  if (const size_t at = name.find('@'); at != std::string::npos) {
    ref.digest = name.substr(at + 1);
    name.erase(at);
  }
  // A tag's ":" comes after the last "/"; an earlier one is a registry's port.
  const size_t slash = name.rfind('/');
  const size_t colon = name.rfind(':');
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
    ref.tag = name.substr(colon + 1);
    name.erase(colon);
  } else if (ref.digest.empty()) {
    ref.tag = "latest";
  }
  ref.repository = name;
  const size_t first_slash = name.find('/');
  const std::string first = first_slash == std::string::npos ? "" : name.substr(0, first_slash);
  const bool is_registry =
      !first.empty() && (first.find('.') != std::string::npos || first.find(':') != std::string::npos ||
                         first == "localhost");
  ref.registry = is_registry ? first : "docker.io";
  return ref;
}

}  // namespace slotd
