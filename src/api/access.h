// Who a request acts as, and whether that may use a route (docs/security.md
// "Roles"). Credentials on TCP: a bearer token (token-file's, the agent's
// own api.token, or a named one of tokens-file, each with its role) or,
// over mutual TLS, the client certificate's subject CN that client-roles
// maps to a role. A request with a token is judged by the token alone. The
// unix socket (mode 0600) is the node's own operator: admin.
//
// The decisions are pure functions (Authorize, ParseTokensFile), tested
// from tables; ApiAccess holds the credentials and reads tokens-file again
// on Reload.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "api/http_request.h"
#include "common/mutex.h"
#include "common/status.h"
#include "config/choices.h"

namespace slotd {

// A token the API accepts, and who it makes the caller.
struct NamedToken {
  std::string name;   // in the audit log and in 403s: "token-file", "mgr-1"
  Role role = Role::kViewer;
  std::string token;
};

// Who a request acts as.
struct Caller {
  std::string name;  // the token's name, the certificate's CN, or "unix-socket"
  std::string via;   // "token", "certificate", "unix socket"
  Role role = Role::kAdmin;
};

// Why a request is refused before its route runs: 401 (no credential, or
// one the agent does not know) or 403 (a known caller without the role).
struct Refusal {
  int status = 401;
  std::string code;     // "unauthorized", "forbidden"
  std::string message;  // what is missing, and what to do
  std::string name;     // the caller, for the audit log; "" when unknown
};

// The decision for `caller` on a route that needs `needed` (nullopt: anyone,
// even without credentials, as GET /health). `route` names it in the 403:
// "POST /v1/kernels".
std::optional<Refusal> Authorize(const std::optional<Role>& needed, const Caller& caller, const std::string& route);

// The named tokens of a tokens-file's `text`, one "<name> <role> <token>" a
// line; blank lines and lines starting with '#' are skipped. Refused, with
// the line number and what to write: a line of another shape, a name
// outside [A-Za-z0-9._@-]{1,64}, an unknown role, a token under 16 bytes or
// of bytes other than printable ASCII, a name or token given twice.
Result<std::vector<NamedToken>> ParseTokensFile(const std::string& text, const std::string& path);

class ApiAccess {
 public:
  // `fixed`: tokens that stay as given (token-file's or the agent's own, as
  // admin); `tokens_file`: read at Reload; `client_roles`: certificate CN ->
  // role. Reload must succeed once before the server starts.
  ApiAccess(std::vector<NamedToken> fixed, std::optional<std::string> tokens_file,
            std::map<std::string, Role> client_roles);

  // Reads tokens-file again; on failure the tokens read before stay.
  Status Reload() EXCLUDES(mutex_);
  // How many tokens are accepted now.
  size_t TokenCount() const EXCLUDES(mutex_);

  // Who `request` acts as, or the 401 that refuses it: the unix socket is
  // admin; a bearer token must be known (compared in constant time); with
  // no token, a verified client certificate must be listed in client-roles
  // (a 403 when it is not: the certificate is good, its name has no role).
  std::variant<Caller, Refusal> Authenticate(const http::Request& request) const EXCLUDES(mutex_);

 private:
  const std::vector<NamedToken> fixed_;
  const std::optional<std::string> tokens_file_;
  const std::map<std::string, Role> client_roles_;
  mutable Mutex mutex_;
  std::vector<NamedToken> named_ GUARDED_BY(mutex_);  // from tokens_file_
};

}  // namespace slotd
