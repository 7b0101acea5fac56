#include "agent/registry_auth.h"

#include <nlohmann/json.hpp>

#include "common/base64.h"
#include "common/regular_file.h"
#include "engine/image_ref.h"

namespace slotd {
namespace {

using json = nlohmann::json;

// A credentials file larger than this is not docker login's.
constexpr size_t kMaxFileBytes = 1u << 20;

// "https://host:port/v1/" -> "host:port"; Docker Hub's index names -> "docker.io".
std::string RegistryKey(std::string name) {
  if (const size_t scheme = name.find("://"); scheme != std::string::npos) name.erase(0, scheme + 3);
  if (const size_t slash = name.find('/'); slash != std::string::npos) name.erase(slash);
  if (name == "index.docker.io" || name == "registry-1.docker.io") return "docker.io";
  return name;
}

}  // namespace

Result<RegistryCredentials> RegistryCredentials::Load(const std::string& path) {
  RegistryCredentials credentials;
  if (path.empty()) return credentials;
  const std::string where = "[container] registry-auth-file " + path;
  Result<std::string> text = ReadRegularFile(path, kMaxFileBytes);
  if (!text.ok())
    return Status::InvalidArgument(where + " " + text.status().message() +
                                   "; point it at the config.json that `docker login` writes");
  const json j = json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return Status::InvalidArgument(where + ": not a JSON object; expected {\"auths\": {\"host:port\": {\"auth\": ...}}}");
  const auto auths = j.find("auths");
  if (auths == j.end() || !auths->is_object())
    return Status::InvalidArgument(where + ": has no \"auths\" object; expected {\"auths\": {\"host:port\": {\"auth\": ...}}}");
  for (const auto& [name, entry] : auths->items()) {
    const std::string at = where + ": auths.\"" + name + "\"";
    if (!entry.is_object()) return Status::InvalidArgument(at + " is not an object");
    Login login;
    if (const auto auth = entry.find("auth"); auth != entry.end() && auth->is_string() && !auth->get<std::string>().empty()) {
      std::optional<std::string> decoded = DecodeBase64(auth->get<std::string>());
      const size_t colon = decoded ? decoded->find(':') : std::string::npos;
      if (colon == std::string::npos)
        return Status::InvalidArgument(at + ".auth is not base64 of \"user:password\"; log in again with `docker login`");
      login = {decoded->substr(0, colon), decoded->substr(colon + 1)};
    } else {
      const auto user = entry.find("username");
      const auto password = entry.find("password");
      if (user == entry.end() || !user->is_string() || password == entry.end() || !password->is_string())
        continue;  // a credential helper's entry, or an empty one: nothing to send
      login = {user->get<std::string>(), password->get<std::string>()};
    }
    credentials.logins_[RegistryKey(name)] = std::move(login);
  }
  return credentials;
}

std::string RegistryCredentials::AuthFor(const ImageRef& image) const {
  const std::string& registry = image.registry;
  const auto it = logins_.find(registry);
  if (it == logins_.end()) return "";
  const json auth = {{"username", it->second.username}, {"password", it->second.password}, {"serveraddress", registry}};
  return Base64Url(auth.dump(-1, ' ', false, json::error_handler_t::replace));
}

}  // namespace slotd
