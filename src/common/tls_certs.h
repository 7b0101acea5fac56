// TLS certificates for the agent's API: a certificate authority of one's
// own, the certificates it issues to agents (servers) and to their clients,
// self-signed ones, and what slotctl and the agent read back from a
// certificate. Every key is ECDSA P-256 and every signature SHA-256, made
// with OpenSSL 3 in this process.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace slotd {

// A certificate and its private key, each PEM-encoded.
struct PemPair {
  std::string cert_pem;  // one "-----BEGIN CERTIFICATE-----" block
  std::string key_pem;   // the key, unencrypted PKCS#8 ("-----BEGIN PRIVATE KEY-----")
};

// What a leaf certificate names, what it may be used for and for how long.
struct CertificateRequest {
  // The side of a TLS connection the certificate may prove (extendedKeyUsage).
  enum class Use { kServer, kClient, kServerAndClient };

  std::string common_name;                // the subject's CN: 1 to 64 characters
  std::vector<std::string> dns_names;     // subjectAltName DNS names
  std::vector<std::string> ip_addresses;  // subjectAltName IP addresses, IPv4 or IPv6 text
  Use use = Use::kServer;
  std::chrono::hours valid_for{24 * 825};  // from now; over 0 and at most 100 years
};

// A new certificate authority: a P-256 key and a self-signed certificate
// with CN `common_name`, a random 128-bit serial, valid from 5 minutes ago
// until `valid_for` from now, with basicConstraints CA:TRUE (critical),
// keyUsage keyCertSign and cRLSign (critical) and a subjectKeyIdentifier.
// kInvalidArgument when the name or the validity is out of bounds;
// kInternal, with OpenSSL's reason, when OpenSSL fails.
Result<PemPair> MakeCertificateAuthority(const std::string& common_name, std::chrono::hours valid_for);

// OK when `request` can be a certificate: kInvalidArgument naming the first
// value that cannot (a common name that is empty or too long, a validity out
// of bounds, an empty DNS name or one with a character a host name cannot
// have, an IP address that does not parse). IssueCertificate and
// MakeSelfSigned check the same.
Status CheckCertificateRequest(const CertificateRequest& request);

// A new P-256 key and a certificate for it as `request` says, signed by
// `ca` (from MakeCertificateAuthority): a random 128-bit serial, valid from
// 5 minutes ago (for clocks a little behind) until `valid_for` from now,
// basicConstraints CA:FALSE, keyUsage digitalSignature, extendedKeyUsage
// serverAuth and/or clientAuth, a subjectAltName of every DNS name and IP
// address, and subject and authority key identifiers. kInvalidArgument
// when `ca` does not read, is no certificate authority or its key is not
// its certificate's, or as CheckCertificateRequest says.
Result<PemPair> IssueCertificate(const PemPair& ca, const CertificateRequest& request);

// As IssueCertificate, but the certificate is signed by its own key (its
// issuer is its subject): a certificate that a client trusts by itself or
// by its fingerprint.
Result<PemPair> MakeSelfSigned(const CertificateRequest& request);

// The SHA-256 fingerprint of the first certificate of `cert_pem` (of its DER
// form): 32 uppercase hex pairs joined by ':', as `openssl x509 -noout
// -fingerprint -sha256` prints after "=". kInvalidArgument when `cert_pem`
// holds no PEM certificate.
Result<std::string> CertificateFingerprint(std::string_view cert_pem);

// The subject's common name (CN) of the first certificate of `cert_pem`.
// kInvalidArgument when there is no PEM certificate, or it has no CN.
Result<std::string> CertificateCommonName(std::string_view cert_pem);

// When the first certificate of `cert_pem` expires (its notAfter).
// kInvalidArgument when there is no PEM certificate.
Result<std::chrono::system_clock::time_point> CertificateNotAfter(std::string_view cert_pem);

// Writes `pair`: the key to `key_path` with mode 0600, then the certificate
// to `cert_path` with mode 0644, each whole or not at all
// (WriteFileAtomically). kUnavailable naming the file that failed and what
// to do; when the certificate fails, the status says the key was already
// replaced, so that the two no longer match.
Status WritePemPair(const PemPair& pair, const std::string& cert_path, const std::string& key_path);

}  // namespace slotd
