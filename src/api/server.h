// ApiServer: the agent's HTTP API (SPEC.md "HTTP API", docs/api.md), served
// by one http::HttpServer on TCP at rpc-listen-addr (over TLS when given
// one) and on the unix socket <ipc-base-path>/agent.sock (mode 0600). Every
// route declares the role it needs (RouteTable); on TCP a request's
// credential (ApiAccess: a bearer token or a client certificate) is judged
// from its headers, before its body is read, and refused with 401 or 403;
// the unix socket is guarded by its mode and acts as admin. Each request
// that changes something, and each refused one, is a line of the audit log.
// Routes answered from memory (health, agent, kernels, stats, metrics)
// run on the server's quick lane; routes that call the engine or stream
// (create, delete, restart, exec, logs, events) each run on their own thread.
// The stats routes serve the collector's latest snapshot and never wait for
// a sweep; /health does not touch the collector at all.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/kernel_service.h"
#include "agent/event_hub.h"
#include "api/access.h"
#include "api/audit_log.h"
#include "api/http_server.h"
#include "api/server_tls.h"
#include "api/router.h"
#include "common/mutex.h"
#include "fleet/registrar.h"
#include "stats/collector.h"

namespace slotd {

class ApiServer {
 public:
  // Long requests that are not execs served at once (creates, deletes,
  // restarts, logs, event streams, image calls), beside the execs' own bounds.
  static constexpr int kOtherLongRequests = 256;

  // `service`, `hub`, `collector` and `access` must outlive the server.
  // `options`, `max_exec_sessions` and `max_oneshot_execs`: the limits of
  // [api]; the long lane takes both bounds plus kOtherLongRequests.
  ApiServer(KernelService& service, EventHub& hub, const StatsCollector& collector, const ApiAccess& access,
            http::ServerOptions options, int max_exec_sessions, int max_oneshot_execs);
  ~ApiServer();

  // Serves TCP over `tls` (it must outlive the server; its context is taken
  // by each new connection, so a reload needs no call here). Call before Bind.
  void UseTls(const ServerTls* tls) { tls_ = tls; }
  // Writes the audit trail to `audit` (it must outlive the server). Call
  // before Start. Without: nothing is audited.
  void Audit(AuditLog* audit) { audit_ = audit; }
  // Binds both listeners. Port 0 picks a free port (see port()). The unix
  // socket replaces a stale file at `unix_path`. Errors name the address.
  Status Bind(const std::string& host, int port, const std::string& unix_path);
  // The TCP port actually bound.
  int port() const { return port_; }
  // The API's address for other hosts, "host:port": the bound port, and the
  // listen host, or the node name when it listens on every address.
  std::string AdvertisedAddress() const;
  // Shows `registrar`'s state (it must outlive the server) in /health,
  // /v1/agent and /metrics; call before Start. Without: the agent is standalone.
  void ShowRegistration(const Registrar* registrar) { registrar_ = registrar; }
  // Names `engine` (as it answered when the agent started) in /v1/agent;
  // call before Start. Without: the engine is not named.
  void ShowEngine(EngineIdentity engine) { engine_ = std::move(engine); }
  // Serves on background threads until Stop().
  void Start();
  // Stops accepting, ends open streams, waits for the requests in flight.
  void Stop();

  // A route as registered: its method, path pattern ("/v1/kernels/{id}")
  // and the role it needs (nullopt: anyone, without a credential).
  struct RouteName {
    std::string method;
    std::string pattern;
    std::optional<Role> role;
  };
  // Every route the server answers, in the order they are matched: the same
  // table AddRoutes registers, so docs/openapi.yaml can be checked against it.
  static std::vector<RouteName> Routes();

 private:
  // A route with its lane and its handler, which reaches the server through
  // its first argument; `waits_on_engine`: its handler calls the engine, and
  // is not run while the engine is known not to answer (EngineUnreachable).
  struct RouteEntry {
    const char* method;
    const char* pattern;
    std::optional<Role> role;  // what a caller needs; nullopt: anyone
    http::Lane lane;
    void (*handle)(ApiServer&, http::Exchange&, const Router::Params&);
    bool waits_on_engine = false;
  };
  static const std::vector<RouteEntry>& RouteTable();
  // Registers RouteTable() with the router.
  void AddRoutes();
  // How to answer `request` (on TCP its credential already judged, see
  // Refuse): its route's handler, audited when it changes something.
  http::Dispatch Dispatch(const http::Request& request) const;
  // The TCP listener's gate: the 401 or 403 for a request (its headers; the
  // body is not read yet) whose credential does not give its route's role;
  // nullopt lets it go on. An unknown route needs any known credential.
  std::optional<http::Response> Refuse(const http::Request& request) const;
  // Writes `entry`'s line to the audit log, when there is one.
  void Record(const AuditEntry& entry) const;
  // The 503 of a route that waits on the engine while KernelService::EngineKnownDown():
  // at once, rather than after the engine call's timeout.
  http::Response EngineUnreachable() const;
  // The body of GET /v1/kernels/{id}/stats for `kernel`, from `latest`.
  static nlohmann::json KernelStatsJson(const Kernel& kernel, const StatsSnapshot& latest);

  void Health(http::Exchange& ex) const;
  // GET /v1/kernels: every kernel's record.
  void ListKernels(http::Exchange& ex) const;
  // GET /v1/kernels/{id}: its record (KernelService::KernelRecord), or its error.
  void GetKernel(http::Exchange& ex, const std::string& kernel_id) const;
  // The record of `kernel` (200), or its error.
  static void ReplyKernel(http::Exchange& ex, const Result<Kernel>& kernel);
  // GET /v1/kernels/{id}/stats.
  void KernelStats(http::Exchange& ex, const std::string& kernel_id) const;
  // POST /v1/agent/drain (`drain`) and /undrain.
  void SetDraining(http::Exchange& ex, bool drain);
  void DescribeAgent(http::Exchange& ex) const;
  void CreateKernel(http::Exchange& ex);
  void Exec(http::Exchange& ex, const std::string& kernel_id);
  void Logs(http::Exchange& ex, const std::string& kernel_id);
  void Events(http::Exchange& ex);
  // POST /v1/kernels/{id}/exec with Upgrade: tcp: the connection becomes
  // the exec's terminal, relayed until the command ends.
  void ExecInteractive(http::Exchange& ex, const std::string& kernel_id, const std::vector<std::string>& command,
                       const nlohmann::json& body);
  // GET /v1/kernels/{id}/exec/{exec}: whether it runs, and its exit code.
  void ExecState(http::Exchange& ex, const std::string& kernel_id, const std::string& exec_id);
  // POST /v1/kernels/{id}/exec/{exec}/resize {"rows", "cols"}.
  void ResizeExec(http::Exchange& ex, const std::string& kernel_id, const std::string& exec_id);
  // GET /v1/images: the engine's images, with their use.
  void ListImages(http::Exchange& ex);
  // POST /v1/images/pull {"image": ...}: pulls it; progress goes to the events.
  void PullImage(http::Exchange& ex);
  // POST /v1/devices/{id}/drain, /undrain, /clear: `action` is "drain", "undrain" or "clear".
  void ChangeDevice(http::Exchange& ex, const std::string& device, const std::string& action);
  void Metrics(http::Exchange& ex) const;

  // A bound on execs running at once, each holding a place while it runs.
  class ExecPlaces {
   public:
    explicit ExecPlaces(int max) : max_(max) {}
    // Takes a place; false when all `max` are taken. Release gives it back.
    bool Take() EXCLUDES(mutex_);
    void Release() EXCLUDES(mutex_);
    int max() const { return max_; }

   private:
    const int max_;
    Mutex mutex_;
    int taken_ GUARDED_BY(mutex_) = 0;
  };

  KernelService& service_;
  EventHub& hub_;
  const StatsCollector& collector_;
  const ApiAccess& access_;
  const ServerTls* tls_ = nullptr;  // null: plain TCP
  AuditLog* audit_ = nullptr;       // null: nothing audited
  Router router_;
  http::HttpServer server_;
  std::string host_;
  int port_ = 0;
  const Registrar* registrar_ = nullptr;  // null: standalone
  std::optional<EngineIdentity> engine_;  // the engine /v1/agent names
  std::string unix_path_;
  // The longest one write of an interactive exec may wait for its reader ([api] request-timeout).
  const std::chrono::milliseconds write_timeout_;
  ExecPlaces exec_sessions_;  // interactive execs ([api] max-exec-sessions)
  ExecPlaces oneshot_execs_;  // one-shot execs ([api] max-oneshot-execs)
};

}  // namespace slotd
