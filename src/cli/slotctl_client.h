// slotctl's exit statuses, its errors, and its one client of the agent it
// talks to.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include <nlohmann/json.hpp>

#include "cli/slotctl_answer.h"
#include "common/http_client.h"
#include "common/status.h"

namespace slotctl {

// slotctl's exit statuses, as docs/cli.md and `slotctl --help` list them.
// Scripts test them: never renumber one. (`exec` exits with the command's
// own status when the command ran.)
enum class Exit : int {
  kOk = 0,
  kFailure = 1,      // any other failure: a config, token file or claims directory that cannot be read
  kUsage = 2,        // a wrong command line: CLI11's errors, and values slotctl checks (--interval, --device, ...)
  kUnreachable = 3,  // the agent cannot be reached: no connection, no answer in time, or HTTP 503
  kNotFound = 4,     // HTTP 404: no such kernel
  kConflict = 5,     // HTTP 409: the kernel exists with another request, or its state forbids the call
  kNoRoom = 6,       // HTTP 422: the resources asked for are not free
  kRefused = 7,      // HTTP 401 or 403: the agent wants a token, or another one
  kBadRequest = 8,   // HTTP 400, 413, 414, 431 or any other 4xx: the agent refused the request itself
  kAgentError = 9,   // HTTP 500 or any other status, or an answer slotctl cannot read
};

// The exit status for an agent's answer with HTTP `status` (not 2xx).
Exit ExitForHttpStatus(long status);

// The exit-status table of `slotctl --help`, one line per status.
std::string ExitStatusHelp();

// Why a command failed: what slotctl prints and the status it exits with.
struct Failure {
  Failure(Exit exit, std::string message, std::string code = "")
      : exit(exit), message(std::move(message)), code(std::move(code)) {}

  Exit exit;
  std::string message;
  std::string code;  // the agent's error code of an HTTP error ("draining", "no_room"); "" otherwise
};

// `status` (not OK) as a failure exiting with `exit`.
inline Failure FailureOf(const slotd::Status& status, Exit exit) { return {exit, status.message()}; }

// Prints "slotctl: <message>" on stderr; returns the exit status to exit with.
int Report(const Failure& failure);

// A value of T, or the Failure that explains why there is none.
template <typename T>
class Outcome {
 public:
  Outcome(T value) : value_(std::move(value)) {}        // NOLINT: implicit by design
  Outcome(Failure failure) : value_(std::move(failure)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(value_); }
  const Failure& failure() const { return std::get<Failure>(value_); }
  T& operator*() { return std::get<T>(value_); }
  const T& operator*() const { return std::get<T>(value_); }
  T* operator->() { return &std::get<T>(value_); }
  const T* operator->() const { return &std::get<T>(value_); }

 private:
  std::variant<T, Failure> value_;
};

// The global flags that say which agent to talk to.
struct AgentTarget {
  std::string agent_url;    // --agent
  std::string socket_path;  // --socket
  std::string config_path;  // --config
  std::string token_file;   // --token-file
  slotd::TlsClientOptions tls;  // --cacert, --cert, --key, --fingerprint: for an https agent
};

// The flags that set one server's TLS settings, for messages.
struct TlsFlagNames {
  const char* ca;           // "--cacert"
  const char* cert;         // "--cert"
  const char* key;          // "--key"
  const char* fingerprint;  // "--fingerprint"; nullptr: no such flag
};

// `tls`, as the flags `names` set it, checked: a fingerprint that is one
// (slotd::IsSha256Fingerprint) and not beside a CA, a key only with its
// certificate (kUsage); files this user can read (kFailure). Each failure
// names the flag.
std::optional<Failure> CheckTlsFlags(const slotd::TlsClientOptions& tls, const TlsFlagNames& names);

// The one client of the agent a run talks to, made once from the global flags.
class AgentClient {
 public:
  // --socket, else --agent, else --config (its unix socket when this user
  // can open it, else its rpc-listen-addr with its token-file, over https
  // when the agent serves TLS, its certificate pinned unless --cacert or
  // --fingerprint is given), else slotd::DefaultApiUrl(); with the token of
  // --token-file (ReadTokenFile) when given, and the TLS flags for an https
  // URL. kFailure when the config, the token file or a TLS file cannot be
  // read; kUsage for TLS flags that do not go together.
  static Outcome<AgentClient> Connect(const AgentTarget& target);

  // Sends one request (`body`, unless null, as JSON) and returns the agent's
  // 2xx answer as JSON. A failure exits as ExitForHttpStatus says, with the
  // agent's message and "(HTTP <status>)"; kUnreachable when the agent
  // cannot be reached or does not answer within `timeout`; kAgentError
  // when the answer is not JSON or longer than kMaxAnswerBytes.
  Outcome<Answer> Call(const std::string& method, const std::string& path, const nlohmann::json& body = nullptr,
                       std::chrono::seconds timeout = std::chrono::seconds(120)) const;

  // Like Call, but returns the 2xx answer's body as it is.
  Outcome<std::string> CallText(const std::string& method, const std::string& path,
                                std::chrono::seconds timeout = std::chrono::seconds(120)) const;

  // GETs `path` and hands its 2xx body to `on_chunk` as it arrives, never
  // holding it whole, until the agent ends it, `on_chunk` returns false or
  // `stop` (when given) becomes true; `on_connected` (when given) runs once
  // the agent has accepted the request. A failure exits as for Call.
  std::optional<Failure> Stream(const std::string& path, const std::function<bool(std::string_view)>& on_chunk,
                                const std::atomic<bool>* stop = nullptr,
                                const std::function<void()>& on_connected = nullptr) const;

  // POSTs `body` to `path` asking to turn the connection into a raw stream
  // (an interactive exec) and returns it once the agent agreed (101). A
  // refusal exits as for Call.
  Outcome<slotd::UpgradedConnection> Upgrade(const std::string& path, const nlohmann::json& body) const;

  // The failure for an answer to `request` that slotctl cannot read because of `problem`.
  Failure BadAnswer(const std::string& request, const std::string& problem) const;

  // Where the agent is, for messages ("unix socket /run/x.sock" or the base URL).
  const std::string& Describe() const { return http_.Describe(); }

 private:
  explicit AgentClient(slotd::HttpClient http) : http_(std::move(http)) {}

  // The 2xx body of one exchange, bounded by kMaxAnswerBytes.
  Outcome<std::string> Exchange(const std::string& method, const std::string& path, const std::string& body,
                                std::chrono::seconds timeout) const;

  slotd::HttpClient http_;
};

}  // namespace slotctl
