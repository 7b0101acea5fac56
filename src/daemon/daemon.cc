#include "daemon/daemon.h"

#include <arpa/inet.h>
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>

#include <spdlog/spdlog.h>

#include "agent/agent.h"
#include "agent/watcher.h"
#include "api/server.h"
#include "common/http_client.h"
#include "common/service_notify.h"
#include "common/thread_name.h"
#include "common/tls_certs.h"
#include "common/token_file.h"
#include "common/version.h"
#include "config/config.h"
#include "config/local_checks.h"
#include "daemon/admission.h"
#include "engine/docker/docker_engine.h"
#include "fleet/agent_document.h"
#include "fleet/registrar.h"
#include "node/scratch_limits.h"
#include "resources/agent_config.h"
#include "stats/cgroup_host.h"
#include "stats/collector.h"

namespace slotd {
namespace {

// Process settings a long-running agent needs: memory freed by large
// requests goes back to the system (a fixed mmap threshold, so big buffers
// are mapped and unmapped, and few malloc arenas, so threads do not each
// keep their own freed memory), and the open-file limit is raised to its
// hard maximum, so [api] max-connections is not cut short by it.
void SetUpProcess() {
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  mallopt(M_ARENA_MAX, 2);
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
}

// Blocks the signals the agent waits for, before any thread starts, so that
// only sigwait sees them: the stop signals, and SIGHUP to read the registry
// credentials again. SIGPIPE is ignored. Returns the set to wait for.
sigset_t BlockWaitedSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return signals;
}

// The refusal of `config`'s settings that this host cannot honour (its own
// paths, its scratch); warnings are logged.
Status CheckOnThisHost(const Config& config) {
  std::vector<std::string> problems = LocalProblems(config);
  for (std::string& problem : ScratchProblems(config)) problems.push_back(std::move(problem));
  for (const std::string& warning : LocalWarnings(config)) spdlog::warn("{}", warning);
  if (problems.empty()) return Status::Ok();
  std::string text;
  for (const std::string& problem : problems) text += (text.empty() ? "" : "\n  ") + problem;
  return Status::InvalidArgument(text);
}

// The engine at [container] docker-host, once it answers, and what it is.
struct ConnectedEngine {
  std::unique_ptr<DockerEngine> engine;
  EngineIdentity identity;
};
// Connects to the engine, asking again every 2 s for up to [container]
// engine-wait while it does not answer (logged every 10 s, and given to the
// service manager as the start's STATUS). A stop signal of `signals` while
// waiting ends the wait: the result is then empty, and `*stop_signal` says
// which. The refusal names the engine and what to do.
std::optional<Result<ConnectedEngine>> ConnectEngine(const Config& config, const sigset_t& signals,
                                                     const ServiceNotifier& notifier, int* stop_signal) {
  auto engine = DockerEngine::FromHost(config.container.docker_host);
  if (!engine.ok()) return engine.status().WithPrefix("container.docker-host");
  using Clock = std::chrono::steady_clock;
  const Clock::time_point started = Clock::now();
  const Clock::time_point deadline = started + config.container.engine_wait;
  Clock::time_point logged{};
  const long long wait_seconds = std::chrono::duration_cast<std::chrono::seconds>(config.container.engine_wait).count();
  for (;;) {
    auto identity = (*engine)->Identify();
    if (identity.ok()) {
      spdlog::info("engine {} {} (API {}) at {}", identity->name, identity->version, identity->api_version,
                   config.container.docker_host);
      return ConnectedEngine{std::move(*engine), *identity};
    }
    const Clock::time_point now = Clock::now();
    if (now >= deadline)
      return identity.status().WithPrefix(
          "cannot reach the engine at " + config.container.docker_host +
          (wait_seconds > 0 ? " after waiting " + std::to_string(wait_seconds) + " s (container.engine-wait)" : "") +
          " (start it, or set container.docker-host or DOCKER_HOST)");
    const std::string waiting = "waiting for the engine at " + config.container.docker_host + " (up to " +
                                std::to_string(wait_seconds) + " s, container.engine-wait): " +
                                identity.status().message();
    if (now - logged >= std::chrono::seconds(10)) {
      spdlog::warn("{}", waiting);
      logged = now;
    }
    notifier.Notify(StatusLine(waiting));
    const auto pause = std::min<Clock::duration>(std::chrono::seconds(2), deadline - now);
    const auto pause_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(pause).count();
    const timespec timeout{static_cast<time_t>(pause_ns / 1'000'000'000), static_cast<long>(pause_ns % 1'000'000'000)};
    const int signal_number = sigtimedwait(&signals, nullptr, &timeout);
    if (signal_number > 0 && signal_number != SIGHUP) {
      *stop_signal = signal_number;
      return std::nullopt;
    }
  }
}

// What the engine's info says against the config and the host: the refusal
// of [container] mount-allow entries in or over the engine's data root
// (EngineRootProblems), and a warning for each thing about the host's
// cgroups and the engine's driver that keeps kernels from being measured
// (CgroupLayoutWarnings, EngineCgroupWarnings). An engine whose info cannot
// be read leaves them unchecked, with a warning.
Status CheckEngineInfo(const Config& config, ContainerEngine& engine) {
  const CgroupHost cgroups = DetectCgroupHost();
  for (const std::string& warning : CgroupLayoutWarnings(cgroups)) spdlog::warn("{}", warning);
  Result<EngineInfo> info = engine.Info();
  if (!info.ok()) {
    spdlog::warn("the engine's info could not be read, so neither container.mount-allow against its data root nor "
                 "its cgroup driver against the host's were checked: {}", info.status().message());
    return Status::Ok();
  }
  for (const std::string& warning : EngineCgroupWarnings(cgroups, *info)) spdlog::warn("{}", warning);
  std::string text;
  for (const std::string& problem : EngineRootProblems(config, info->data_root)) text += (text.empty() ? "" : "\n  ") + problem;
  return text.empty() ? Status::Ok() : Status::InvalidArgument(text);
}

// The token the TCP API asks for: [agent] token-file's, or else the agent's
// own, made once under var-base-path. The TCP API never goes without one.
Result<std::string> ApiToken(const Config& config) {
  if (config.agent.token_file) {
    auto read = ReadTokenFile(*config.agent.token_file);
    if (!read.ok()) return read.status().WithPrefix("agent.token-file");
    return read;
  }
  const std::string path = GeneratedTokenPath(config.agent.var_base_path);
  auto made = ReadOrMakeToken(path);
  if (!made.ok()) return made.status().WithPrefix("the agent's own API token (no agent.token-file)");
  spdlog::info("no [agent] token-file: requests on TCP need the token in {} (mode 0600; slotctl --config reads it)",
               path);
  return made;
}

// The device claims of `plugins` (ResourcePlugin::ClaimedDevices), by
// plugin name; plugins without devices are left out.
std::map<std::string, std::vector<std::string>> ClaimedDevices(
    const std::vector<std::unique_ptr<ResourcePlugin>>& plugins) {
  std::map<std::string, std::vector<std::string>> devices;
  for (const auto& plugin : plugins)
    if (!plugin->ClaimedDevices().empty()) devices[plugin->Name()] = plugin->ClaimedDevices();
  return devices;
}

// What the stats loop measures: the agent's running kernels, their
// containers and the devices they hold.
std::vector<StatsTarget> StatsTargetsOf(const Agent& agent) {
  std::vector<StatsTarget> targets;
  for (Agent::RunningKernel& kernel : agent.RunningKernels())
    targets.push_back({std::move(kernel.kernel_id), std::move(kernel.container_id), std::move(kernel.devices),
                       kernel.shared_cpu_millis});
  return targets;
}

// What each measured kernel's cgroup of `snapshot` says of its processes
// killed for lack of memory and of its cores.
std::vector<Agent::KernelCgroupReading> CgroupReadingsOf(const StatsSnapshot& snapshot) {
  std::vector<Agent::KernelCgroupReading> readings;
  for (const auto& [id, k] : snapshot.kernels) {
    if (k.sample.oom_kills > 0 || !k.sample.cpuset_cpus.empty())
      readings.push_back({id, k.container_id, k.sample.oom_kills, k.sample.cpuset_cpus});
  }
  return readings;
}

// How busy each measured kernel of `snapshot` was: its CPU and the busiest
// measured device it holds (the agent's idle windows).
std::vector<Agent::KernelActivity> ActivityOf(const StatsSnapshot& snapshot) {
  std::map<std::pair<std::string, std::string>, double> utilization;  // (plugin, device) -> percent
  for (const DeviceStats& d : snapshot.agent.devices)
    if (d.measured) utilization[{d.plugin, d.device}] = d.utilization_percent;
  std::vector<Agent::KernelActivity> activity;
  for (const auto& [id, k] : snapshot.kernels) {
    if (!k.cpu_percent) continue;  // a first sample says nothing of the last interval
    Agent::KernelActivity a{id, k.container_id, *k.cpu_percent, std::nullopt, k.sampled_at_ms};
    for (const KernelDeviceUse& use : k.devices)
      if (auto it = utilization.find({use.plugin, use.device}); it != utilization.end())
        a.gpu_percent = std::max(a.gpu_percent.value_or(0), it->second);
    activity.push_back(std::move(a));
  }
  return activity;
}

// The agent as its etcd registration shows it, with `address` ("host:port")
// as its API address (https with TLS): ids, drain, each slot's
// capacity/used/free, the devices' health, the users' kernels not yet
// ended, and the WARM kernels.
AgentDocument FleetDocumentOf(const Agent& agent, const Config& config, const std::string& address) {
  AgentDocument doc;
  doc.id = config.agent.id;
  doc.node = config.agent.node;
  doc.address = address;
  doc.scheme = config.agent.Tls() ? "https" : "http";
  doc.version = kSlotdVersion;
  doc.scaling_group = config.agent.scaling_group;
  const Agent::Drain drain = agent.Draining();
  doc.draining = drain.draining;
  doc.drain_deadline = drain.deadline;
  doc.SetResources(agent.DescribeResources());
  doc.kernels = agent.ActiveKernels();
  for (const auto& [pool, count] : agent.CountPools()) doc.warm += count.warm;
  return doc;
}

// While kept, asks `collector` for a sweep whenever the agent announces a
// kernel started (kernel_started, kernel_restarted): its stats, and the
// out-of-memory watch of its cgroup, begin then, not an interval later.
std::unique_ptr<EventHub::Listener> SweepWhenKernelsStart(EventHub& hub, StatsCollector& collector) {
  return hub.Listen([&collector](const Event& event) {
    if (event.type == EventType::kKernelStarted || event.type == EventType::kKernelRestarted) collector.SweepSoon();
  });
}

// Until asked to stop, keeps the warm pools full (WarmKernels::Fill): at
// once, then after any event of the agent's (a warm kernel given, a kernel
// ended or removed) and at least every second. None without [[pool]] entries.
std::jthread KeepPoolsFilled(Agent& agent, EventHub& hub) {
  if (agent.Pools().empty()) return {};
  return std::jthread([&agent, events = hub.Subscribe()](std::stop_token stop) {
    NameThisThread("pool-keeper");
    while (!stop.stop_requested()) {
      agent.owners().warm.Fill(stop);
      while (events->Next(std::chrono::milliseconds(0))) {
      }  // what the round itself caused
      events->Next(std::chrono::seconds(1));
    }
  });
}

// The API's credentials: `token` (token-file's or the agent's own) as
// admin, tokens-file's named tokens, and client-roles. The error when
// tokens-file cannot be read.
Result<std::unique_ptr<ApiAccess>> ApiAccessOf(const Config& config, std::string token) {
  std::vector<NamedToken> fixed = {
      {config.agent.token_file ? "token-file" : "api.token", Role::kAdmin, std::move(token)}};
  auto access = std::make_unique<ApiAccess>(std::move(fixed), config.agent.tokens_file, config.agent.client_roles);
  if (Status s = access->Reload(); !s.ok()) return s;
  return access;
}

// The TCP listener's TLS: tls-cert-file's pair, or with tls-self-signed the
// agent's own under <var-base-path>/tls, made at first start; null without
// TLS. Logs the certificate's fingerprint.
Result<std::unique_ptr<ServerTls>> ServerTlsOf(const Config& config) {
  const AgentConfig& agent = config.agent;
  if (!agent.Tls()) return std::unique_ptr<ServerTls>();
  ServerTlsFiles files{agent.tls_cert_file.value_or(""), agent.tls_key_file.value_or(""), agent.tls_client_ca_file,
                       agent.tls_min_version};
  if (!agent.tls_cert_file) {
    const std::string dir = agent.var_base_path + "/tls";
    files.cert_file = dir + "/agent.crt";
    files.key_file = dir + "/agent.key";
    std::error_code ec;
    if (!std::filesystem::exists(files.cert_file, ec) || !std::filesystem::exists(files.key_file, ec)) {
      if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
        return Status::Unavailable("cannot make " + dir + " for the agent's self-signed certificate: " +
                                   std::strerror(errno));
      CertificateRequest request;
      request.common_name = agent.id;
      request.dns_names = {agent.node, "localhost"};
      request.ip_addresses = {"127.0.0.1", "::1"};
      in6_addr address{};
      if (agent.rpc_host != "0.0.0.0" && agent.rpc_host != "::" && agent.rpc_host != "127.0.0.1" &&
          (::inet_pton(AF_INET, agent.rpc_host.c_str(), &address) == 1 ||
           ::inet_pton(AF_INET6, agent.rpc_host.c_str(), &address) == 1))
        request.ip_addresses.push_back(agent.rpc_host);
      request.use = CertificateRequest::Use::kServer;
      request.valid_for = std::chrono::hours(24 * 3650);
      Result<PemPair> made = MakeSelfSigned(request);
      if (!made.ok()) return made.status().WithPrefix("the agent's self-signed certificate");
      if (Status s = WritePemPair(*made, files.cert_file, files.key_file); !s.ok()) return s;
      spdlog::info("tls-self-signed: made a key and a self-signed certificate for {} in {}", agent.id, dir);
    }
  }
  auto tls = ServerTls::Load(std::move(files));
  if (!tls.ok()) return tls.status();
  spdlog::info("TLS on {}:{}: certificate {} (SHA-256 fingerprint {}), TLS {} and later{}", agent.rpc_host,
               agent.rpc_port, (*tls)->files().cert_file, (*tls)->Fingerprint(),
               WordOf(TlsVersionWords(), agent.tls_min_version),
               (*tls)->AsksClientCertificates() ? ", client certificates required" : "");
  return tls;
}

// Reads again what SIGHUP reloads: the registry credentials, tokens-file,
// and the TLS certificate, key and client CAs. What fails keeps what was
// read before, and says so.
void ReloadOnHangUp(Agent& agent, ApiAccess& access, ServerTls* tls) {
  if (Status s = agent.owners().images.LoadCredentials(); !s.ok())
    spdlog::error("SIGHUP: {}; the credentials read before stay in use", s.message());
  else
    spdlog::info("SIGHUP: read the registry credentials again");
  if (Status s = access.Reload(); !s.ok())
    spdlog::error("SIGHUP: {}; the tokens read before stay in use", s.message());
  else
    spdlog::info("SIGHUP: read the API tokens again ({} accepted)", access.TokenCount());
  if (tls == nullptr) return;
  if (Status s = tls->Reload(); !s.ok())
    spdlog::error("SIGHUP: TLS: {}; the certificate served before stays in use", s.message());
  else
    spdlog::info("SIGHUP: TLS: serving {} (SHA-256 fingerprint {}) to new connections", tls->files().cert_file,
                 tls->Fingerprint());
}

// Until asked to stop, reloads `tls` when one of its files changes
// (checked every 2 s); none without TLS.
std::jthread WatchTlsFiles(ServerTls* tls) {
  if (tls == nullptr) return {};
  return std::jthread([tls](std::stop_token stop) {
    NameThisThread("tls-watch");
    std::mutex mutex;
    std::condition_variable_any wake;
    while (!stop.stop_requested()) {
      {
        std::unique_lock lock(mutex);
        wake.wait_for(lock, stop, std::chrono::seconds(2), [] { return false; });
      }
      if (stop.stop_requested()) return;
      const std::optional<Status> reloaded = tls->ReloadIfChanged();
      if (!reloaded) continue;
      if (reloaded->ok())
        spdlog::info("TLS: a file changed; serving {} (SHA-256 fingerprint {}) to new connections",
                     tls->files().cert_file, tls->Fingerprint());
      else
        spdlog::error("TLS: a file changed and the new pair does not load: {}; the certificate served before "
                      "stays in use", reloaded->message());
    }
  });
}

// While the service manager wants watchdog pings (WatchdogSec=), a thread
// that asks the API for /health on its unix socket every half interval and
// pings only when it answers: an API that stops answering (its I/O thread
// stuck) goes unpinged, and the manager restarts the agent, which adopts
// its kernels. An empty thread when no pings are wanted.
std::jthread PingWatchdog(const ServiceNotifier& notifier, const std::string& socket) {
  const std::optional<std::chrono::microseconds> interval = notifier.watchdog_interval();
  if (!interval) return {};
  const auto period = std::chrono::duration_cast<std::chrono::milliseconds>(*interval / 2);
  const auto timeout = std::max(std::chrono::milliseconds(500), period / 2);
  return std::jthread([&notifier, period, timeout, client = HttpClient::Unix(socket)](std::stop_token stop) {
    NameThisThread("watchdog");
    std::mutex mutex;
    std::condition_variable_any wake;
    while (!stop.stop_requested()) {
      auto answer = client.Request("GET", "/health", "", timeout);
      if (answer.ok())
        notifier.Notify("WATCHDOG=1");
      else
        spdlog::warn("watchdog: the API did not answer /health on its socket ({}); no ping this time",
                     answer.status().message());
      std::unique_lock lock(mutex);
      wake.wait_for(lock, stop, period, [] { return false; });
    }
  });
}

// Waits for a stop signal of `signals`, calling `reload` at each SIGHUP
// meanwhile. Returns the stop signal.
int WaitForStop(const sigset_t& signals, const std::function<void()>& reload) {
  int signal_number = 0;
  while (sigwait(&signals, &signal_number) == 0 && signal_number == SIGHUP) reload();
  return signal_number;
}

// The parts an admitted agent runs, assembled, served until a stop signal,
// and stopped in order. The refusal when one cannot start.
Status Serve(const Config& config, ContainerEngine& engine, const EngineIdentity& identity,
             std::vector<std::unique_ptr<ResourcePlugin>> plugins, Admission& admission, const std::optional<EtcdSeat>& etcd, const sigset_t& signals,
             const ServiceNotifier& notifier) {
  auto token = ApiToken(config);
  if (!token.ok()) return token.status();
  auto access = ApiAccessOf(config, std::move(*token));
  if (!access.ok()) return access.status();
  auto tls = ServerTlsOf(config);
  if (!tls.ok()) return tls.status();
  AuditLog audit(config.agent.var_base_path + "/audit.log", config.agent.audit_log_max_size);
  if (Status s = audit.Open(); !s.ok()) return s;
  EventHub hub;
  Agent agent(config, engine, std::move(plugins), hub);
  if (Status s = agent.owners().images.LoadCredentials(); !s.ok()) return s;
  if (Status s = agent.Restore(std::move(admission.listed)); !s.ok()) return s;
  agent.owners().users.RemoveProbes();

  StatsCollector::Options stats;
  stats.agent_id = config.agent.id;
  stats.stats_type = config.container.stats_type;
  stats.interval = config.container.stats_interval;
  stats.cores = config.resource.allowed_cores;
  stats.memory_share_bytes = config.resource.memory_size;
  stats.unmetered_devices = agent.owners().devices.Unmetered();
  stats.on_sweep = [&agent](const StatsSnapshot& snapshot) {
    agent.owners().lifetimes.NoteActivity(ActivityOf(snapshot));
    agent.owners().health.RecordCgroups(CgroupReadingsOf(snapshot));
  };
  stats.on_out_of_memory = [&agent](const std::string& kernel_id, const std::string& container_id,
                                    uint64_t oom_kills) {
    agent.owners().health.RecordCgroups({{kernel_id, container_id, oom_kills, ""}});
  };
  StatsCollector collector(stats, [&agent] { return StatsTargetsOf(agent); }, engine, agent.owners().devices.Meters());

  http::ServerOptions limits;
  limits.max_connections = config.api.max_connections;
  limits.request_timeout = config.api.request_timeout;
  limits.max_body_bytes = config.api.max_body_size;
  ApiServer api(agent, hub, collector, **access, limits, config.api.max_exec_sessions,
                config.api.max_oneshot_execs);
  api.ShowEngine(identity);
  api.UseTls(tls->get());
  api.Audit(&audit);
  const std::string socket = config.agent.ipc_base_path + "/agent.sock";
  if (Status s = api.Bind(config.agent.rpc_host, config.agent.rpc_port, socket); !s.ok()) return s;
  if (Status s = admission.claims->SetApiPort(api.port()); !s.ok()) return s;
  std::optional<Registrar> registrar;
  if (etcd) {
    const auto ttl = std::chrono::duration_cast<std::chrono::seconds>(config.etcd->lease_ttl);
    registrar.emplace(*etcd->client, Registrar::Options{etcd->key, ttl, etcd->lease_file},
                      [&agent, &config, address = api.AdvertisedAddress()] {
                        return FleetDocumentOf(agent, config, address);
                      });
    if (Status s = registrar->RegisterOnce(); !s.ok()) return s;
    api.ShowRegistration(&*registrar);
  }
  Watcher watcher(agent, engine, std::chrono::seconds(10));
  watcher.Start();
  collector.Start();
  std::unique_ptr<EventHub::Listener> early_sweeps = SweepWhenKernelsStart(hub, collector);
  std::jthread pool_keeper = KeepPoolsFilled(agent, hub);
  api.Start();
  std::jthread tls_watch = WatchTlsFiles(tls->get());
  if (registrar) registrar->Start();
  spdlog::info("slotd ready: agent {} api {}://{}:{} socket {} pid {}", config.agent.id,
               *tls ? "https" : "http", config.agent.rpc_host, api.port(), socket, getpid());
  notifier.Notify("READY=1\n" + StatusLine("serving agent " + config.agent.id + " on " + (*tls ? "https" : "http") +
                                           "://" + config.agent.rpc_host + ":" + std::to_string(api.port()) +
                                           " and " + socket));
  std::jthread watchdog = PingWatchdog(notifier, socket);

  const int stop_signal =
      WaitForStop(signals, [&agent, &access, &tls] { ReloadOnHangUp(agent, **access, tls->get()); });
  spdlog::info("received {}; shutting down (kernels keep running)", strsignal(stop_signal));
  notifier.Notify("STOPPING=1\n" + StatusLine("stopping; kernels keep running"));
  watchdog = {};
  if (registrar) registrar->Stop(/*deregister=*/true);  // first, so that no scheduler picks this agent any more
  tls_watch = {};
  api.Stop();
  pool_keeper = {};
  early_sweeps.reset();
  collector.Stop();
  watcher.Stop();
  agent.owners().health.ApplyDeviceHealth();  // the latest health marks are recorded before the agent goes
  admission.lease->Release();
  return Status::Ok();
}

}  // namespace

int RunDaemon(const std::string& config_path) {
  SetUpProcess();
  const HostFacts host = HostFacts::Detect();
  auto config = LoadConfig(config_path, host);
  if (!config.ok()) {
    std::cerr << "slotd: invalid configuration:\n" << config.status().message() << "\n";
    return 2;
  }
  const ServiceNotifier* status_to = nullptr;  // the service manager, once known
  auto fail = [&status_to](const Status& s) {
    if (status_to != nullptr) status_to->Notify(StatusLine("cannot start: " + s.message()));
    spdlog::critical("cannot start: {}", s.message());
    std::cerr << "slotd: cannot start: " << s.message() << "\n";
    return 1;
  };
  if (Status s = CheckOnThisHost(*config); !s.ok()) return fail(s);
  const sigset_t signals = BlockWaitedSignals();
  const ServiceNotifier notifier = ServiceNotifier::FromEnvironment();
  status_to = &notifier;

  std::optional<EtcdClient> etcd_client;
  std::optional<EtcdSeat> etcd;
  if (config->etcd) {
    auto options = EtcdOptionsFor(*config->etcd);
    if (!options.ok()) return fail(options.status());
    etcd_client.emplace(*options);
    etcd = EtcdSeatOf(*config, *etcd_client);
  }
  int stop_signal = 0;
  std::optional<Result<ConnectedEngine>> connected = ConnectEngine(*config, signals, notifier, &stop_signal);
  if (!connected) {
    spdlog::info("received {} while waiting for the engine; exiting", strsignal(stop_signal));
    return 0;
  }
  Result<ConnectedEngine>& engine = *connected;
  if (!engine.ok()) return fail(engine.status());
  if (Status s = CheckEngineInfo(*config, *engine->engine); !s.ok()) return fail(s);
  auto plugins = MakePlugins(*config, host);
  if (!plugins.ok()) return fail(plugins.status());
  const AgentClaims mine = ClaimsOf(*config, ClaimedDevices(*plugins));
  auto admission = AdmitAgent(*config, *engine->engine, mine, host.memory_bytes, etcd);
  if (!admission.ok()) return fail(admission.status());
  if (Status s = Serve(*config, *engine->engine, engine->identity, std::move(*plugins), *admission, etcd, signals,
                       notifier);
      !s.ok())
    return fail(s);
  return 0;
}

}  // namespace slotd
