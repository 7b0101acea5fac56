// ServerTls: the TLS settings of the API's TCP listener (docs/security.md
// "Put an agent on a network"): the certificate and key, the client CAs of
// mutual TLS, and the protocol rules, as one OpenSSL context that new
// connections take. Reloading builds a whole new context and swaps it in
// only when it loads; connections keep the context they began with, so a
// reload drops none, and a bad new pair leaves the old one serving.
//
// The rules every context has: TLS 1.2 or 1.3 only (tls-min-version picks
// the oldest), forward-secret AEAD ciphers only, no renegotiation, no
// compression, and ALPN "http/1.1" (a client that offers ALPN without it is
// refused in the handshake).
//
// Thread-safety: every member may be called from any thread at once.
#pragma once

#include <sys/stat.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "config/choices.h"

namespace boost::asio::ssl {
class context;
}

namespace slotd {

// The files and rules of a listener's TLS.
struct ServerTlsFiles {
  std::string cert_file;  // PEM: the certificate, then its chain
  std::string key_file;   // PEM: its private key
  std::optional<std::string> client_ca_file;  // mutual TLS: the CAs that sign clients' certificates
  TlsVersion min_version = TlsVersion::k12;
};

class ServerTls {
 public:
  // Reads `files` into a first context. Errors name the file, the config
  // key and OpenSSL's reason.
  static Result<std::unique_ptr<ServerTls>> Load(ServerTlsFiles files);

  // The context a new connection uses.
  std::shared_ptr<boost::asio::ssl::context> Current() const EXCLUDES(mutex_);
  // The SHA-256 fingerprint of the certificate now served ("AB:CD:...").
  std::string Fingerprint() const EXCLUDES(mutex_);
  // Whether clients must show a certificate from client_ca_file.
  bool AsksClientCertificates() const { return files_.client_ca_file.has_value(); }
  const ServerTlsFiles& files() const { return files_; }

  // Reads the files again: on success new connections get the new context;
  // otherwise the error says why and the old context stays.
  Status Reload() EXCLUDES(mutex_);
  // Reload, but only when a file changed (its inode, size or modification
  // time) since the last reload tried; nullopt when none did. A pair that
  // failed is not tried again until a file changes once more.
  std::optional<Status> ReloadIfChanged() EXCLUDES(mutex_);

 private:
  // What stat says of one file, to notice a change.
  struct Stamp {
    dev_t device = 0;
    ino_t inode = 0;
    off_t size = 0;
    timespec modified{};
    bool operator==(const Stamp& other) const;
  };
  explicit ServerTls(ServerTlsFiles files) : files_(std::move(files)) {}
  std::vector<Stamp> StampFiles() const;

  const ServerTlsFiles files_;
  mutable Mutex mutex_;
  std::shared_ptr<boost::asio::ssl::context> current_ GUARDED_BY(mutex_);
  std::string fingerprint_ GUARDED_BY(mutex_);
  std::vector<Stamp> stamps_ GUARDED_BY(mutex_);  // of the files when a reload last tried
};

// The subject CN of the verified certificate the client of `ssl` showed;
// "" when it showed none. `ssl` is an OpenSSL SSL* after its handshake.
std::string ClientCertificateName(void* ssl);

}  // namespace slotd
