#include "agent/registry_credentials.h"

#include <optional>

#include <nlohmann/json.hpp>

#include "common/base64.h"
#include "common/json_reader.h"
#include "common/regular_file.h"
#include "model/image_ref.h"

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
  const std::string shape =
      " (expected {\"auths\": {\"host:port\": {\"auth\": \"<base64 of user:password>\"}}}, as `docker login` "
      "writes it)";
  std::optional<json> parsed = ParseJsonWithin(*text);
  if (!parsed) return Status::InvalidArgument(where + ": not JSON" + shape);
  const JsonReader reader(std::move(*parsed), "the file");
  for (const auto& [name, entry] : reader.Root()["auths"].Members()) {
    Login login;
    if (const JsonField auth = entry.Optional("auth"); auth.raw().is_string() && !auth.String().empty()) {
      std::optional<std::string> decoded = DecodeBase64(auth.String());
      const size_t colon = decoded ? decoded->find(':') : std::string::npos;
      if (colon == std::string::npos) {
        auth.Problem("is not base64 of \"user:password\"; log in again with `docker login`");
        continue;
      }
      login = {decoded->substr(0, colon), decoded->substr(colon + 1)};
    } else {
      const JsonField user = entry.Optional("username");
      const JsonField password = entry.Optional("password");
      if (!user.raw().is_string() || !password.raw().is_string())
        continue;  // a credential helper's entry, or an empty one: nothing to send
      login = {user.String(), password.String()};
    }
    credentials.logins_[RegistryKey(name)] = std::move(login);
  }
  if (!reader.problem().empty()) return Status::InvalidArgument(where + ": " + reader.problem() + shape);
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
