#include "cli/slotctl_tls.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/slotctl_client.h"
#include "common/regular_file.h"
#include "common/tls_certs.h"
#include "config/config.h"

namespace slotctl {

namespace {

namespace fs = std::filesystem;
using slotd::CertificateRequest;
using slotd::PemPair;
using slotd::Result;
using slotd::Status;

// A PEM file larger than this holds no certificate or key of ours.
constexpr size_t kMaxPemBytes = 1 << 20;
// The longest --days: the 100 years common/tls_certs.h allows.
constexpr int kMaxDays = 36500;

// `slotctl tls ca`.
struct CaArgs {
  std::string dir;
  std::string name = "slotd CA";
  int days = 3650;
};

// `slotctl tls cert`: exactly one of `agent` and `client`.
struct CertArgs {
  std::string ca_dir;
  std::string agent;               // a server certificate for this agent id
  std::string client;              // a client certificate for this name
  std::string role;                // the client's role: viewer, operator or admin
  std::vector<std::string> hosts;  // the agent's DNS names; empty: this host's name and localhost
  std::vector<std::string> ips;    // the agent's IP addresses; empty: 127.0.0.1 and ::1
  int days = 825;
  std::string out_dir;  // empty: ca_dir
};

// Where a CA keeps its certificate and its key.
std::string CaCertPath(const std::string& dir) { return dir + "/ca.crt"; }
std::string CaKeyPath(const std::string& dir) { return dir + "/ca.key"; }

// `path` made absolute and tidied (no trailing '/'), for the lines slotctl prints.
std::string Absolute(const std::string& path) {
  std::error_code ec;
  const fs::path absolute = fs::absolute(path, ec);
  std::string tidy = (ec ? fs::path(path) : absolute).lexically_normal().string();
  while (tidy.size() > 1 && tidy.back() == '/') tidy.pop_back();
  return tidy;
}

// `text` as a TOML basic string: '"' and '\' escaped, control characters as \uXXXX.
std::string TomlString(const std::string& text) {
  std::string quoted = "\"";
  for (char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      quoted += escape;
      continue;
    }
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return quoted + "\"";
}

// `words` joined by ", ".
std::string Join(const std::vector<std::string>& words) {
  std::string joined;
  for (const std::string& word : words) joined += (joined.empty() ? "" : ", ") + word;
  return joined;
}

// Creates `dir` (named by `flag`) and its parents when missing.
std::optional<Failure> MakeDirectory(const std::string& dir, const std::string& flag) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!ec) return std::nullopt;
  return Failure(Exit::kFailure, "cannot create " + flag + " " + dir + ": " + ec.message() +
                                     "; choose a directory this user can write");
}

// The text of the PEM file `path`, which holds `what`; kFailure with
// `remedy` when it cannot be read.
Outcome<std::string> ReadPem(const std::string& path, const std::string& what, const std::string& remedy) {
  Result<std::string> text = slotd::ReadRegularFile(path, kMaxPemBytes);
  if (!text.ok())
    return Failure(Exit::kFailure,
                   "cannot read " + what + " " + path + ": it " + text.status().message() + "; " + remedy);
  return std::move(*text);
}

// The DNS names of an agent's certificate without --host: this machine's
// host name and localhost.
std::vector<std::string> DefaultHosts() {
  char name[256] = {};
  std::vector<std::string> hosts;
  if (gethostname(name, sizeof name - 1) == 0 && name[0] != '\0' && std::string(name) != "localhost")
    hosts.emplace_back(name);
  hosts.emplace_back("localhost");
  return hosts;
}

int RunCa(const CaArgs& args) {
  const std::string dir = Absolute(args.dir);
  for (const std::string& path : {CaKeyPath(dir), CaCertPath(dir)}) {
    std::error_code ec;
    if (fs::exists(fs::symlink_status(path, ec)))
      return Report({Exit::kFailure, path + " exists already, and slotctl tls ca never replaces a CA: the "
                                            "certificates it issued would no longer verify. Remove " +
                                            CaKeyPath(dir) + " and " + CaCertPath(dir) +
                                            " to start over, or choose another --dir"});
  }
  Result<PemPair> ca = slotd::MakeCertificateAuthority(args.name, std::chrono::hours(24 * args.days));
  if (!ca.ok()) {
    const bool bad_name = ca.status().code() == Status::Code::kInvalidArgument;
    return Report(FailureOf(ca.status().WithPrefix("--name"), bad_name ? Exit::kUsage : Exit::kFailure));
  }
  if (std::optional<Failure> failure = MakeDirectory(dir, "--dir")) return Report(*failure);
  if (Status s = slotd::WritePemPair(*ca, CaCertPath(dir), CaKeyPath(dir)); !s.ok())
    return Report(FailureOf(s, Exit::kFailure));
  std::cout << "made the CA " << TomlString(args.name) << ", valid for " << args.days << " days:\n"
            << "  " << CaCertPath(dir) << "  its certificate: agents and clients trust what it signed\n"
            << "  " << CaKeyPath(dir) << "  its key (mode 0600): keep it private, it signs every certificate\n"
            << "next: slotctl tls cert --ca-dir " << dir << " --agent ID, for each agent, and\n"
            << "      slotctl tls cert --ca-dir " << dir << " --client NAME --role ROLE, for each client\n";
  return static_cast<int>(Exit::kOk);
}

// What to put in the agent's agent.toml to serve with the certificate.
void PrintAgentLines(const CertArgs& args, const CertificateRequest& request, const std::string& ca_dir,
                     const std::string& cert_path, const std::string& key_path) {
  std::cout << "wrote the server certificate of agent " << args.agent << " (DNS " << Join(request.dns_names)
            << "; IP " << Join(request.ip_addresses) << "; valid for " << args.days << " days):\n"
            << "  " << cert_path << "\n"
            << "  " << key_path << " (mode 0600)\n"
            << "In agent " << args.agent << "'s agent.toml, under [agent]:\n"
            << "  tls-cert-file = " << TomlString(cert_path) << "\n"
            << "  tls-key-file = " << TomlString(key_path) << "\n"
            << "and, to require clients' certificates of this CA (mutual TLS):\n"
            << "  tls-client-ca-file = " << TomlString(CaCertPath(ca_dir)) << "\n"
            << "Clients check the agent with slotctl --cacert " << CaCertPath(ca_dir) << "\n";
}

// What to put in each agent's agent.toml to let the client in, and how
// slotctl uses the certificate.
void PrintClientLines(const CertArgs& args, const std::string& ca_dir, const std::string& cert_path,
                      const std::string& key_path) {
  std::cout << "wrote the client certificate of " << args.client << " (role " << args.role << "; valid for "
            << args.days << " days):\n"
            << "  " << cert_path << "\n"
            << "  " << key_path << " (mode 0600)\n"
            << "In each agent's agent.toml, under [agent], with tls-client-ca-file = "
            << TomlString(CaCertPath(ca_dir)) << ", add " << args.client << " to client-roles:\n"
            << "  client-roles = { " << TomlString(args.client) << " = " << TomlString(args.role) << " }\n"
            << "Then slotctl talks to an agent as " << args.client << " with:\n"
            << "  slotctl --cacert " << CaCertPath(ca_dir) << " --cert " << cert_path << " --key " << key_path
            << " --agent https://HOST:PORT ...\n";
}

int RunCert(const CertArgs& args) {
  const bool server = !args.agent.empty();
  if (args.agent.empty() == args.client.empty())
    return Report({Exit::kUsage, "slotctl tls cert needs --agent ID (an agent's server certificate) or --client "
                                 "NAME --role ROLE (a client's certificate)"});
  const std::string& name = server ? args.agent : args.client;
  const std::string flag = server ? "--agent" : "--client";
  if (!slotd::IsValidAgentId(name))
    return Report({Exit::kUsage, flag + " \"" + name + "\" cannot name a certificate (its CN and its files' name); "
                                 "use 1 to 64 characters of a-z, 0-9, '.', '_' and '-', starting with a letter or "
                                 "digit"});
  const std::string ca_dir = Absolute(args.ca_dir);
  const std::string out_dir = Absolute(args.out_dir.empty() ? args.ca_dir : args.out_dir);
  if (out_dir == ca_dir && name == "ca")
    return Report({Exit::kUsage, flag + " ca would write over the CA's own files in " + ca_dir +
                                     "; choose another name, or another --out-dir"});

  CertificateRequest request;
  request.common_name = name;
  request.valid_for = std::chrono::hours(24 * args.days);
  request.use = server ? CertificateRequest::Use::kServer : CertificateRequest::Use::kClient;
  if (server) {
    request.dns_names = args.hosts.empty() ? DefaultHosts() : args.hosts;
    request.ip_addresses = args.ips.empty() ? std::vector<std::string>{"127.0.0.1", "::1"} : args.ips;
  }
  if (Status s = slotd::CheckCertificateRequest(request); !s.ok()) return Report(FailureOf(s, Exit::kUsage));

  const std::string remedy =
      "make a CA with slotctl tls ca --dir " + ca_dir + ", or give --ca-dir the directory it was made in";
  Outcome<std::string> ca_cert = ReadPem(CaCertPath(ca_dir), "the CA's certificate", remedy);
  if (!ca_cert.ok()) return Report(ca_cert.failure());
  Outcome<std::string> ca_key = ReadPem(CaKeyPath(ca_dir), "the CA's key", remedy);
  if (!ca_key.ok()) return Report(ca_key.failure());
  Result<PemPair> pair = slotd::IssueCertificate({*ca_cert, *ca_key}, request);
  if (!pair.ok())
    return Report(FailureOf(pair.status().WithPrefix("cannot issue a certificate with the CA in " + ca_dir),
                            Exit::kFailure));
  if (std::optional<Failure> failure = MakeDirectory(out_dir, "--out-dir")) return Report(*failure);
  const std::string cert_path = out_dir + "/" + name + ".crt", key_path = out_dir + "/" + name + ".key";
  if (Status s = slotd::WritePemPair(*pair, cert_path, key_path); !s.ok()) return Report(FailureOf(s, Exit::kFailure));
  if (server)
    PrintAgentLines(args, request, ca_dir, cert_path, key_path);
  else
    PrintClientLines(args, ca_dir, cert_path, key_path);
  return static_cast<int>(Exit::kOk);
}

int RunFingerprint(const std::string& file) {
  Outcome<std::string> pem = ReadPem(file, "the certificate", "give a PEM certificate file this user can read");
  if (!pem.ok()) return Report(pem.failure());
  Result<std::string> fingerprint = slotd::CertificateFingerprint(*pem);
  if (!fingerprint.ok()) return Report(FailureOf(fingerprint.status().WithPrefix(file), Exit::kFailure));
  std::cout << *fingerprint << "\n";
  return static_cast<int>(Exit::kOk);
}

}  // namespace

TlsCommand AddTlsCommands(CLI::App& app) {
  CLI::App* tls = app.add_subcommand(
      "tls", "make TLS certificates: a CA, agents' and clients' certificates; print a certificate's fingerprint");
  tls->require_subcommand(1);
  tls->footer("Keys are ECDSA P-256, signatures SHA-256; a key is written with mode 0600, a certificate 0644. "
              "Nothing is sent to an agent: copy the files to the machines that use them (docs/cli.md, slotctl tls).");

  auto ca = std::make_shared<CaArgs>();
  CLI::App* ca_command =
      tls->add_subcommand("ca", "make a certificate authority: DIR/ca.crt and its key DIR/ca.key; never replaces one");
  ca_command->add_option("--dir", ca->dir, "the directory to write them in (made when missing)")->required();
  ca_command->add_option("--name", ca->name, "the CA's common name (CN)")->capture_default_str();
  ca_command->add_option("--days", ca->days, "how many days it is valid")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxDays));

  auto cert = std::make_shared<CertArgs>();
  CLI::App* cert_command = tls->add_subcommand(
      "cert", "issue a certificate with the CA of --ca-dir: an agent's (--agent ID) or a client's (--client NAME)");
  cert_command->add_option("--ca-dir", cert->ca_dir, "the directory of the CA's ca.crt and ca.key (slotctl tls ca)")
      ->required();
  CLI::Option* agent = cert_command->add_option(
      "--agent", cert->agent, "an agent's server certificate, CN=ID: OUT/ID.crt and OUT/ID.key");
  CLI::Option* client = cert_command->add_option(
      "--client", cert->client, "a client's certificate, CN=NAME (clientAuth): OUT/NAME.crt and OUT/NAME.key");
  CLI::Option* role =
      cert_command->add_option("--role", cert->role, "with --client: the role agents give it in client-roles")
          ->check(CLI::IsMember({"viewer", "operator", "admin"}));
  cert_command->add_option("--host", cert->hosts,
                           "with --agent: a DNS name clients reach the agent by, repeatable (default: this "
                           "machine's host name and localhost)")
      ->allow_extra_args(false)
      ->needs(agent);
  cert_command->add_option("--ip", cert->ips,
                           "with --agent: an IP address clients reach the agent at, repeatable (default: 127.0.0.1 "
                           "and ::1)")
      ->allow_extra_args(false)
      ->needs(agent);
  cert_command->add_option("--days", cert->days, "how many days it is valid")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxDays));
  cert_command->add_option("--out-dir", cert->out_dir, "where to write it (default: --ca-dir; made when missing)");
  agent->excludes(client);
  client->needs(role);
  role->needs(client);
  cert_command->footer("Exactly one of --agent and --client. Prints the lines to add to agent.toml, and for a client "
                       "the slotctl flags that use the certificate.");

  auto file = std::make_shared<std::string>();
  CLI::App* fingerprint_command =
      tls->add_subcommand("fingerprint", "print the SHA-256 fingerprint of a PEM certificate (AB:CD:...)");
  fingerprint_command->add_option("file", *file, "the certificate file")->required();

  return {tls, [ca_command, cert_command, ca, cert, file]() {
            if (ca_command->parsed()) return RunCa(*ca);
            if (cert_command->parsed()) return RunCert(*cert);
            return RunFingerprint(*file);
          }};
}

}  // namespace slotctl
