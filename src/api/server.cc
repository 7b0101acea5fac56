#include "api/server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <vector>

#include <httplib.h>
#include <spdlog/spdlog.h>

#include "api/metrics.h"
#include "common/units.h"

namespace slotd {
namespace {

using nlohmann::json;

constexpr char kVersion[] = "0.1.0";

// An httplib::Server that listens on a unix socket. httplib 0.11 binds only
// TCP, but serves whatever listening socket it is given in svr_sock_.
class UnixSocketServer : public httplib::Server {
 public:
  Status BindUnix(const std::string& path) {
    sockaddr_un addr{};
    if (path.size() >= sizeof(addr.sun_path))
      return Status::InvalidArgument("unix socket path " + path + " is longer than " +
                                     std::to_string(sizeof(addr.sun_path) - 1) +
                                     " bytes; choose a shorter ipc-base-path");
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Status::Internal(std::string("socket(AF_UNIX): ") + strerror(errno));
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    ::unlink(path.c_str());  // a stale socket of an earlier run; the agent lock makes this safe
    mode_t old_mask = ::umask(0177);
    int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::umask(old_mask);
    if (rc != 0 || ::chmod(path.c_str(), 0600) != 0 || ::listen(fd, 128) != 0) {
      std::string err = strerror(errno);
      ::close(fd);
      return Status::Unavailable("cannot listen on unix socket " + path + ": " + err);
    }
    svr_sock_ = fd;
    return Status::Ok();
  }
};

int HttpStatus(Status::Code code) {
  switch (code) {
    case Status::Code::kOk: return 200;
    case Status::Code::kInvalidArgument: return 400;
    case Status::Code::kNotFound: return 404;
    case Status::Code::kConflict: return 409;
    case Status::Code::kFailedPrecondition: return 409;
    case Status::Code::kResourceExhausted: return 422;
    case Status::Code::kUnavailable: return 503;
    case Status::Code::kDeadlineExceeded: return 504;
    case Status::Code::kInternal: return 500;
  }
  return 500;
}

void SendJson(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void SendError(httplib::Response& res, const Status& s, int status = 0) {
  SendJson(res, status ? status : HttpStatus(s.code()),
           {{"error", {{"code", Status::CodeName(s.code()) + std::string()}, {"message", s.message()}}}});
}

// Parses a JSON request body; an empty body is an empty object.
Result<json> ParseBody(const httplib::Request& req) {
  if (req.body.empty()) return json::object();
  json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return Status::InvalidArgument("request body: malformed JSON");
  return body;
}

// Every kernel state, each with how many of `kernels` are in it.
std::map<std::string, int> CountByState(const std::vector<Kernel>& kernels) {
  std::map<std::string, int> counts;
  for (KernelState state : {KernelState::kPreparing, KernelState::kRunning, KernelState::kTerminating,
                            KernelState::kTerminated, KernelState::kError})
    counts[KernelStateName(state)] = 0;
  for (const Kernel& kernel : kernels) ++counts[KernelStateName(kernel.state)];
  return counts;
}

}  // namespace

ApiServer::ApiServer(Agent& agent, EventHub& hub, const StatsCollector& collector, std::optional<std::string> token)
    : agent_(agent), hub_(hub), collector_(collector), token_(std::move(token)) {}

json ApiServer::KernelStatsJson(const Kernel& kernel, const StatsSnapshot& latest) {
  const std::string state = KernelStateName(kernel.state);
  // A sample of an earlier container under the same kernel id (deleted and created again) is not this kernel's.
  if (auto it = latest.kernels.find(kernel.id());
      it != latest.kernels.end() && it->second.container_id == kernel.container_id) {
    json body = ToJson(it->second);
    body["state"] = state;
    body["measured"] = true;
    return body;
  }
  std::string reason;
  const std::string interval = FormatDuration(std::chrono::milliseconds(latest.interval_ms));
  if (kernel.state != KernelState::kRunning) {
    reason = "not running: no measures for a " + state + " kernel";
  } else if (latest.collected_at_ms == 0) {
    reason = "no sample yet: the first sweep has not ended; sweeps run every " + interval;
  } else {
    reason = "no sample yet: the latest sweep did not measure it (it started after that sweep, or its sample was "
             "skipped); the next sweep is due within " + interval;
  }
  return {{"kernel_id", kernel.id()}, {"state", state}, {"measured", false}, {"reason", reason}};
}

ApiServer::~ApiServer() { Stop(); }

Status ApiServer::Bind(const std::string& host, int port, const std::string& unix_path) {
  auto make_pool = [] { return new httplib::ThreadPool(32); };
  tcp_ = std::make_unique<httplib::Server>();
  tcp_->new_task_queue = make_pool;
  Route(*tcp_, /*check_token=*/token_.has_value());
  auto unix_server = std::make_unique<UnixSocketServer>();
  unix_server->new_task_queue = make_pool;
  Route(*unix_server, /*check_token=*/false);

  host_ = host;
  if (port == 0) {
    port_ = tcp_->bind_to_any_port(host);
    if (port_ < 0) return Status::Unavailable("cannot listen on " + host + ":0 (rpc-listen-addr)");
  } else {
    if (!tcp_->bind_to_port(host, port))
      return Status::Unavailable("cannot listen on " + host + ":" + std::to_string(port) +
                                 " (rpc-listen-addr): the port is in use or the address is not local; "
                                 "choose another rpc-listen-addr");
    port_ = port;
  }
  if (Status s = unix_server->BindUnix(unix_path); !s.ok()) return s;
  unix_path_ = unix_path;
  unix_ = std::move(unix_server);
  return Status::Ok();
}

void ApiServer::Start() {
  tcp_thread_ = std::thread([this] { tcp_->listen_after_bind(); });
  unix_thread_ = std::thread([this] { unix_->listen_after_bind(); });
}

void ApiServer::Stop() {
  if (stopping_.exchange(true)) return;
  if (tcp_) tcp_->stop();
  if (unix_) unix_->stop();
  if (tcp_thread_.joinable()) tcp_thread_.join();
  if (unix_thread_.joinable()) unix_thread_.join();
  if (!unix_path_.empty()) ::unlink(unix_path_.c_str());
}

void ApiServer::Route(httplib::Server& server, bool check_token) {
  if (check_token) {
    server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (req.method == "GET" && req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
      if (req.get_header_value("Authorization") == "Bearer " + *token_)
        return httplib::Server::HandlerResponse::Unhandled;
      SendJson(res, 401,
               {{"error",
                 {{"code", "unauthorized"},
                  {"message", "missing or wrong bearer token: send \"Authorization: Bearer <token>\" with the "
                              "token from this agent's token-file"}}}});
      res.set_header("WWW-Authenticate", "Bearer");
      return httplib::Server::HandlerResponse::Handled;
    });
  }
  server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (res.status == 404 && res.body.empty())
      SendError(res, Status::NotFound("no route " + req.method + " " + req.path + "; see docs/api.md"));
  });

  server.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    bool reachable = agent_.EngineReachable();
    json body = {{"status", reachable ? "ok" : "engine_unreachable"},
                 {"agent_id", agent_.config().agent.id},
                 {"last_sync_age_s", agent_.LastSyncAgeSeconds()}};
    SendJson(res, reachable ? 200 : 503, body);
  });

  server.Get("/v1/agent", [this](const httplib::Request&, httplib::Response& res) {
    const Config& c = agent_.config();
    SendJson(res, 200,
             {{"id", c.agent.id},
              {"node", c.agent.node},
              {"version", kVersion},
              {"scaling_group", c.agent.scaling_group},
              {"api_address", host_ + ":" + std::to_string(port_)},
              {"ipc_base_path", c.agent.ipc_base_path},
              {"unix_socket", unix_path_},
              {"port_range", {c.container.port_range_start, c.container.port_range_end}},
              {"pid", static_cast<int>(::getpid())},
              {"resources", agent_.DescribeResources()}});
  });

  server.Get("/v1/kernels", [this](const httplib::Request&, httplib::Response& res) {
    json list = json::array();
    for (const auto& kernel : agent_.ListKernels()) list.push_back(kernel.ToJson());
    SendJson(res, 200, {{"kernels", list}});
  });

  server.Post("/v1/kernels", [this](const httplib::Request& req, httplib::Response& res) {
    auto body = ParseBody(req);
    if (!body.ok()) return SendError(res, body.status());
    auto request = ParseCreateRequest(*body);
    if (!request.ok()) return SendError(res, request.status());
    auto outcome = agent_.CreateKernel(*request);
    if (!outcome.ok()) {
      // An unknown image is a bad field of the request, not a missing route or kernel.
      bool bad_image = outcome.status().code() == Status::Code::kNotFound;
      return SendError(res, outcome.status(), bad_image ? 400 : 0);
    }
    SendJson(res, outcome->created ? 201 : 200, outcome->kernel.ToJson());
  });

  server.Get(R"(/v1/kernels/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    auto kernel = agent_.GetKernel(req.matches[1]);
    if (!kernel.ok()) return SendError(res, kernel.status());
    SendJson(res, 200, kernel->ToJson());
  });

  server.Delete(R"(/v1/kernels/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    auto kernel = agent_.DeleteKernel(req.matches[1]);
    if (!kernel.ok()) return SendError(res, kernel.status());
    SendJson(res, 200, kernel->ToJson());
  });

  server.Post(R"(/v1/kernels/([^/]+)/restart)", [this](const httplib::Request& req, httplib::Response& res) {
    auto kernel = agent_.RestartKernel(req.matches[1]);
    if (!kernel.ok()) return SendError(res, kernel.status());
    SendJson(res, 200, kernel->ToJson());
  });

  server.Post(R"(/v1/kernels/([^/]+)/exec)", [this](const httplib::Request& req, httplib::Response& res) {
    auto body = ParseBody(req);
    if (!body.ok()) return SendError(res, body.status());
    const json& b = *body;
    if (!b.is_object() || !b.contains("command") || !b["command"].is_array() || b["command"].empty())
      return SendError(res, Status::InvalidArgument("command: required, a non-empty array of strings"));
    std::vector<std::string> command;
    for (const auto& arg : b["command"]) {
      if (!arg.is_string()) return SendError(res, Status::InvalidArgument("command: expected an array of strings"));
      command.push_back(arg.get<std::string>());
    }
    int timeout_s = 30;
    if (b.contains("timeout_s")) {
      if (!b["timeout_s"].is_number_integer() || b["timeout_s"].get<int64_t>() < 1 ||
          b["timeout_s"].get<int64_t>() > 86400)
        return SendError(res, Status::InvalidArgument("timeout_s: expected whole seconds between 1 and 86400"));
      timeout_s = b["timeout_s"].get<int>();
    }
    auto result = agent_.Exec(req.matches[1], command, std::chrono::seconds(timeout_s));
    if (!result.ok()) return SendError(res, result.status());
    SendJson(res, 200,
             {{"exit_code", result->exit_code}, {"stdout", result->stdout_text}, {"stderr", result->stderr_text}});
  });

  server.Get(R"(/v1/kernels/([^/]+)/logs)", [this](const httplib::Request& req, httplib::Response& res) {
    int tail = 0;
    if (req.has_param("tail")) {
      const std::string text = req.get_param_value("tail");
      char* end = nullptr;
      long n = std::strtol(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0' || n < 0)
        return SendError(res, Status::InvalidArgument("tail: expected a whole number of lines, 0 or more"));
      tail = static_cast<int>(n);
    }
    auto logs = agent_.Logs(req.matches[1], tail);
    if (!logs.ok()) return SendError(res, logs.status());
    res.set_content(*logs, "text/plain; charset=utf-8");
  });

  server.Get("/v1/stats", [this](const httplib::Request&, httplib::Response& res) {
    SendJson(res, 200, ToJson(*collector_.Latest()));
  });

  server.Get(R"(/v1/kernels/([^/]+)/stats)", [this](const httplib::Request& req, httplib::Response& res) {
    auto kernel = agent_.GetKernel(req.matches[1]);
    if (!kernel.ok()) return SendError(res, kernel.status());
    SendJson(res, 200, KernelStatsJson(*kernel, *collector_.Latest()));
  });

  server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    MetricsFacts facts;
    facts.kernels_by_state = CountByState(agent_.ListKernels());
    facts.engine_reachable = agent_.EngineReachable();
    res.set_content(RenderMetrics(*collector_.Latest(), facts), kMetricsContentType);
  });

  server.Get("/v1/events", [this](const httplib::Request&, httplib::Response& res) {
    std::shared_ptr<EventHub::Subscription> sub = hub_.Subscribe();
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider("text/event-stream", [this, sub](size_t, httplib::DataSink& sink) {
      while (!stopping_) {
        auto event = sub->Next(std::chrono::milliseconds(500));
        std::string frame = event ? "event: " + (*event)["type"].get<std::string>() + "\ndata: " + event->dump() + "\n\n"
                                  : std::string(": keep-alive\n\n");
        if (!sink.write(frame.data(), frame.size())) return false;
      }
      sink.done();
      return true;
    });
  });
}

}  // namespace slotd
