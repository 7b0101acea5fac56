// Fuzz target: the first bytes a client sends to the API's TLS listener.
// Each input is fed to a fresh server-side TLS session of the context the
// listener uses (ServerTls: its versions, ciphers, ALPN choice and client
// certificate rule, with a self-signed certificate made once), through
// memory buffers, and the handshake is stepped until it wants more bytes
// or fails.
// Invariants: no crash, no leak (the sanitizers); no handshake completes
// (no input can hold a client's key exchange for this server's fresh
// key); and a session that failed stays failed when stepped again.
#include <openssl/bio.h>
#include <openssl/ssl.h>

#include <unistd.h>

#include <boost/asio/ssl.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "api/server_tls.h"
#include "common/tls_certs.h"
#include "fuzz_check.h"

namespace {

// The listener's context, with a self-signed pair and mutual TLS on.
slotd::ServerTls& Context() {
  static std::unique_ptr<slotd::ServerTls> tls = [] {
    char dir[] = "/tmp/slotd-tls-fuzz-XXXXXX";
    FUZZ_CHECK(::mkdtemp(dir) != nullptr, std::string("mkdtemp"));
    slotd::CertificateRequest request;
    request.common_name = "fuzz";
    request.ip_addresses = {"127.0.0.1"};
    auto pair = slotd::MakeSelfSigned(request);
    FUZZ_CHECK(pair.ok(), pair.status().message());
    const std::string base = dir;
    FUZZ_CHECK(slotd::WritePemPair(*pair, base + "/c.pem", base + "/k.pem").ok(), std::string("write"));
    auto loaded = slotd::ServerTls::Load({base + "/c.pem", base + "/k.pem", base + "/c.pem", slotd::TlsVersion::k12});
    FUZZ_CHECK(loaded.ok(), loaded.status().message());
    std::filesystem::remove_all(base);
    return std::move(*loaded);
  }();
  return *tls;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::shared_ptr<boost::asio::ssl::context> context = Context().Current();
  SSL* ssl = SSL_new(context->native_handle());
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, in, out);  // ssl owns both
  SSL_set_accept_state(ssl);
  BIO_write(in, data, static_cast<int>(size));
  int result = SSL_do_handshake(ssl);
  FUZZ_CHECK(result != 1, std::string("a handshake completed on ") + std::to_string(size) + " bytes");
  const int error = SSL_get_error(ssl, result);
  if (error != SSL_ERROR_WANT_READ) {
    result = SSL_do_handshake(ssl);
    FUZZ_CHECK(result != 1, std::string("a failed handshake completed when stepped again"));
  }
  SSL_free(ssl);
  return 0;
}
