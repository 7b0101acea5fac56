#include "model/image_ref.h"

#include <algorithm>
#include <regex>

namespace slotd {
namespace {

// The parts of Docker's reference grammar (github.com/distribution/reference, regexp.go).
const std::regex& Host() {
  static const std::regex kHost(
      R"re((?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*)re"
      R"re(|\[[a-fA-F0-9:]+\])(?::[0-9]+)?)re");
  return kHost;
}
const std::regex& PathComponent() {
  static const std::regex kComponent(R"([a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)");
  return kComponent;
}
const std::regex& Tag() {
  static const std::regex kTag(R"([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})");
  return kTag;
}
const std::regex& Digest() {
  static const std::regex kDigest(R"([A-Za-z][A-Za-z0-9]*([-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})");
  return kDigest;
}

// Whether the first path component `first` of a name names a registry:
// when it has a "." or a ":", is "localhost" or has an upper-case letter
// (path components never have one). Docker's splitDockerDomain.
bool IsRegistry(const std::string& first) {
  return !first.empty() && (first.find_first_of(".:") != std::string::npos || first == "localhost" ||
                            std::any_of(first.begin(), first.end(), [](char c) { return c >= 'A' && c <= 'Z'; }));
}

constexpr size_t kMaxNameLength = 255;
constexpr size_t kMaxReferenceLength = 1024;
constexpr const char* kForm = "; an image reference is [host[:port]/]path[:tag][@sha256:hex], e.g. "
                              "\"127.0.0.1:5000/team/torch:2.3\"";

}  // namespace

ImageRef ParseImageRef(const std::string& image) {
  ImageRef ref;
  ref.name = image;
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
  const bool is_registry = IsRegistry(first);
  ref.registry = is_registry ? first : "docker.io";
  return ref;
}

Status ValidateImageRef(const std::string& image) {
  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument("\"" + image.substr(0, 128) + "\" is not an image reference: " + what + kForm);
  };
  if (image.empty()) return bad("it is empty");
  if (image.size() > kMaxReferenceLength) return bad("it is longer than " + std::to_string(kMaxReferenceLength) + " bytes");
  std::string name = image;
  if (const size_t at = name.find('@'); at != std::string::npos) {
    if (!std::regex_match(name.substr(at + 1), Digest()))
      return bad("the digest after \"@\" is not algorithm:hex (at least 32 hex digits)");
    name.erase(at);
  }
  const size_t slash = name.rfind('/');
  const size_t colon = name.rfind(':');
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
    if (!std::regex_match(name.substr(colon + 1), Tag()))
      return bad("the tag after \":\" must be 1 to 128 of A-Z a-z 0-9 _ . - and not start with . or -");
    name.erase(colon);
  }
  if (name.size() > kMaxNameLength) return bad("the name is longer than " + std::to_string(kMaxNameLength) + " bytes");
  size_t start = 0;
  const size_t first = name.find('/');
  const std::string head = first == std::string::npos ? "" : name.substr(0, first);
  if (IsRegistry(head)) {
    if (!std::regex_match(head, Host()))
      return bad("the registry \"" + head + "\" is not a host name or address with an optional port");
    start = first + 1;
  }
  while (true) {
    const size_t end = name.find('/', start);
    const std::string component = name.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (component.empty()) return bad("it has an empty path component");
    if (!std::regex_match(component, PathComponent()))
      return bad("the path component \"" + component.substr(0, 64) +
                 "\" must be lower-case letters and digits, joined by single \".\" or \"_\", \"__\" or dashes");
    if (end == std::string::npos) return Status::Ok();
    start = end + 1;
  }
}

}  // namespace slotd
