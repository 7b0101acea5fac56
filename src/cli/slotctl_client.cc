#include "cli/slotctl_client.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <fstream>
#include <iostream>
#include <sstream>

#include "config/defaults.h"
#include "common/tls_certs.h"
#include "common/token_file.h"
#include "resources/agent_config.h"

namespace slotctl {

using nlohmann::json;

namespace {

// The most bytes of an error body quoted in a message when it has no JSON message.
constexpr size_t kMaxQuotedBody = 1000;

// The message of an agent's error answer: its JSON error.message, else the
// start of the body as it is.
std::string ErrorMessage(const std::string& body) {
  std::optional<json> parsed = slotd::ParseJsonWithin(body, kMaxAnswerDepth);
  if (parsed && parsed->is_object()) {
    auto error = parsed->find("error");
    if (error != parsed->end() && error->is_object()) {
      auto message = error->find("message");
      if (message != error->end() && message->is_string()) return message->get<std::string>();
    }
  }
  if (body.empty()) return "no message";
  return body.size() <= kMaxQuotedBody ? body : body.substr(0, kMaxQuotedBody) + "...";
}

// The error code of an agent's error answer (`draining`, `no_room`); "" when it has none.
std::string ErrorCode(const std::string& body) {
  std::optional<json> parsed = slotd::ParseJsonWithin(body, kMaxAnswerDepth);
  if (!parsed || !parsed->is_object()) return "";
  auto error = parsed->find("error");
  if (error == parsed->end() || !error->is_object()) return "";
  auto code = error->find("code");
  return code != error->end() && code->is_string() && code->get_ref<const std::string&>().size() <= 64
             ? code->get<std::string>()
             : "";
}

// The exit status for a Status of HttpClient::Stream, whose HTTP errors are
// coded as StatusForHttpError codes them.
Exit ExitForStreamStatus(const slotd::Status& status) {
  using Code = slotd::Status::Code;
  switch (status.code()) {
    case Code::kOk: return Exit::kOk;
    case Code::kUnavailable: return Exit::kUnreachable;
    case Code::kInvalidArgument: return Exit::kBadRequest;
    case Code::kFailedPrecondition: return Exit::kRefused;
    case Code::kPermissionDenied: return Exit::kRefused;
    case Code::kNotFound: return Exit::kNotFound;
    case Code::kConflict: return Exit::kConflict;
    case Code::kResourceExhausted: return Exit::kNoRoom;
    default: return Exit::kAgentError;
  }
}

// What to do when the agent cannot be reached.
constexpr char kUnreachableAdvice[] =
    "; is slotd running there? Name its agent with --socket PATH, --agent URL or --config FILE";

// Whether the failure `message` of a call that reached no agent already says
// what to change: a failed TLS handshake, or a server of the other scheme
// (slotd::TlsPeerCheck::Explain and HttpClient word them so). The agent
// answered those: kUnreachableAdvice would mislead.
bool SaysWhatToChange(const std::string& message) {
  return message.find("certificate") != std::string::npos || message.find("the server speaks") != std::string::npos;
}

// The failure of a call whose Status carries an HTTP error as
// HttpClient::Stream and Upgrade write it ("...: HTTP 403: {"error": ...}"):
// the agent's own message and the status, when there is one.
Failure FailureOfHttpStatus(const slotd::Status& status) {
  const std::string& text = status.message();
  const size_t http = text.find(": HTTP ");
  const size_t brace = http == std::string::npos ? std::string::npos : text.find('{', http);
  if (brace == std::string::npos) return Failure{ExitForStreamStatus(status), text};
  const std::string code = text.substr(http + 7, text.find(':', http + 7) - http - 7);
  const std::string body = text.substr(brace);
  return Failure{ExitForStreamStatus(status), ErrorMessage(body) + " (HTTP " + code + ")", ErrorCode(body)};
}

constexpr TlsFlagNames kAgentTlsFlags{"--cacert", "--cert", "--key", "--fingerprint"};

// The SHA-256 fingerprint of the certificate that the agent of `config`
// serves on TCP: its tls-cert-file's, or that of the one it made itself
// (tls-self-signed: <var-base-path>/tls/agent.crt). kFailure when it cannot
// be read, saying what to give instead.
Outcome<std::string> ServedCertificateFingerprint(const slotd::Config& config) {
  const std::string path =
      config.agent.tls_cert_file ? *config.agent.tls_cert_file : config.agent.var_base_path + "/tls/agent.crt";
  const std::string instead = "; give --cacert FILE (the CA that signed the agent's certificate) or --fingerprint "
                              "SHA256 (the fingerprint the agent logs)";
  std::ifstream in(path);
  if (!in)
    return Failure{Exit::kFailure, "cannot read " + path + ", the certificate the agent of " + config.path +
                                       " serves: " + slotd::ErrnoText(errno) + instead};
  std::stringstream pem;
  pem << in.rdbuf();
  auto fingerprint = slotd::CertificateFingerprint(pem.str());
  if (!fingerprint.ok()) return Failure{Exit::kFailure, path + ": " + fingerprint.status().message() + instead};
  return *fingerprint;
}

}  // namespace

std::optional<Failure> CheckTlsFlags(const slotd::TlsClientOptions& tls, const TlsFlagNames& names) {
  if (!tls.fingerprint.empty()) {
    if (!slotd::IsSha256Fingerprint(tls.fingerprint))
      return Failure{Exit::kUsage, std::string(names.fingerprint) + " " + tls.fingerprint +
                                       ": expected a SHA-256 fingerprint, 32 hex pairs like AB:CD:... as the agent "
                                       "logs it (or `openssl x509 -noout -fingerprint -sha256` prints it)"};
    if (!tls.ca_file.empty())
      return Failure{Exit::kUsage, std::string(names.fingerprint) + " and " + names.ca +
                                       " go apart: a pinned certificate is trusted by itself, give one of them"};
  }
  if (!tls.key_file.empty() && tls.cert_file.empty())
    return Failure{Exit::kUsage, std::string(names.key) + " needs " + names.cert + ", the certificate it belongs to"};
  for (const auto& [flag, path] : {std::pair<const char*, const std::string&>{names.ca, tls.ca_file},
                                   {names.cert, tls.cert_file}, {names.key, tls.key_file}}) {
    if (!path.empty() && access(path.c_str(), R_OK) != 0)
      return Failure{Exit::kFailure, std::string(flag) + " " + path + ": cannot read it: " + slotd::ErrnoText(errno)};
  }
  return std::nullopt;
}

Exit ExitForHttpStatus(long status) {
  switch (status) {
    case 401:
    case 403: return Exit::kRefused;
    case 404: return Exit::kNotFound;
    case 409: return Exit::kConflict;
    case 422: return Exit::kNoRoom;
    case 503: return Exit::kUnreachable;
    default: return status >= 400 && status < 500 ? Exit::kBadRequest : Exit::kAgentError;
  }
}

std::string ExitStatusHelp() {
  return "Exit status:\n"
         "  0  ok (exec: the command's own exit status)\n"
         "  1  any other failure (a config, token file or claims directory that cannot be read)\n"
         "  2  usage: a wrong command line or option value\n"
         "  3  the agent (or etcd) cannot be reached: no connection, no answer in time, or HTTP 503\n"
         "  4  not found (HTTP 404): no such kernel\n"
         "  5  conflict (HTTP 409): the kernel exists with another request, or its state forbids the call\n"
         "  6  no room (HTTP 422): the resources asked for are not free (run --place: on no agent)\n"
         "  7  refused (HTTP 401, 403): the agent wants a token (--token-file), or another one, or its config\n"
         "     does not allow what was asked (a mount outside [container] mount-allow); etcd refused\n"
         "     the credentials\n"
         "  8  bad request (HTTP 400, 413, 414, 431, other 4xx): the agent refused the request\n"
         "  9  agent error (HTTP 500, 504 exec timeout, other statuses) or an answer slotctl cannot read\n";
}

int Report(const Failure& failure) {
  std::cerr << "slotctl: " << failure.message << "\n";
  return static_cast<int>(failure.exit);
}

Outcome<AgentClient> AgentClient::Connect(const AgentTarget& target) {
  if (auto bad = CheckTlsFlags(target.tls, kAgentTlsFlags)) return *bad;
  std::string token_file = target.token_file;
  slotd::TlsClientOptions tls = target.tls;
  tls.ca_setting = "--cacert";
  tls.cert_setting = "--cert and --key";
  std::optional<slotd::HttpClient> http;
  if (!target.socket_path.empty()) {
    http = slotd::HttpClient::Unix(target.socket_path);
  } else if (!target.agent_url.empty()) {
    http = slotd::HttpClient::Tcp(target.agent_url);
  } else if (!target.config_path.empty()) {
    auto config = slotd::LoadConfig(target.config_path);
    if (!config.ok()) return FailureOf(config.status(), Exit::kFailure);
    const std::string socket = config->agent.ipc_base_path + "/agent.sock";
    if (access(socket.c_str(), R_OK | W_OK) == 0) {
      http = slotd::HttpClient::Unix(socket);
    } else {
      const bool https = config->agent.Tls();
      http = slotd::HttpClient::Tcp((https ? "https://" : "http://") + config->agent.rpc_host + ":" +
                                    std::to_string(config->agent.rpc_port));
      // The agent's own certificate, trusted by its fingerprint: this is its node.
      if (https && tls.ca_file.empty() && tls.fingerprint.empty()) {
        Outcome<std::string> served = ServedCertificateFingerprint(*config);
        if (!served.ok()) return served.failure();
        tls.fingerprint = *served;
      }
      // Its token-file, or else the token the agent made for itself.
      if (token_file.empty())
        token_file = config->agent.token_file ? *config->agent.token_file
                                              : slotd::GeneratedTokenPath(config->agent.var_base_path);
    }
  } else {
    http = slotd::HttpClient::Tcp(slotd::DefaultApiUrl());
  }
  if (!token_file.empty()) {
    auto token = slotd::ReadTokenFile(token_file);
    if (!token.ok()) return FailureOf(token.status(), Exit::kFailure);
    http->SetBearerToken(*token);
  }
  http->SetTls(std::move(tls));
  return AgentClient(std::move(*http));
}

Outcome<std::string> AgentClient::Exchange(const std::string& method, const std::string& path,
                                           const std::string& body, std::chrono::seconds timeout) const {
  std::string answer;
  bool too_long = false;
  auto keep = [&](std::string_view chunk) {
    too_long = answer.size() + chunk.size() > kMaxAnswerBytes;
    if (!too_long) answer.append(chunk);
    return !too_long;  // false stops the transfer
  };
  auto res = http_.RequestStreamed(method, path, body, timeout, keep);
  if (too_long)
    return BadAnswer(method + " " + path, "it is longer than " + std::to_string(kMaxAnswerBytes >> 20) + " MiB");
  if (!res.ok()) {
    const auto code = res.status().code();
    const bool unreachable =
        code == slotd::Status::Code::kUnavailable || code == slotd::Status::Code::kDeadlineExceeded;
    return Failure{unreachable ? Exit::kUnreachable : Exit::kFailure,
                   res.status().message() +
                       (unreachable && !SaysWhatToChange(res.status().message()) ? kUnreachableAdvice : "")};
  }
  if (res->status < 200 || res->status >= 300)
    return Failure{ExitForHttpStatus(res->status),
                   ErrorMessage(res->body) + " (HTTP " + std::to_string(res->status) + ")", ErrorCode(res->body)};
  return answer;
}

Outcome<Answer> AgentClient::Call(const std::string& method, const std::string& path, const json& body,
                                  std::chrono::seconds timeout) const {
  auto text = Exchange(method, path, body.is_null() ? "" : body.dump(), timeout);
  if (!text.ok()) return text.failure();
  std::optional<json> parsed = slotd::ParseJsonWithin(*text, kMaxAnswerDepth);
  if (!parsed)
    return BadAnswer(method + " " + path, "it is not JSON (or nests deeper than " + std::to_string(kMaxAnswerDepth) +
                                              " levels)");
  return Answer(std::move(*parsed), method + " " + path);
}

Outcome<std::string> AgentClient::CallText(const std::string& method, const std::string& path,
                                           std::chrono::seconds timeout) const {
  return Exchange(method, path, "", timeout);
}

std::optional<Failure> AgentClient::Stream(const std::string& path,
                                           const std::function<bool(std::string_view)>& on_chunk,
                                           const std::atomic<bool>* stop,
                                           const std::function<void()>& on_connected) const {
  const std::atomic<bool> never{false};
  slotd::Status s = http_.Stream("GET", path, "", on_connected, on_chunk, stop ? *stop : never, /*end_is_ok=*/true);
  if (s.ok()) return std::nullopt;
  return FailureOfHttpStatus(s);
}

Outcome<slotd::UpgradedConnection> AgentClient::Upgrade(const std::string& path, const json& body) const {
  auto upgraded = http_.Upgrade("POST", path, body.dump(), {}, std::chrono::seconds(60));
  if (!upgraded.ok()) return FailureOfHttpStatus(upgraded.status());
  return std::move(*upgraded);
}

Failure AgentClient::BadAnswer(const std::string& request, const std::string& problem) const {
  return {Exit::kAgentError, "the agent at " + Describe() + " answered " + request +
                                 " with something slotctl cannot read: " + problem +
                                 "; is the agent of another slotd version? (docs/api.md gives the form slotctl reads)"};
}

}  // namespace slotctl
