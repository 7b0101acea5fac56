// EtcdClient: the few calls of etcd's v3 API that agent registration and
// `slotctl cluster` need, through etcd's JSON gateway (POST /v3/...) over
// HTTP or HTTPS (with a client certificate for etcd's --client-cert-auth).
// Keys and values are bytes; the gateway's base64 and its 64-bit
// numbers written as strings stay inside this file.
//
// Several endpoints may be given: a call goes to the one that answered last
// and moves on to the next when it cannot be reached. With a user, the client
// authenticates (/v3/auth/authenticate) before its first call and again when
// etcd says the token expired.
//
// Thread-safety: every call may run from any thread at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/http_client.h"
#include "common/mutex.h"
#include "common/status.h"
#include "config/config.h"

namespace slotd {

struct EtcdOptions {
  std::vector<std::string> endpoints;  // "http://127.0.0.1:2379" or "https://..."; at least one
  std::string user;                    // empty: no authentication
  std::string password;
  std::chrono::milliseconds timeout{2'000};  // per call (not per watch)
  TlsClientOptions tls;                // for https:// endpoints
};

// One key as etcd holds it.
struct EtcdKeyValue {
  std::string key;
  std::string value;
  int64_t lease = 0;            // 0: attached to no lease
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
};

// One change a watch reports.
struct EtcdEvent {
  bool deleted = false;  // false: the key was put
  EtcdKeyValue kv;       // for a delete, only key and mod_revision
};

class EtcdClient {
 public:
  explicit EtcdClient(EtcdOptions options);

  // The endpoints, for messages: "http://a:2379, http://b:2379".
  std::string Describe() const;

  // Grants a lease of `ttl`; returns its id.
  Result<int64_t> GrantLease(std::chrono::seconds ttl) const;
  // Renews `lease` once; returns the seconds it now has to live, 0 when etcd
  // no longer knows it (it expired or was revoked).
  Result<int64_t> KeepAlive(int64_t lease) const;
  // Revokes `lease`, deleting every key attached to it.
  Status RevokeLease(int64_t lease) const;

  // What CreateIfAbsent found.
  struct Creation {
    bool created = false;
    std::optional<EtcdKeyValue> holder;  // when not created: the key as it is
  };
  // Puts `key` = `value` attached to `lease`, in one transaction, only when
  // the key does not exist; otherwise returns the key as it is.
  Result<Creation> CreateIfAbsent(const std::string& key, const std::string& value, int64_t lease) const;
  // Puts `key` = `value` only when the key is attached to `lease`; returns
  // whether it was (false: the key is gone or another lease holds it).
  Result<bool> PutIfHeld(const std::string& key, const std::string& value, int64_t lease) const;

  // Every key that starts with `prefix`, and the store's revision they are from.
  struct Listing {
    std::vector<EtcdKeyValue> kvs;
    int64_t revision = 0;
  };
  Result<Listing> GetPrefix(const std::string& prefix) const;

  // Follows the keys starting with `prefix` from `start_revision` on,
  // handing each batch of changes to `on_events` until it returns false or
  // `stop` becomes true (OK), or the watch breaks (kUnavailable; the caller
  // lists again and watches from the listing's revision + 1).
  Status WatchPrefix(const std::string& prefix, int64_t start_revision,
                     const std::function<bool(const std::vector<EtcdEvent>&)>& on_events,
                     const std::atomic<bool>& stop) const;

 private:
  // POSTs `body` (JSON) to `path` on an endpoint that answers; returns the
  // answer's JSON text. etcd's own errors become a Status with its message.
  Result<std::string> Call(const std::string& path, const std::string& body) const;
  // Call on one endpoint, once.
  Result<std::string> CallOnce(const HttpClient& endpoint, const std::string& path, const std::string& body) const;
  // Gets a token for options_.user (/v3/auth/authenticate) from `endpoint`.
  Status Authenticate(const HttpClient& endpoint) const;
  // The Authorization header of a call: the token when there is one.
  std::vector<std::string> AuthHeaders() const;

  EtcdOptions options_;
  std::vector<HttpClient> endpoints_;  // one per options_.endpoints entry
  mutable Mutex mutex_;
  mutable size_t current_ GUARDED_BY(mutex_) = 0;  // the endpoint that answered last
  mutable std::string token_ GUARDED_BY(mutex_);   // the authentication token, when authenticated
};

// The options of the [etcd] section `config`: its endpoints, its TLS files
// and, with a user, the password (read from password-file when given).
// Errors name the key: a user without a password, a password file that
// cannot be read, a TLS file that cannot be read, a client certificate
// without its key or a key without its certificate.
Result<EtcdOptions> EtcdOptionsFor(const EtcdConfig& config);

// The end of the key range of every key starting with `prefix` (etcd's
// range_end: the prefix with its last byte incremented).
std::string PrefixRangeEnd(const std::string& prefix);

}  // namespace slotd
