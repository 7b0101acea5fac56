#include "common/tls_certs.h"

#include <arpa/inet.h>
#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <climits>
#include <ctime>
#include <initializer_list>
#include <memory>

#include "common/atomic_file.h"

namespace slotd {

namespace {

// Frees an OpenSSL object with `Free`, its own function.
template <auto Free>
struct OpenSslFree {
  template <typename T>
  void operator()(T* object) const {
    Free(object);
  }
};
using CertPtr = std::unique_ptr<X509, OpenSslFree<X509_free>>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, OpenSslFree<EVP_PKEY_free>>;
using MemBioPtr = std::unique_ptr<BIO, OpenSslFree<BIO_free>>;
using NamePtr = std::unique_ptr<X509_NAME, OpenSslFree<X509_NAME_free>>;
using BignumPtr = std::unique_ptr<BIGNUM, OpenSslFree<BN_free>>;
using ExtensionPtr = std::unique_ptr<X509_EXTENSION, OpenSslFree<X509_EXTENSION_free>>;
using GeneralNamePtr = std::unique_ptr<GENERAL_NAME, OpenSslFree<GENERAL_NAME_free>>;
using GeneralNamesPtr = std::unique_ptr<GENERAL_NAMES, OpenSslFree<GENERAL_NAMES_free>>;
using AsnStringPtr = std::unique_ptr<ASN1_STRING, OpenSslFree<ASN1_STRING_free>>;

// Every certificate is valid from this long before it is made, so that a
// peer whose clock is a little behind already accepts it.
constexpr std::chrono::minutes kBackdate{5};
// A CN is at most 64 characters (RFC 5280's ub-common-name), each at most
// 4 bytes of UTF-8; OpenSSL counts the characters.
constexpr size_t kMaxCommonNameBytes = 64 * 4;
// The longest validity a certificate may be given.
constexpr std::chrono::hours kMaxValidity{24 * 365 * 100};

// OpenSSL's reason for the failure just met: the first error of this
// thread's queue ("error:0480006C:PEM routines::no start line"); the queue
// is emptied.
std::string OpenSslReason() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "OpenSSL gave no reason";
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  return text;
}

// kInternal for OpenSSL failing at `step`, which no input of ours explains.
Status OpenSslFailed(const std::string& step) {
  return Status::Internal("OpenSSL failed " + step + " (" + OpenSslReason() +
                          "); a working OpenSSL 3 does not fail so: check this machine's libssl3");
}

// A read-only memory BIO over `text`; null when OpenSSL cannot make one.
MemBioPtr ReadingBio(std::string_view text) {
  if (text.size() > INT_MAX) return nullptr;
  return MemBioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// What `write` put into a fresh memory BIO, or kInternal naming `what`.
template <typename Write>
Result<std::string> WrittenPem(const std::string& what, Write write) {
  MemBioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || write(bio.get()) != 1) return OpenSslFailed("writing " + what + " as PEM");
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

// The first certificate of `pem`.
Result<CertPtr> ReadCertificate(std::string_view pem) {
  ERR_clear_error();
  MemBioPtr bio = ReadingBio(pem);
  CertPtr cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!cert)
    return Status::InvalidArgument(
        "not a PEM certificate: no \"-----BEGIN CERTIFICATE-----\" block OpenSSL can read (" + OpenSslReason() + ")");
  return cert;
}

// A certificate authority's certificate and key.
struct Authority {
  CertPtr cert;
  PkeyPtr key;
};

// `ca` read, and checked to be a CA (basicConstraints CA:TRUE) whose key
// belongs to its certificate.
Result<Authority> ReadAuthority(const PemPair& ca) {
  Result<CertPtr> cert = ReadCertificate(ca.cert_pem);
  if (!cert.ok()) return cert.status().WithPrefix("the CA's certificate");
  MemBioPtr bio = ReadingBio(ca.key_pem);
  // A callback that gives no password: an encrypted key fails rather than
  // prompting on the terminal.
  pem_password_cb* no_password = [](char*, int, int, void*) { return 0; };
  PkeyPtr key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, no_password, nullptr) : nullptr);
  if (!key)
    return Status::InvalidArgument("the CA's key is not an unencrypted PEM private key (" + OpenSslReason() +
                                   "); give the key file written with its certificate");
  if (X509_check_ca(cert->get()) != 1)
    return Status::InvalidArgument("the CA's certificate is no certificate authority (it lacks basicConstraints "
                                   "CA:TRUE); give the certificate of a CA, such as `slotctl tls ca` makes");
  if (X509_check_private_key(cert->get(), key.get()) != 1) {
    ERR_clear_error();
    return Status::InvalidArgument("the CA's key does not belong to the CA's certificate; give the key file "
                                   "written with that certificate");
  }
  return Authority{std::move(*cert), std::move(key)};
}

// OK when `valid_for` is over 0 and at most kMaxValidity.
Status CheckValidity(std::chrono::hours valid_for) {
  if (valid_for.count() > 0 && valid_for <= kMaxValidity) return Status::Ok();
  return Status::InvalidArgument("a validity of " + std::to_string(valid_for.count()) +
                                 " hours is out of bounds; give more than 0 and at most 100 years (" +
                                 std::to_string(kMaxValidity.count()) + " hours)");
}

// A new ECDSA P-256 key.
Result<PkeyPtr> NewKey() {
  PkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!key) return OpenSslFailed("making a P-256 key");
  return key;
}

// The subject name CN=`common_name`; kInvalidArgument when it cannot be one.
Result<NamePtr> SubjectName(const std::string& common_name) {
  ERR_clear_error();
  NamePtr name(X509_NAME_new());
  if (!name) return OpenSslFailed("making a subject name");
  const auto* bytes = reinterpret_cast<const unsigned char*>(common_name.data());
  std::string problem;
  if (common_name.empty())
    problem = "it is empty";
  else if (common_name.size() > kMaxCommonNameBytes)
    problem = "it is " + std::to_string(common_name.size()) + " bytes";
  else if (X509_NAME_add_entry_by_NID(name.get(), NID_commonName, MBSTRING_UTF8, bytes,
                                      static_cast<int>(common_name.size()), -1, 0) != 1)
    problem = OpenSslReason();
  if (!problem.empty())
    return Status::InvalidArgument("the common name \"" + common_name + "\" cannot be a certificate's CN (" + problem +
                                   "); give 1 to 64 characters of UTF-8");
  return name;
}

// A version 3 certificate of the public key `key`, with subject `subject`,
// a random 128-bit serial, and valid from kBackdate ago until `valid_for`
// from now. Its issuer, extensions and signature are left to the caller.
Result<CertPtr> NewCertificate(const X509_NAME* subject, EVP_PKEY* key, std::chrono::hours valid_for) {
  ERR_clear_error();
  CertPtr cert(X509_new());
  if (!cert || X509_set_version(cert.get(), X509_VERSION_3) != 1 || X509_set_subject_name(cert.get(), subject) != 1)
    return OpenSslFailed("making a certificate");
  BignumPtr serial(BN_new());
  if (!serial || BN_rand(serial.get(), 128, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      !BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())))
    return OpenSslFailed("making a random serial number");
  const int days = static_cast<int>(valid_for.count() / 24);
  const long seconds = static_cast<long>(valid_for.count() % 24) * 3600;
  if (!X509_gmtime_adj(X509_getm_notBefore(cert.get()), -std::chrono::seconds(kBackdate).count()) ||
      !X509_time_adj_ex(X509_getm_notAfter(cert.get()), days, seconds, nullptr))
    return OpenSslFailed("setting the validity");
  if (X509_set_pubkey(cert.get(), key) != 1) return OpenSslFailed("setting the public key");
  return cert;
}

// An extension and its value as OpenSSL's configuration files write it:
// {NID_basic_constraints, "critical,CA:TRUE"}.
struct ExtensionText {
  int nid;
  const char* value;
};

// Adds `extensions` to `cert`, in order, as issued by `issuer` (which may
// be `cert` itself).
Status AddExtensions(X509* cert, X509* issuer, std::initializer_list<ExtensionText> extensions) {
  X509V3_CTX context;
  X509V3_set_ctx(&context, issuer, cert, nullptr, nullptr, 0);
  for (const ExtensionText& text : extensions) {
    ExtensionPtr extension(X509V3_EXT_nconf_nid(nullptr, &context, text.nid, text.value));
    if (!extension || X509_add_ext(cert, extension.get(), -1) != 1)
      return OpenSslFailed(std::string("adding the extension ") + OBJ_nid2sn(text.nid) + " = " + text.value);
  }
  return Status::Ok();
}

// Whether `c` may be in a DNS name of a certificate: a letter, a digit,
// '-', '.', '_', or '*' of a wildcard.
bool IsDnsNameCharacter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
         c == '_' || c == '*';
}

// `value` as a general name of `type` (GEN_DNS: an IA5String; GEN_IPADD:
// the address's bytes), or null when OpenSSL cannot make one.
GeneralNamePtr GeneralName(int type, const std::string& value) {
  AsnStringPtr text(ASN1_STRING_type_new(type == GEN_DNS ? V_ASN1_IA5STRING : V_ASN1_OCTET_STRING));
  GeneralNamePtr name(GENERAL_NAME_new());
  if (!text || !name || ASN1_STRING_set(text.get(), value.data(), static_cast<int>(value.size())) != 1) return nullptr;
  GENERAL_NAME_set0_value(name.get(), type, text.release());
  return name;
}

// The subjectAltName entries of `request`: each DNS name, then each IP
// address (as its 4 or 16 bytes). kInvalidArgument naming a value that
// cannot be one.
Result<GeneralNamesPtr> AltNames(const CertificateRequest& request) {
  GeneralNamesPtr names(GENERAL_NAMES_new());
  if (!names) return OpenSslFailed("making a subjectAltName");
  const auto push = [&](int type, const std::string& value) {
    GeneralNamePtr name = GeneralName(type, value);
    if (!name || sk_GENERAL_NAME_push(names.get(), name.get()) == 0) return OpenSslFailed("making a subjectAltName");
    name.release();  // owned by `names` now
    return Status::Ok();
  };
  for (const std::string& dns : request.dns_names) {
    if (dns.empty() || dns.size() > 253)
      return Status::InvalidArgument("the DNS name \"" + dns + "\" is " + std::to_string(dns.size()) +
                                     " characters; give a host name of 1 to 253, such as agent1.example.com");
    for (char c : dns)
      if (!IsDnsNameCharacter(c))
        return Status::InvalidArgument("the DNS name \"" + dns + "\" has a character a host name cannot have ('" +
                                       std::string(1, c) + "'); use letters, digits, '-', '_' and '.' ('*' for a "
                                       "wildcard)");
    if (Status s = push(GEN_DNS, dns); !s.ok()) return s;
  }
  for (const std::string& ip : request.ip_addresses) {
    unsigned char bytes[16];
    size_t size = 4;
    if (inet_pton(AF_INET, ip.c_str(), bytes) != 1) {
      size = 16;
      if (inet_pton(AF_INET6, ip.c_str(), bytes) != 1)
        return Status::InvalidArgument("\"" + ip + "\" is not an IP address; give an IPv4 (192.0.2.7) or IPv6 "
                                       "(2001:db8::7) address, or name the host as a DNS name");
    }
    if (Status s = push(GEN_IPADD, std::string(reinterpret_cast<const char*>(bytes), size)); !s.ok()) return s;
  }
  return names;
}

// The extendedKeyUsage value for `use`.
const char* ExtendedKeyUsage(CertificateRequest::Use use) {
  switch (use) {
    case CertificateRequest::Use::kServer: return "serverAuth";
    case CertificateRequest::Use::kClient: return "clientAuth";
    case CertificateRequest::Use::kServerAndClient: return "serverAuth,clientAuth";
  }
  return "serverAuth";
}

// `cert` signed with `signer` (SHA-256), as PEM, with its key `key`.
Result<PemPair> SignedPair(X509* cert, EVP_PKEY* signer, EVP_PKEY* key) {
  if (X509_sign(cert, signer, EVP_sha256()) <= 0) return OpenSslFailed("signing the certificate");
  Result<std::string> cert_pem = WrittenPem("the certificate", [&](BIO* bio) { return PEM_write_bio_X509(bio, cert); });
  if (!cert_pem.ok()) return cert_pem.status();
  Result<std::string> key_pem = WrittenPem("the key", [&](BIO* bio) {
    return PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
  });
  if (!key_pem.ok()) return key_pem.status();
  return PemPair{std::move(*cert_pem), std::move(*key_pem)};
}

// A leaf certificate for `request` and its new key, signed by `ca`, or by
// its own key when `ca` is null.
Result<PemPair> MakeLeaf(const CertificateRequest& request, const Authority* ca) {
  if (Status s = CheckValidity(request.valid_for); !s.ok()) return s;
  Result<NamePtr> subject = SubjectName(request.common_name);
  if (!subject.ok()) return subject.status();
  Result<GeneralNamesPtr> alt_names = AltNames(request);
  if (!alt_names.ok()) return alt_names.status();
  Result<PkeyPtr> key = NewKey();
  if (!key.ok()) return key.status();
  Result<CertPtr> cert = NewCertificate(subject->get(), key->get(), request.valid_for);
  if (!cert.ok()) return cert.status();
  X509* issuer = ca ? ca->cert.get() : cert->get();
  if (X509_set_issuer_name(cert->get(), X509_get_subject_name(issuer)) != 1)
    return OpenSslFailed("setting the issuer");
  // The subject key identifier before the authority's: a self-signed
  // certificate's authority key identifier is read from it.
  if (Status s = AddExtensions(cert->get(), issuer,
                               {{NID_basic_constraints, "critical,CA:FALSE"},
                                {NID_key_usage, "critical,digitalSignature"},
                                {NID_ext_key_usage, ExtendedKeyUsage(request.use)},
                                {NID_subject_key_identifier, "hash"},
                                {NID_authority_key_identifier, "keyid:always"}});
      !s.ok())
    return s;
  if (sk_GENERAL_NAME_num(alt_names->get()) > 0 &&
      X509_add1_ext_i2d(cert->get(), NID_subject_alt_name, alt_names->get(), 0, X509V3_ADD_DEFAULT) != 1)
    return OpenSslFailed("adding the subjectAltName");
  return SignedPair(cert->get(), ca ? ca->key.get() : key->get(), key->get());
}

}  // namespace

Result<PemPair> MakeCertificateAuthority(const std::string& common_name, std::chrono::hours valid_for) {
  if (Status s = CheckValidity(valid_for); !s.ok()) return s;
  Result<NamePtr> subject = SubjectName(common_name);
  if (!subject.ok()) return subject.status();
  Result<PkeyPtr> key = NewKey();
  if (!key.ok()) return key.status();
  Result<CertPtr> cert = NewCertificate(subject->get(), key->get(), valid_for);
  if (!cert.ok()) return cert.status();
  if (X509_set_issuer_name(cert->get(), X509_get_subject_name(cert->get())) != 1)
    return OpenSslFailed("setting the issuer");
  if (Status s = AddExtensions(cert->get(), cert->get(),
                               {{NID_basic_constraints, "critical,CA:TRUE"},
                                {NID_key_usage, "critical,keyCertSign,cRLSign"},
                                {NID_subject_key_identifier, "hash"}});
      !s.ok())
    return s;
  return SignedPair(cert->get(), key->get(), key->get());
}

Status CheckCertificateRequest(const CertificateRequest& request) {
  if (Status s = CheckValidity(request.valid_for); !s.ok()) return s;
  if (Result<NamePtr> subject = SubjectName(request.common_name); !subject.ok()) return subject.status();
  return AltNames(request).status();
}

Result<PemPair> IssueCertificate(const PemPair& ca, const CertificateRequest& request) {
  Result<Authority> authority = ReadAuthority(ca);
  if (!authority.ok()) return authority.status();
  return MakeLeaf(request, &*authority);
}

Result<PemPair> MakeSelfSigned(const CertificateRequest& request) { return MakeLeaf(request, nullptr); }

Result<std::string> CertificateFingerprint(std::string_view cert_pem) {
  Result<CertPtr> cert = ReadCertificate(cert_pem);
  if (!cert.ok()) return cert.status();
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (X509_digest(cert->get(), EVP_sha256(), digest, &size) != 1) return OpenSslFailed("hashing the certificate");
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string text;
  for (unsigned int i = 0; i < size; ++i) {
    if (i > 0) text += ':';
    text += {kHex[digest[i] >> 4], kHex[digest[i] & 15]};
  }
  return text;
}

Result<std::string> CertificateCommonName(std::string_view cert_pem) {
  Result<CertPtr> cert = ReadCertificate(cert_pem);
  if (!cert.ok()) return cert.status();
  const X509_NAME* subject = X509_get_subject_name(cert->get());
  const int index = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (index < 0) return Status::InvalidArgument("the certificate's subject has no common name (CN)");
  unsigned char* utf8 = nullptr;
  const int size = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, index)));
  if (size < 0)
    return Status::InvalidArgument("the certificate's common name (CN) is not text (" + OpenSslReason() + ")");
  std::string name(reinterpret_cast<const char*>(utf8), static_cast<size_t>(size));
  OPENSSL_free(utf8);
  return name;
}

Result<std::chrono::system_clock::time_point> CertificateNotAfter(std::string_view cert_pem) {
  Result<CertPtr> cert = ReadCertificate(cert_pem);
  if (!cert.ok()) return cert.status();
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert->get()), &tm) != 1)
    return Status::InvalidArgument("the certificate's notAfter is not a time OpenSSL reads (" + OpenSslReason() + ")");
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

Status WritePemPair(const PemPair& pair, const std::string& cert_path, const std::string& key_path) {
  if (Status s = WriteFileAtomically(key_path, pair.key_pem, 0600); !s.ok()) return s;
  if (Status s = WriteFileAtomically(cert_path, pair.cert_pem, 0644); !s.ok())
    return Status::Unavailable(s.message() + "; its key " + key_path +
                               " was written already and no longer matches it: write the pair again");
  return Status::Ok();
}

}  // namespace slotd
