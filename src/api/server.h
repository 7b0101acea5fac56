// ApiServer: the agent's HTTP API (SPEC.md "HTTP API"), served on TCP at
// rpc-listen-addr and on the unix socket <ipc-base-path>/agent.sock (mode
// 0600). With a token, every TCP request but GET /health needs
// "Authorization: Bearer <token>"; the unix socket is guarded by its mode.
// The stats routes (/v1/stats, /v1/kernels/{id}/stats, /metrics) serve the
// collector's latest snapshot and never wait for a sweep; /health does not
// touch the collector at all.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "agent/agent.h"
#include "agent/event_hub.h"
#include "stats/collector.h"

namespace httplib {
class Server;
}

namespace slotd {

class ApiServer {
 public:
  // `agent`, `hub` and `collector` must outlive the server. `token`: nullopt
  // disables auth.
  ApiServer(Agent& agent, EventHub& hub, const StatsCollector& collector, std::optional<std::string> token);
  ~ApiServer();

  // Binds both listeners. Port 0 picks a free port (see port()). The unix
  // socket replaces a stale file at `unix_path`. Errors name the address.
  Status Bind(const std::string& host, int port, const std::string& unix_path);
  // The TCP port actually bound.
  int port() const { return port_; }
  // Serves on background threads until Stop().
  void Start();
  // Stops accepting, ends open event streams, joins the threads.
  void Stop();

 private:
  void Route(httplib::Server& server, bool check_token);
  // The body of GET /v1/kernels/{id}/stats for `kernel`, from `latest`.
  static nlohmann::json KernelStatsJson(const Kernel& kernel, const StatsSnapshot& latest);

  Agent& agent_;
  EventHub& hub_;
  const StatsCollector& collector_;
  const std::optional<std::string> token_;
  std::string host_;
  int port_ = 0;
  std::string unix_path_;
  std::unique_ptr<httplib::Server> tcp_;
  std::unique_ptr<httplib::Server> unix_;
  std::thread tcp_thread_;
  std::thread unix_thread_;
  std::atomic<bool> stopping_{false};
};

}  // namespace slotd
