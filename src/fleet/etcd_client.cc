#include "fleet/etcd_client.h"

#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/base64.h"

namespace slotd {

using json = nlohmann::json;

namespace {

constexpr size_t kMaxWatchLine = 16u << 20;  // one watch message; a larger one breaks the watch

// A 64-bit number the gateway writes as a string (or, leniently, a number); 0 when absent or unreadable.
int64_t Int64Of(const json& object, const char* name) {
  if (!object.is_object()) return 0;
  auto it = object.find(name);
  if (it == object.end()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (!it->is_string()) return 0;
  const std::string& text = it->get_ref<const std::string&>();
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  return end != nullptr && *end == '\0' && !text.empty() ? value : 0;
}

// A base64 field as bytes; "" when absent or not base64.
std::string BytesOf(const json& object, const char* name) {
  if (!object.is_object()) return "";
  auto it = object.find(name);
  if (it == object.end() || !it->is_string()) return "";
  return DecodeBase64(it->get_ref<const std::string&>()).value_or("");
}

EtcdKeyValue KeyValueOf(const json& kv) {
  return {BytesOf(kv, "key"), BytesOf(kv, "value"), Int64Of(kv, "lease"), Int64Of(kv, "create_revision"),
          Int64Of(kv, "mod_revision")};
}

// etcd's error answer ({"error": ..., "message": ...}) as text; "" when `answer` is not one.
std::string ErrorOf(const json& answer) {
  if (!answer.is_object()) return "";
  for (const char* field : {"message", "error"}) {
    auto it = answer.find(field);
    if (it != answer.end() && it->is_string() && !it->get_ref<const std::string&>().empty()) return it->get<std::string>();
  }
  return "";
}

bool TokenExpired(const std::string& message) {
  return message.find("invalid auth token") != std::string::npos ||
         message.find("user name is empty") != std::string::npos;
}

}  // namespace

Result<EtcdOptions> EtcdOptionsFor(const EtcdConfig& config) {
  EtcdOptions options;
  options.endpoints = config.endpoints;
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
  for (const std::string& url : options_.endpoints) endpoints_.push_back(HttpClient::Tcp(url));
}

std::string EtcdClient::Describe() const {
  std::string text;
  for (const std::string& url : options_.endpoints) text += (text.empty() ? "" : ", ") + url;
  return text.empty() ? "no etcd endpoint" : text;
}

std::vector<std::string> EtcdClient::AuthHeaders() const {
  std::lock_guard lock(mutex_);
  if (token_.empty()) return {};
  return {"Authorization: " + token_};
}

Status EtcdClient::Authenticate(const HttpClient& endpoint) const {
  const json body = {{"name", options_.user}, {"password", options_.password}};
  auto answer = endpoint.Request("POST", "/v3/auth/authenticate", body.dump(), options_.timeout);
  if (!answer.ok()) return answer.status();
  const json reply = json::parse(answer->body, nullptr, false);
  if (answer->status != 200 || !reply.is_object() || !reply.contains("token") || !reply["token"].is_string()) {
    const std::string why = ErrorOf(reply);
    return Status::FailedPrecondition("etcd at " + endpoint.Describe() + " refused user \"" + options_.user +
                                      "\": " + (why.empty() ? "HTTP " + std::to_string(answer->status) : why) +
                                      " (check [etcd] user and password)");
  }
  std::lock_guard lock(mutex_);
  token_ = reply["token"].get<std::string>();
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
    const std::string why = ErrorOf(json::parse(answer->body, nullptr, false));
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
    std::lock_guard lock(mutex_);
    first = current_;
  }
  Status last;
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    const size_t index = (first + i) % endpoints_.size();
    auto answer = CallOnce(endpoints_[index], path, body);
    if (answer.ok() || (answer.status().code() != Status::Code::kUnavailable &&
                        answer.status().code() != Status::Code::kDeadlineExceeded)) {
      std::lock_guard lock(mutex_);
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
  const json reply = json::parse(*answer, nullptr, false);
  const int64_t id = Int64Of(reply, "ID");
  if (id == 0) return Status::Internal("etcd granted no lease: " + answer->substr(0, 200));
  return id;
}

Result<int64_t> EtcdClient::KeepAlive(int64_t lease) const {
  auto answer = Call("/v3/lease/keepalive", json{{"ID", std::to_string(lease)}}.dump());
  if (!answer.ok()) return answer.status();
  // A stream of one message: {"result": {"ID": ..., "TTL": ...}}; no TTL: the lease is gone.
  const json reply = json::parse(answer->substr(0, answer->find('\n')), nullptr, false);
  if (!reply.is_object() || !reply.contains("result"))
    return Status::Internal("etcd answered a lease keep-alive with: " + answer->substr(0, 200));
  return Int64Of(reply["result"], "TTL");
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
  const json reply = json::parse(*answer, nullptr, false);
  if (!reply.is_object()) return Status::Internal("etcd answered a transaction with: " + answer->substr(0, 200));
  Creation creation;
  creation.created = reply.value("succeeded", false);
  if (creation.created) return creation;
  const json& responses = reply.contains("responses") ? reply["responses"] : json();
  if (responses.is_array() && !responses.empty() && responses[0].contains("response_range")) {
    const json& kvs = responses[0]["response_range"].value("kvs", json::array());
    if (kvs.is_array() && !kvs.empty()) creation.holder = KeyValueOf(kvs[0]);
  }
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
  const json reply = json::parse(*answer, nullptr, false);
  if (!reply.is_object()) return Status::Internal("etcd answered a transaction with: " + answer->substr(0, 200));
  return reply.value("succeeded", false);
}

Result<EtcdClient::Listing> EtcdClient::GetPrefix(const std::string& prefix) const {
  auto answer = Call("/v3/kv/range", json{{"key", Base64(prefix)}, {"range_end", Base64(PrefixRangeEnd(prefix))}}.dump());
  if (!answer.ok()) return answer.status();
  const json reply = json::parse(*answer, nullptr, false);
  if (!reply.is_object()) return Status::Internal("etcd answered a range with: " + answer->substr(0, 200));
  Listing listing;
  listing.revision = reply.contains("header") ? Int64Of(reply["header"], "revision") : 0;
  if (auto kvs = reply.find("kvs"); kvs != reply.end() && kvs->is_array())
    for (const json& kv : *kvs) listing.kvs.push_back(KeyValueOf(kv));
  return listing;
}

Status EtcdClient::WatchPrefix(const std::string& prefix, int64_t start_revision,
                               const std::function<bool(const std::vector<EtcdEvent>&)>& on_events,
                               const std::atomic<bool>& stop) const {
  if (endpoints_.empty()) return Status::InvalidArgument("no etcd endpoint is configured");
  size_t index;
  {
    std::lock_guard lock(mutex_);
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
      const json message = json::parse(pending.substr(0, end), nullptr, false);
      const json& result = message.is_object() && message.contains("result") ? message["result"] : json();
      if (!result.is_object()) {
        broken = Status::Unavailable("etcd ended the watch of " + prefix + ": " + pending.substr(0, std::min<size_t>(end, 200)));
        return false;
      }
      if (result.value("canceled", false)) {
        broken = Status::Unavailable("etcd canceled the watch of " + prefix + ": " +
                                     result.value("cancel_reason", std::string("no reason given")));
        return false;
      }
      std::vector<EtcdEvent> events;
      if (auto list = result.find("events"); list != result.end() && list->is_array())
        for (const json& e : *list)
          events.push_back({e.value("type", std::string("PUT")) == "DELETE",
                            e.contains("kv") ? KeyValueOf(e["kv"]) : EtcdKeyValue{}});
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
