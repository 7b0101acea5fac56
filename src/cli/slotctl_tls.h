// `slotctl tls`: makes the TLS certificates of agents and their clients (a
// certificate authority, agents' server certificates, clients'
// certificates) and prints a certificate's fingerprint. It talks to no agent.
#pragma once

#include <functional>

namespace CLI {
class App;
}

namespace slotctl {

// The `tls` subcommand of slotctl and what runs it.
struct TlsCommand {
  CLI::App* app;             // `tls`, with its subcommands ca, cert and fingerprint
  std::function<int()> run;  // runs the one the command line named; returns slotctl's exit status
};

// Adds `tls` and its subcommands to `app`.
TlsCommand AddTlsCommands(CLI::App& app);

}  // namespace slotctl
