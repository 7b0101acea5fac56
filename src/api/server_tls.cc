#include "api/server_tls.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cstring>
#include <utility>

#include <boost/asio/ssl.hpp>

#include "common/regular_file.h"
#include "common/tls_certs.h"

namespace slotd {
namespace {

namespace ssl = boost::asio::ssl;

// The most a PEM file of a certificate chain, key or CA bundle may hold.
constexpr size_t kMaxPemBytes = 1 << 20;
// TLS 1.2's ciphers: ECDHE key exchange (forward secret) with an AEAD
// cipher. TLS 1.3's suites are all so, and OpenSSL's default list stays.
constexpr const char* kTls12Ciphers = "ECDHE+AESGCM:ECDHE+CHACHA20";
// ALPN's wire form of the one protocol served: length, then name.
constexpr unsigned char kHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

// Picks "http/1.1" from what the client offers; a client offering others
// only is refused (no_application_protocol).
int SelectAlpn(SSL*, const unsigned char** out, unsigned char* out_len, const unsigned char* offered,
               unsigned int offered_len, void*) {
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, out_len, kHttp11, sizeof kHttp11, offered, offered_len) !=
      OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

// The contents of the PEM file at `path`, named by its config key in errors.
Result<std::string> ReadPem(const std::string& path, const char* key) {
  Result<std::string> text = ReadRegularFile(path, kMaxPemBytes);
  if (!text.ok()) return Status::InvalidArgument(std::string("agent.") + key + " " + path + ": " + text.status().message());
  return text;
}

// A new context from `files`, and the fingerprint of its certificate.
Result<std::pair<std::shared_ptr<ssl::context>, std::string>> BuildContext(const ServerTlsFiles& files) {
  Result<std::string> cert = ReadPem(files.cert_file, "tls-cert-file");
  if (!cert.ok()) return cert.status();
  Result<std::string> key = ReadPem(files.key_file, "tls-key-file");
  if (!key.ok()) return key.status();
  Result<std::string> fingerprint = CertificateFingerprint(*cert);
  if (!fingerprint.ok())
    return Status::InvalidArgument("agent.tls-cert-file " + files.cert_file + ": " + fingerprint.status().message());

  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* native = context->native_handle();
  SSL_CTX_set_min_proto_version(native, files.min_version == TlsVersion::k13 ? TLS1_3_VERSION : TLS1_2_VERSION);
  SSL_CTX_set_options(native, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_cipher_list(native, kTls12Ciphers);
  SSL_CTX_set_alpn_select_cb(native, SelectAlpn, nullptr);
  static constexpr unsigned char kSessionContext[] = "slotd-api";
  SSL_CTX_set_session_id_context(native, kSessionContext, sizeof kSessionContext - 1);

  boost::system::error_code error;
  context->use_certificate_chain(boost::asio::buffer(*cert), error);
  if (error)
    return Status::InvalidArgument("agent.tls-cert-file " + files.cert_file +
                                   ": not a PEM certificate OpenSSL can use: " + error.message());
  context->use_private_key(boost::asio::buffer(*key), ssl::context::pem, error);
  if (error)
    return Status::InvalidArgument("agent.tls-key-file " + files.key_file +
                                   ": not a PEM private key OpenSSL can use: " + error.message());
  if (SSL_CTX_check_private_key(native) != 1)
    return Status::InvalidArgument("agent.tls-key-file " + files.key_file + " is not the key of the certificate in " +
                                   files.cert_file + "; give the pair that belongs together");
  if (files.client_ca_file) {
    Result<std::string> ca = ReadPem(*files.client_ca_file, "tls-client-ca-file");
    if (!ca.ok()) return ca.status();
    context->add_certificate_authority(boost::asio::buffer(*ca), error);
    if (error)
      return Status::InvalidArgument("agent.tls-client-ca-file " + *files.client_ca_file +
                                     ": not PEM CA certificates OpenSSL can use: " + error.message());
    SSL_CTX_set_verify(native, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  return std::make_pair(std::move(context), std::move(*fingerprint));
}

}  // namespace

bool ServerTls::Stamp::operator==(const Stamp& other) const {
  return device == other.device && inode == other.inode && size == other.size &&
         modified.tv_sec == other.modified.tv_sec && modified.tv_nsec == other.modified.tv_nsec;
}

std::vector<ServerTls::Stamp> ServerTls::StampFiles() const {
  std::vector<std::string> paths = {files_.cert_file, files_.key_file};
  if (files_.client_ca_file) paths.push_back(*files_.client_ca_file);
  std::vector<Stamp> stamps;
  for (const std::string& path : paths) {
    struct stat st {};
    Stamp stamp;
    if (::stat(path.c_str(), &st) == 0) stamp = {st.st_dev, st.st_ino, st.st_size, st.st_mtim};
    stamps.push_back(stamp);
  }
  return stamps;
}

Result<std::unique_ptr<ServerTls>> ServerTls::Load(ServerTlsFiles files) {
  std::unique_ptr<ServerTls> tls(new ServerTls(std::move(files)));
  if (Status loaded = tls->Reload(); !loaded.ok()) return loaded;
  return tls;
}

std::shared_ptr<ssl::context> ServerTls::Current() const {
  MutexLock lock(mutex_);
  return current_;
}

std::string ServerTls::Fingerprint() const {
  MutexLock lock(mutex_);
  return fingerprint_;
}

Status ServerTls::Reload() {
  std::vector<Stamp> stamps = StampFiles();  // before reading: a change while reading is seen next time
  auto built = BuildContext(files_);
  MutexLock lock(mutex_);
  stamps_ = std::move(stamps);
  if (!built.ok()) return built.status();
  current_ = std::move(built->first);
  fingerprint_ = std::move(built->second);
  return Status::Ok();
}

std::optional<Status> ServerTls::ReloadIfChanged() {
  {
    MutexLock lock(mutex_);
    if (StampFiles() == stamps_) return std::nullopt;
  }
  return Reload();
}

std::string ClientCertificateName(void* ssl) {
  X509* certificate = SSL_get0_peer_certificate(static_cast<SSL*>(ssl));
  if (certificate == nullptr) return "";
  X509_NAME* subject = X509_get_subject_name(certificate);
  const int at = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (at < 0) return "";
  const ASN1_STRING* value = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at));
  unsigned char* utf8 = nullptr;
  const int length = ASN1_STRING_to_UTF8(&utf8, value);
  if (length < 0) return "";
  std::string name(reinterpret_cast<const char*>(utf8), static_cast<size_t>(length));
  OPENSSL_free(utf8);
  // A name with a NUL or a control byte names no one the config can list.
  for (const char c : name)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return "";
  return name;
}

}  // namespace slotd
