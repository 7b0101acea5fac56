#include "fleet/etcd_client.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <fstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/base64.h"
#include "common/json_reader.h"

namespace slotd {

using json = nlohmann::json;

namespace {

constexpr size_t kMaxWatchLine = 16u << 20;  // one watch message; a larger one breaks the watch

// A 64-bit number the gateway writes as a string (or a number); 0 when absent.
int64_t Int64Of(const JsonField& field) {
  if (!field.raw().is_string()) return field.Int();
  const std::string text = field.String();
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end == nullptr || *end != '\0' || errno == ERANGE) {
    field.Problem("is \"" + text.substr(0, 32) + "\", expected a whole number");
    return 0;
  }
  return value;
}

// A base64 field as bytes; "" when absent.
std::string BytesOf(const JsonField& field) {
  if (field.IsNull()) return "";
  std::optional<std::string> bytes = DecodeBase64(field.String());
  if (!bytes) field.Problem("is not base64");
  return bytes.value_or("");
}

EtcdKeyValue KeyValueOf(const JsonField& kv) {
  return {BytesOf(kv.Optional("key")), BytesOf(kv.Optional("value")), Int64Of(kv.Optional("lease")),
          Int64Of(kv.Optional("create_revision")), Int64Of(kv.Optional("mod_revision"))};
}

// An answer of etcd's as a reader; kInternal quoting `what` and the answer's
// start when it is not a JSON object.
Result<JsonReader> ReadAnswer(std::string_view answer, const std::string& what) {
  std::optional<json> parsed = ParseJsonWithin(answer);
  if (!parsed || !parsed->is_object())
    return Status::Internal("etcd answered " + what + " with: " + std::string(answer.substr(0, 200)));
  return JsonReader(std::move(*parsed), "the answer");
}

// kInternal naming the first problem of an answer to `what`; OK when none.
Status ProblemOf(const JsonReader& reader, const std::string& what) {
  if (reader.problem().empty()) return Status::Ok();
  return Status::Internal("etcd answered " + what + " with a malformed answer: " + reader.problem());
}

// etcd's error answer ({"error": ..., "message": ...}) as text; "" when `answer` is not one.
std::string ErrorOf(std::string_view answer) {
  auto reader = ReadAnswer(answer, "");
  if (!reader.ok()) return "";
  for (const char* field : {"message", "error"}) {
    const json& text = reader->Root().Optional(field).raw();
    if (text.is_string() && !text.get_ref<const std::string&>().empty()) return text.get<std::string>();
  }
  return "";
}

bool TokenExpired(const std::string& message) {
  return message.find("invalid auth token") != std::string::npos ||
         message.find("user name is empty") != std::string::npos;
}

}  // namespace

namespace {

// The TLS files of `config`, each checked to be readable; errors name the key.
Result<TlsClientOptions> EtcdTlsFor(const EtcdConfig& config) {
  if (!config.cert_file.empty() && config.key_file.empty())
    return Status::InvalidArgument("etcd.cert-file: the client certificate needs its private key in etcd.key-file");
  if (config.cert_file.empty() && !config.key_file.empty())
    return Status::InvalidArgument("etcd.key-file: a private key needs its client certificate in etcd.cert-file");
  for (const auto& [key, path] : {std::pair<const char*, const std::string&>{"ca-file", config.ca_file},
                                  {"cert-file", config.cert_file}, {"key-file", config.key_file}}) {
    if (!path.empty() && ::access(path.c_str(), R_OK) != 0)
      return Status::InvalidArgument(std::string("etcd.") + key + ": cannot read " + path + ": " + ErrnoText(errno));
  }
  TlsClientOptions tls;
  tls.ca_file = config.ca_file;
  tls.cert_file = config.cert_file;
  tls.key_file = config.key_file;
  tls.ca_setting = "[etcd] ca-file";
  tls.cert_setting = "[etcd] cert-file and key-file";
  return tls;
}

}  // namespace

Result<EtcdOptions> EtcdOptionsFor(const EtcdConfig& config) {
  EtcdOptions options;
  options.endpoints = config.endpoints;
  auto tls = EtcdTlsFor(config);
  if (!tls.ok()) return tls.status();
  options.tls = std::move(*tls);
  if (config.user.empty()) {
    if (!config.password.empty() || !config.password_file.empty())
      return Status::InvalidArgument("etcd.password: a password needs etcd.user, the user it belongs to");
    return options;
  }
  options.user = config.user;
  if (!config.password.empty() && !config.password_file.empty())
    return Status::InvalidArgument("etcd.password-file: give the password either in etcd.password or in a file, not both");
  if (config.password_file.empty()) {
    if (config.password.empty())
      return Status::InvalidArgument("etcd.user: user " + config.user + " needs etcd.password or etcd.password-file");
    options.password = config.password;
    return options;
  }
  std::ifstream in(config.password_file);
  if (!in || !std::getline(in, options.password) || options.password.empty())
    return Status::InvalidArgument("etcd.password-file: cannot read a password from " + config.password_file +
                                   " (its first line; check that it exists and is readable)");
  return options;
}

std::string PrefixRangeEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    unsigned char last = static_cast<unsigned char>(end.back());
    if (last < 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

EtcdClient::EtcdClient(EtcdOptions options) : options_(std::move(options)) {
  for (const std::string& url : options_.endpoints) {
    endpoints_.push_back(HttpClient::Tcp(url));
    endpoints_.back().SetTls(options_.tls);
  }
}

std::string EtcdClient::Describe() const {
  std::string text;
  for (const std::string& url : options_.endpoints) text += (text.empty() ? "" : ", ") + url;
  return text.empty() ? "no etcd endpoint" : text;
}

std::vector<std::string> EtcdClient::AuthHeaders() const {
  MutexLock lock(mutex_);
  if (token_.empty()) return {};
  return {"Authorization: " + token_};
}

Status EtcdClient::Authenticate(const HttpClient& endpoint) const {
  const json body = {{"name", options_.user}, {"password", options_.password}};
  auto answer = endpoint.Request("POST", "/v3/auth/authenticate", body.dump(), options_.timeout);
  if (!answer.ok()) return answer.status();
  auto reply = ReadAnswer(answer->body, "an authentication");
  const std::string token = reply.ok() ? reply->Root()["token"].String() : "";
  if (answer->status != 200 || token.empty()) {
    const std::string why = ErrorOf(answer->body);
    return Status::FailedPrecondition("etcd at " + endpoint.Describe() + " refused user \"" + options_.user +
                                      "\": " + (why.empty() ? "HTTP " + std::to_string(answer->status) : why) +
                                      " (check [etcd] user and password)");
  }
  MutexLock lock(mutex_);
  token_ = token;
  return Status::Ok();
}

Result<std::string> EtcdClient::CallOnce(const HttpClient& endpoint, const std::string& path,
                                         const std::string& body) const {
  if (!options_.user.empty() && AuthHeaders().empty())
    if (Status s = Authenticate(endpoint); !s.ok()) return s;
  for (int attempt = 0;; ++attempt) {
    auto answer = endpoint.Request("POST", path, body, options_.timeout, AuthHeaders());
    if (!answer.ok()) return answer.status();
    if (answer->status == 200) return std::move(answer->body);
    const std::string why = ErrorOf(answer->body);
    if (attempt == 0 && !options_.user.empty() && TokenExpired(why)) {
      if (Status s = Authenticate(endpoint); !s.ok()) return s;
      continue;
    }
    const std::string message = "etcd at " + endpoint.Describe() + " answered " + path + " with HTTP " +
                                std::to_string(answer->status) + (why.empty() ? "" : ": " + why);
    if (options_.user.empty() && why.find("user name is empty") != std::string::npos)
      return Status::FailedPrecondition("etcd at " + endpoint.Describe() +
                                        " requires authentication: give [etcd] user and password-file (slotctl: "
                                        "--etcd-user and --etcd-password-file)");
    if (answer->status == 401 || answer->status == 403)
      return Status::FailedPrecondition(message + " (check [etcd] user and password)");
    return answer->status >= 500 ? Status::Unavailable(message) : Status::Internal(message);
  }
}

Result<std::string> EtcdClient::Call(const std::string& path, const std::string& body) const {
  if (endpoints_.empty()) return Status::InvalidArgument("no etcd endpoint is configured");
  size_t first;
  {
    MutexLock lock(mutex_);
    first = current_;
  }
  Status last;
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    const size_t index = (first + i) % endpoints_.size();
    auto answer = CallOnce(endpoints_[index], path, body);
    if (answer.ok() || (answer.status().code() != Status::Code::kUnavailable &&
                        answer.status().code() != Status::Code::kDeadlineExceeded)) {
      MutexLock lock(mutex_);
      current_ = index;
      return answer;
    }
    last = answer.status();
  }
  return Status::Unavailable("etcd cannot be reached at " + Describe() + ": " + last.message());
}

Result<int64_t> EtcdClient::GrantLease(std::chrono::seconds ttl) const {
  auto answer = Call("/v3/lease/grant", json{{"TTL", ttl.count()}}.dump());
  if (!answer.ok()) return answer.status();
  auto reply = ReadAnswer(*answer, "a lease grant");
  if (!reply.ok()) return reply.status();
  const int64_t id = Int64Of(reply->Root().Optional("ID"));
  if (Status s = ProblemOf(*reply, "a lease grant"); !s.ok()) return s;
  if (id == 0) return Status::Internal("etcd granted no lease: " + answer->substr(0, 200));
  return id;
}

Result<int64_t> EtcdClient::KeepAlive(int64_t lease) const {
  auto answer = Call("/v3/lease/keepalive", json{{"ID", std::to_string(lease)}}.dump());
  if (!answer.ok()) return answer.status();
  // A stream of one message: {"result": {"ID": ..., "TTL": ...}}; no TTL: the lease is gone.
  auto reply = ReadAnswer(std::string_view(*answer).substr(0, answer->find('\n')), "a lease keep-alive");
  if (!reply.ok()) return reply.status();
  const int64_t ttl = Int64Of(reply->Root()["result"].Optional("TTL"));
  if (Status s = ProblemOf(*reply, "a lease keep-alive"); !s.ok()) return s;
  return ttl;
}

Status EtcdClient::RevokeLease(int64_t lease) const {
  auto answer = Call("/v3/lease/revoke", json{{"ID", std::to_string(lease)}}.dump());
  return answer.ok() ? Status::Ok() : answer.status();
}

Result<EtcdClient::Creation> EtcdClient::CreateIfAbsent(const std::string& key, const std::string& value,
                                                        int64_t lease) const {
  const std::string k = Base64(key);
  const json txn = {
      {"compare", {{{"key", k}, {"target", "CREATE"}, {"result", "EQUAL"}, {"create_revision", "0"}}}},
      {"success", {{{"request_put", {{"key", k}, {"value", Base64(value)}, {"lease", std::to_string(lease)}}}}}},
      {"failure", {{{"request_range", {{"key", k}}}}}}};
  auto answer = Call("/v3/kv/txn", txn.dump());
  if (!answer.ok()) return answer.status();
  auto reply = ReadAnswer(*answer, "a transaction");
  if (!reply.ok()) return reply.status();
  const JsonField root = reply->Root();
  Creation creation;
  creation.created = root.Optional("succeeded").Bool();
  if (!creation.created) {
    // The failure branch's range: the key's holder, unless it was deleted in between.
    const std::vector<JsonField> responses = root.Optional("responses").Elements();
    const std::vector<JsonField> kvs =
        responses.empty() ? std::vector<JsonField>() : responses[0].Optional("response_range").Optional("kvs").Elements();
    if (!kvs.empty()) creation.holder = KeyValueOf(kvs[0]);
  }
  if (Status s = ProblemOf(*reply, "a transaction"); !s.ok()) return s;
  if (creation.created) return creation;
  if (!creation.holder) creation.holder = EtcdKeyValue{key, "", 0, 0, 0};  // deleted in between: held by nobody known
  return creation;
}

Result<bool> EtcdClient::PutIfHeld(const std::string& key, const std::string& value, int64_t lease) const {
  const std::string k = Base64(key);
  const std::string l = std::to_string(lease);
  const json txn = {{"compare", {{{"key", k}, {"target", "LEASE"}, {"result", "EQUAL"}, {"lease", l}}}},
                    {"success", {{{"request_put", {{"key", k}, {"value", Base64(value)}, {"lease", l}}}}}}};
  auto answer = Call("/v3/kv/txn", txn.dump());
  if (!answer.ok()) return answer.status();
  auto reply = ReadAnswer(*answer, "a transaction");
  if (!reply.ok()) return reply.status();
  const bool succeeded = reply->Root().Optional("succeeded").Bool();
  if (Status s = ProblemOf(*reply, "a transaction"); !s.ok()) return s;
  return succeeded;
}

Result<EtcdClient::Listing> EtcdClient::GetPrefix(const std::string& prefix) const {
  auto answer = Call("/v3/kv/range", json{{"key", Base64(prefix)}, {"range_end", Base64(PrefixRangeEnd(prefix))}}.dump());
  if (!answer.ok()) return answer.status();
  auto reply = ReadAnswer(*answer, "a range");
  if (!reply.ok()) return reply.status();
  const JsonField root = reply->Root();
  Listing listing;
  listing.revision = Int64Of(root.Optional("header").Optional("revision"));
  for (const JsonField& kv : root.Optional("kvs").Elements()) listing.kvs.push_back(KeyValueOf(kv));
  if (Status s = ProblemOf(*reply, "a range"); !s.ok()) return s;
  return listing;
}

Status EtcdClient::WatchPrefix(const std::string& prefix, int64_t start_revision,
                               const std::function<bool(const std::vector<EtcdEvent>&)>& on_events,
                               const std::atomic<bool>& stop) const {
  if (endpoints_.empty()) return Status::InvalidArgument("no etcd endpoint is configured");
  size_t index;
  {
    MutexLock lock(mutex_);
    index = current_;
  }
  const HttpClient& endpoint = endpoints_[index];
  if (!options_.user.empty() && AuthHeaders().empty())
    if (Status s = Authenticate(endpoint); !s.ok()) return s;
  const json request = {{"create_request",
                         {{"key", Base64(prefix)},
                          {"range_end", Base64(PrefixRangeEnd(prefix))},
                          {"start_revision", std::to_string(start_revision)}}}};
  std::string pending;  // the start of a message whose end has not come yet
  Status broken;
  auto on_chunk = [&](std::string_view chunk) {
    pending.append(chunk);
    for (size_t end; (end = pending.find('\n')) != std::string::npos; pending.erase(0, end + 1)) {
      auto message = ReadAnswer(std::string_view(pending).substr(0, end), "a watch");
      if (!message.ok() || !message->Root().Optional("result").raw().is_object()) {
        broken = Status::Unavailable("etcd ended the watch of " + prefix + ": " + pending.substr(0, std::min<size_t>(end, 200)));
        return false;
      }
      const JsonField result = message->Root()["result"];
      if (result.Optional("canceled").Bool()) {
        const std::string reason = result.Optional("cancel_reason").String();
        broken = Status::Unavailable("etcd canceled the watch of " + prefix + ": " +
                                     (reason.empty() ? "no reason given" : reason));
        return false;
      }
      std::vector<EtcdEvent> events;
      for (const JsonField& e : result.Optional("events").Elements())
        events.push_back({e.Optional("type").String() == "DELETE", KeyValueOf(e.Optional("kv"))});
      if (Status s = ProblemOf(*message, "a watch"); !s.ok()) {
        broken = Status::Unavailable(s.message() + "; watching again");
        return false;
      }
      if (!events.empty() && !on_events(events)) return false;
    }
    if (pending.size() > kMaxWatchLine) {
      broken = Status::Unavailable("etcd sent a watch message over 16 MiB; watching again");
      return false;
    }
    return true;
  };
  Status s = endpoint.Stream("POST", "/v3/watch", request.dump(), nullptr, on_chunk, stop, false, AuthHeaders());
  if (!broken.ok()) return broken;
  return s.ok() ? s : s.WithPrefix("etcd watch at " + endpoint.Describe());
}

}  // namespace slotd
