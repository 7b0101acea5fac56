// RegistryCredentials: the registry logins of [container] registry-auth-file,
// a file in the format `docker login` writes, matched to each image's
// registry and handed to the engine with its pulls.
//
// Thread-safety: an immutable value; the agent swaps whole sets on SIGHUP.
#pragma once

#include <map>
#include <string>

#include "common/status.h"
#include "model/image_ref.h"

namespace slotd {

class RegistryCredentials {
 public:
  // No credentials: every pull goes without.
  RegistryCredentials() = default;

  // Reads `path`: {"auths": {"<registry>": {"auth": "<base64 of user:password>"}}}
  // (or "username" and "password" instead of "auth"); the registry may be
  // written as "host:port" or as a URL ("https://host:port/v1/"). Entries
  // without credentials (a credential helper's) are skipped. Errors name the
  // file, the entry and what to fix.
  static Result<RegistryCredentials> Load(const std::string& path);

  // The engine's X-Registry-Auth value for pulling `image` (base64url JSON
  // of username, password and serveraddress); "" when there is no entry for
  // its registry.
  std::string AuthFor(const ImageRef& image) const;

  // Whether there is an entry for `registry` ("host:port").
  bool Has(const std::string& registry) const { return logins_.count(registry) > 0; }

 private:
  struct Login {
    std::string username;
    std::string password;
  };
  std::map<std::string, Login> logins_;  // by registry host[:port]
};

}  // namespace slotd
