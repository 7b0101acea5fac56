#include "api/access.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "common/ascii.h"
#include "common/regular_file.h"

namespace slotd {
namespace {

// The largest tokens-file read.
constexpr size_t kMaxTokensFileBytes = 1 << 20;
constexpr size_t kMinTokenBytes = 16;

// Compares in a time that depends only on the length of `expected`, never on
// where the first difference is.
bool ConstantTimeEquals(std::string_view given, std::string_view expected) {
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i)
    diff |= static_cast<unsigned char>(expected[i] ^ (i < given.size() ? given[i] : 0));
  return diff == 0;
}

// The bearer token of `request`'s Authorization header (the scheme in any
// case), nullopt when it has none.
std::optional<std::string_view> BearerToken(const std::string& header) {
  std::string_view value = header;
  constexpr std::string_view kScheme = "bearer";
  if (value.size() <= kScheme.size() || value[kScheme.size()] != ' ') return std::nullopt;
  if (!StartsWithIgnoringAsciiCase(value, kScheme)) return std::nullopt;
  value.remove_prefix(kScheme.size());
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
  return value;
}

bool IsNameByte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '@' || c == '-';
}

const std::string& RoleWord(Role role) { return WordOf(RoleWords(), role); }

}  // namespace

std::optional<Refusal> Authorize(const std::optional<Role>& needed, const Caller& caller, const std::string& route) {
  if (!needed || caller.role >= *needed) return std::nullopt;
  return Refusal{403, "forbidden",
                 "the agent knows this " + caller.via + " as \"" + caller.name + "\" with role " +
                     RoleWord(caller.role) + ", and " + route + " needs role " + RoleWord(*needed) +
                     "; use a credential with that role (docs/security.md lists what each role may do)",
                 caller.name};
}

Result<std::vector<NamedToken>> ParseTokensFile(const std::string& text, const std::string& path) {
  std::vector<NamedToken> tokens;
  std::set<std::string> names;
  std::set<std::string> values;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const std::string where = "tokens file " + path + " line " + std::to_string(number) + ": ";
    std::istringstream words(line);
    std::string name, role_word, token, extra;
    if (!(words >> name) || name.starts_with('#')) continue;
    if (!(words >> role_word >> token) || (words >> extra))
      return Status::InvalidArgument(where + "expected \"<name> <role> <token>\", three words");
    if (name.size() > 64 || !std::all_of(name.begin(), name.end(), IsNameByte))
      return Status::InvalidArgument(where + "the name must be 1 to 64 of A-Z a-z 0-9 . _ @ -");
    const std::optional<Role> role = ChoiceOf(RoleWords(), role_word);
    if (!role)
      return Status::InvalidArgument(where + "\"" + role_word + "\" is no role; write viewer, operator or admin");
    if (token.size() < kMinTokenBytes ||
        !std::all_of(token.begin(), token.end(), [](char c) { return c > 0x20 && c < 0x7f; }))
      return Status::InvalidArgument(where + "the token must be at least " + std::to_string(kMinTokenBytes) +
                                     " printable ASCII bytes; make one with `openssl rand -hex 32`");
    if (!names.insert(name).second) return Status::InvalidArgument(where + "\"" + name + "\" is named twice");
    if (!values.insert(token).second)
      return Status::InvalidArgument(where + "this token is given to another name too; give each its own");
    tokens.push_back({std::move(name), *role, std::move(token)});
  }
  return tokens;
}

ApiAccess::ApiAccess(std::vector<NamedToken> fixed, std::optional<std::string> tokens_file,
                     std::map<std::string, Role> client_roles)
    : fixed_(std::move(fixed)), tokens_file_(std::move(tokens_file)), client_roles_(std::move(client_roles)) {}

Status ApiAccess::Reload() {
  if (!tokens_file_) return Status::Ok();
  Result<std::string> text = ReadRegularFile(*tokens_file_, kMaxTokensFileBytes);
  if (!text.ok())
    return Status::InvalidArgument("agent.tokens-file " + *tokens_file_ + ": " + text.status().message());
  Result<std::vector<NamedToken>> tokens = ParseTokensFile(*text, *tokens_file_);
  if (!tokens.ok()) return tokens.status().WithPrefix("agent.tokens-file");
  MutexLock lock(mutex_);
  named_ = std::move(*tokens);
  return Status::Ok();
}

size_t ApiAccess::TokenCount() const {
  MutexLock lock(mutex_);
  return fixed_.size() + named_.size();
}

std::variant<Caller, Refusal> ApiAccess::Authenticate(const http::Request& request) const {
  if (request.local) return Caller{"unix-socket", "unix socket", Role::kAdmin};
  const std::string header = request.Header("Authorization");
  if (!header.empty()) {
    const std::optional<std::string_view> given = BearerToken(header);
    if (!given)
      return Refusal{401, "unauthorized",
                     "the Authorization header is not \"Bearer <token>\"; send the token that way", ""};
    // Every token is compared, whichever matches: the time says nothing of which.
    const NamedToken* found = nullptr;
    MutexLock lock(mutex_);
    for (const std::vector<NamedToken>* list : {&fixed_, &named_})
      for (const NamedToken& token : *list)
        if (ConstantTimeEquals(*given, token.token) && found == nullptr) found = &token;
    if (found != nullptr) return Caller{found->name, "token", found->role};
    return Refusal{401, "unauthorized",
                   "the bearer token is not one this agent knows; send one from its token-file or tokens-file", ""};
  }
  if (!request.client_certificate.empty()) {
    const auto role = client_roles_.find(request.client_certificate);
    if (role != client_roles_.end()) return Caller{role->first, "certificate", role->second};
    return Refusal{403, "forbidden",
                   "the client certificate names \"" + request.client_certificate +
                       "\", which [agent] client-roles gives no role; add it there with viewer, operator or admin",
                   request.client_certificate};
  }
  return Refusal{401, "unauthorized",
                 client_roles_.empty()
                     ? "no credential: send \"Authorization: Bearer <token>\" with a token from this agent's "
                       "token-file or tokens-file"
                     : "no credential: show a client certificate listed in [agent] client-roles, or send "
                       "\"Authorization: Bearer <token>\"",
                 ""};
}

}  // namespace slotd
