#include "api/server.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include <spdlog/spdlog.h>

#include "common/ascii.h"
#include "model/create_request.h"
#include "api/metrics.h"
#include "api/responses.h"
#include "agent/kernel_table.h"
#include "common/relay.h"
#include "common/version.h"
#include "common/units.h"
#include "model/image_ref.h"

namespace slotd {
namespace {

using nlohmann::json;
using http::Exchange;
using http::Lane;

// With no event to send, an event stream sends a comment this often, so
// proxies and clients see a live connection.
constexpr std::chrono::seconds kKeepAliveEvery{10};
// How long an exec whose client went away has between SIGHUP and SIGKILL.
constexpr std::chrono::seconds kHangUpGrace{2};

// How deep a request body's arrays and objects may nest; no route takes more
// than a few levels.
constexpr int kMaxBodyDepth = 32;

// Parses a JSON request body; an empty body is an empty object. A key given
// twice in one object is refused, naming it (JSON leaves its meaning open:
// the last one would silently win), and so is nesting past kMaxBodyDepth.
Result<json> ParseBody(const http::Request& req) {
  if (req.body.empty()) return json::object();
  // The keys seen so far in each object being read, innermost last, each
  // with the key path that leads to it ("resources.").
  struct OpenObject {
    std::string path;
    std::set<std::string> keys;
  };
  std::vector<OpenObject> open;
  std::string last_key;  // the latest key read: the name of the value that follows it
  std::string problem;
  auto check = [&](int depth, json::parse_event_t event, json& parsed) {
    if (!problem.empty()) return false;
    if (depth > kMaxBodyDepth) {
      problem = "request body: nested deeper than " + std::to_string(kMaxBodyDepth) + " levels";
      return false;
    }
    switch (event) {
      case json::parse_event_t::object_start:
        open.push_back({open.empty() ? "" : open.back().path + last_key + ".", {}});
        break;
      case json::parse_event_t::object_end:
        if (!open.empty()) open.pop_back();
        break;
      case json::parse_event_t::key:
        last_key = parsed.get<std::string>();
        if (!open.empty() && !open.back().keys.insert(last_key).second)
          problem = open.back().path + last_key + ": given twice in one object; send each key once";
        break;
      default:
        break;
    }
    return problem.empty();
  };
  json body = json::parse(req.body, check, /*allow_exceptions=*/false);
  if (!problem.empty()) return Status::InvalidArgument(problem);
  if (body.is_discarded()) return Status::InvalidArgument("request body: malformed JSON");
  return body;
}

// An etcd registration as /health and /v1/agent show it.
json RegistrationJson(const Registration& r) {
  return {{"state", RegistrationPhaseName(r.phase)},
          {"registered", r.phase == Registration::Phase::kRegistered},
          {"key", r.key},
          {"since", r.since},
          {"detail", r.detail.empty() ? json(nullptr) : json(r.detail)}};
}

// Every kernel state, each with how many of `kernels` are in it.
std::map<std::string, int> CountByState(const std::vector<Kernel>& kernels) {
  std::map<std::string, int> counts;
  for (KernelTable::Place place : KernelPlaces())
    if (place) counts[KernelStateName(*place)] = 0;
  for (const Kernel& kernel : kernels) ++counts[KernelStateName(kernel.state())];
  return counts;
}

// A whole number in a query parameter, at least `min`; nullopt when not one.
std::optional<long> WholeNumber(const std::string& text, long min) {
  if (text.empty() || text.size() > 18) return std::nullopt;
  char* end = nullptr;
  const long n = std::strtol(text.c_str(), &end, 10);
  if (*end != '\0' || n < min) return std::nullopt;
  return n;
}

// A boolean query flag: "1"/"true"/"" (present without a value) or "0"/"false".
std::optional<bool> Flag(const http::Request& req, const char* name) {
  if (!req.HasParam(name)) return false;
  const std::string v = req.Param(name);
  if (v.empty() || v == "1" || v == "true") return true;
  if (v == "0" || v == "false") return false;
  return std::nullopt;
}

// A pool's resources as a request writes them: {"cpu": "250m", "mem": 268435456, "cuda.device": 1}.
json ShapeJson(const ResourceRequest& shape) {
  json out = {{"cpu", shape.shared_cpu_millis > 0 ? json(FormatMillicores(shape.shared_cpu_millis)) : json(shape.cpu)},
              {"mem", shape.mem_bytes}};
  for (const auto& [slot, count] : shape.devices) out[slot] = count;
  return out;
}

// The warm pools of /v1/agent: each pool's shape, count, its kernels ready
// (WARM) and being made, and why its latest kernel could not be made (and
// when it is tried again), while that holds; and the WARM kernels of all,
// whose resources the slots count as used.
json WarmJson(const KernelService& agent) {
  const std::map<std::string, KernelService::PoolCount> counts = agent.CountPools();
  json pools = json::array();
  int warm = 0;
  for (const WarmPool& pool : agent.Pools()) {
    const KernelService::PoolCount& count = counts.at(pool.name);
    warm += count.warm;
    pools.push_back({{"name", pool.name},
                     {"image", pool.shape.image.name},
                     {"resources", ShapeJson(pool.shape.resources)},
                     {"count", pool.count},
                     {"warm", count.warm},
                     {"making", count.making},
                     {"error", count.trouble.empty() ? json(nullptr) : json(count.trouble)},
                     {"retry_at", count.trouble.empty() ? json(nullptr) : json(count.retry_at)}});
  }
  return {{"kernels", warm}, {"pools", pools}};
}

// Unix ms now, for the audit log.
int64_t NowMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The audit entry of `request` for `route` (its pattern, or the path when
// none matched) with its placeholders' values `params`: who asked is
// filled in by the caller.
AuditEntry AuditEntryOf(const http::Request& request, const std::string& route, const Router::Params& params) {
  AuditEntry entry;
  entry.time_ms = NowMillis();
  entry.method = request.method;
  entry.route = route;
  entry.peer = request.peer;
  if (route.starts_with("/v1/kernels/{id}") && !params.empty()) {
    entry.kernel_id = params[0];
  } else if (route == "/v1/kernels" && request.method == "POST") {
    // The one field of a create's body that is kept: which kernel it makes.
    const json body = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_object() && body.contains("kernel_id") && body["kernel_id"].is_string())
      entry.kernel_id = body["kernel_id"].get<std::string>().substr(0, 256);
  }
  return entry;
}

// An Exchange that passes everything to `inner` and keeps the status it
// answered with, for the audit line written when the handler is done.
class AuditedExchange : public http::Exchange {
 public:
  explicit AuditedExchange(Exchange& inner) : inner_(inner) {}
  const http::Request& request() const override { return inner_.request(); }
  void Reply(http::Response response) override {
    if (!inner_.Answered()) status_ = response.status;
    inner_.Reply(std::move(response));
  }
  bool BeginStream(int status, const std::string& content_type,
                   const std::vector<std::pair<std::string, std::string>>& headers) override {
    if (!inner_.Answered()) status_ = status;
    return inner_.BeginStream(status, content_type, headers);
  }
  bool Write(std::string_view data) override { return inner_.Write(data); }
  int Upgrade(const std::vector<std::pair<std::string, std::string>>& headers, std::string& early) override {
    if (!inner_.Answered()) status_ = 101;
    return inner_.Upgrade(headers, early);
  }
  const std::atomic<bool>& Gone() const override { return inner_.Gone(); }
  bool Answered() const override { return inner_.Answered(); }
  // The status answered; 500 when none was (the server then answers so).
  int status() const { return status_; }

 private:
  Exchange& inner_;
  int status_ = 500;
};

}  // namespace

namespace {

// `options` with its long lane bounded: the execs, which have bounds of
// their own, and as many again for every other long request.
http::ServerOptions WithLongLane(http::ServerOptions options, int max_exec_sessions, int max_oneshot_execs) {
  options.max_long_requests = max_exec_sessions + max_oneshot_execs + ApiServer::kOtherLongRequests;
  return options;
}

}  // namespace

ApiServer::ApiServer(KernelService& service, EventHub& hub, const StatsCollector& collector, const ApiAccess& access,
                     http::ServerOptions options, int max_exec_sessions, int max_oneshot_execs)
    : service_(service),
      hub_(hub),
      collector_(collector),
      access_(access),
      server_(WithLongLane(options, max_exec_sessions, max_oneshot_execs)),
      write_timeout_(options.request_timeout),
      exec_sessions_(max_exec_sessions),
      oneshot_execs_(max_oneshot_execs) {
  AddRoutes();
}

ApiServer::~ApiServer() { Stop(); }

json ApiServer::KernelStatsJson(const Kernel& kernel, const StatsSnapshot& latest) {
  const std::string state = KernelStateName(kernel.state());
  // A sample of an earlier container under the same kernel id (deleted and
  // created again) is not this kernel's, and one taken before it ended is stale.
  if (auto it = latest.kernels.find(kernel.id()); kernel.state() == KernelState::kRunning &&
                                                 it != latest.kernels.end() &&
                                                 it->second.container_id == kernel.container_id) {
    json body = ToJson(it->second);
    body["state"] = state;
    body["measured"] = true;
    return body;
  }
  std::string reason;
  const std::string interval = FormatDuration(std::chrono::milliseconds(latest.interval_ms));
  if (kernel.state() != KernelState::kRunning) {
    reason = "not running: no measures for a " + state + " kernel";
  } else if (latest.collected_at_ms == 0) {
    reason = "no sample yet: the first sweep has not ended; sweeps run every " + interval;
  } else {
    reason = "no sample yet: the latest sweep did not measure it (it started after that sweep, or its sample was "
             "skipped); the next sweep is due within " + interval;
  }
  return {{"kernel_id", kernel.id()}, {"state", state}, {"measured", false}, {"reason", reason}};
}

Status ApiServer::Bind(const std::string& host, int port, const std::string& unix_path) {
  http::TlsSource tls;
  if (tls_ != nullptr) tls = [this] { return tls_->Current(); };
  if (Status s = server_.ListenTcp(
          host, port, [this](const http::Request& r) { return Dispatch(r); },
          [this](const http::Request& r) { return Refuse(r); }, std::move(tls));
      !s.ok())
    return s;
  if (Status s = server_.ListenUnix(unix_path, [this](const http::Request& r) { return Dispatch(r); }); !s.ok())
    return s;
  host_ = host;
  port_ = server_.tcp_port();
  unix_path_ = unix_path;
  return Status::Ok();
}

void ApiServer::Start() { server_.Start(); }

void ApiServer::Stop() {
  server_.Stop();
  if (!unix_path_.empty()) ::unlink(unix_path_.c_str());
  unix_path_.clear();
}

void ApiServer::Record(const AuditEntry& entry) const {
  if (audit_ != nullptr) audit_->Record(entry);
}

std::optional<http::Response> ApiServer::Refuse(const http::Request& request) const {
  const Router::Match match = router_.Find(request.method, request.path);
  const Router::Route* route = match.route;
  if (route != nullptr && !route->role) return std::nullopt;  // open to anyone: GET /health
  const std::string pattern = route != nullptr ? route->pattern : request.path;
  std::variant<Caller, Refusal> who = access_.Authenticate(request);
  std::optional<Refusal> refusal;
  if (auto* refused = std::get_if<Refusal>(&who)) {
    refusal = std::move(*refused);
  } else if (route != nullptr) {
    refusal = Authorize(route->role, std::get<Caller>(who), request.method + " " + pattern);
  }
  if (!refusal) return std::nullopt;
  AuditEntry entry = AuditEntryOf(request, pattern, match.params);
  entry.caller = refusal->name;
  if (auto* caller = std::get_if<Caller>(&who)) {
    entry.role = caller->role;
    entry.via = caller->via;
  } else if (refusal->status == 403) {
    entry.via = "certificate";
  }
  entry.status = refusal->status;
  Record(entry);
  http::Response answer = ErrorResponse(refusal->status, refusal->code, refusal->message);
  if (refusal->status == 401) answer.headers.emplace_back("WWW-Authenticate", "Bearer");
  return answer;
}

http::Dispatch ApiServer::Dispatch(const http::Request& request) const {
  http::Dispatch dispatch;
  Router::Match match = router_.Find(request.method, request.path);
  switch (match.outcome) {
    case Router::Match::Outcome::kNoRoute:
      dispatch.immediate = ErrorResponse(404, "not_found", "no route " + request.method + " " + request.path +
                                                               "; see docs/api.md for the routes");
      return dispatch;
    case Router::Match::Outcome::kWrongMethod:
      dispatch.immediate = ErrorResponse(405, "method_not_allowed",
                                         request.path + " does not take " + request.method + "; it takes " + match.allow);
      dispatch.immediate.headers.emplace_back("Allow", match.allow);
      return dispatch;
    case Router::Match::Outcome::kFound:
      break;
  }
  dispatch.lane = match.route->lane;
  if (audit_ == nullptr || request.method == "GET") {
    dispatch.handler = [handler = match.route->handler, params = std::move(match.params)](Exchange& ex) {
      handler(ex, params);
    };
    return dispatch;
  }
  // A request that changes something: audited with who asked and how it ended.
  AuditEntry entry = AuditEntryOf(request, match.route->pattern, match.params);
  const std::variant<Caller, Refusal> who = access_.Authenticate(request);
  if (const auto* caller = std::get_if<Caller>(&who)) {
    entry.caller = caller->name;
    entry.role = caller->role;
    entry.via = caller->via;
  }
  dispatch.handler = [this, handler = match.route->handler, params = std::move(match.params),
                      entry = std::move(entry)](Exchange& ex) mutable {
    const auto began = std::chrono::steady_clock::now();
    AuditedExchange audited(ex);
    try {
      handler(audited, params);
    } catch (...) {
      entry.status = 500;
      entry.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - began).count();
      Record(entry);
      throw;
    }
    entry.status = audited.status();
    entry.duration_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - began).count();
    Record(entry);
  };
  return dispatch;
}

// The routes, in the order they are matched. Each handler reaches the
// server through `s`; the table itself holds no server, so Routes() can list
// it without one.
const std::vector<ApiServer::RouteEntry>& ApiServer::RouteTable() {
  using Params = Router::Params;
  using S = ApiServer;
  constexpr bool kEngine = true;  // the route waits on the engine
  // The role each route needs (docs/security.md "Roles"). Logs and execs
  // carry what kernels print and run code in them: never a viewer's.
  constexpr std::optional<Role> kAnyone;
  constexpr std::optional<Role> kViewer = Role::kViewer;
  constexpr std::optional<Role> kOperator = Role::kOperator;
  constexpr std::optional<Role> kAdmin = Role::kAdmin;
  static const std::vector<RouteEntry> kTable = {
      {"GET", "/health", kAnyone, Lane::kQuick, [](S& s, Exchange& ex, const Params&) { s.Health(ex); }},
      {"GET", "/v1/agent", kViewer, Lane::kQuick, [](S& s, Exchange& ex, const Params&) { s.DescribeAgent(ex); }},
      {"GET", "/v1/kernels", kViewer, Lane::kQuick, [](S& s, Exchange& ex, const Params&) { s.ListKernels(ex); }},
      {"POST", "/v1/kernels", kOperator, Lane::kLong, [](S& s, Exchange& ex, const Params&) { s.CreateKernel(ex); }, kEngine},
      {"GET", "/v1/kernels/{id}", kViewer, Lane::kQuick,
       [](S& s, Exchange& ex, const Params& p) { s.GetKernel(ex, p[0]); }},
      {"DELETE", "/v1/kernels/{id}", kOperator, Lane::kLong,
       [](S& s, Exchange& ex, const Params& p) { s.ReplyKernel(ex, s.service_.DeleteKernel(p[0])); }, kEngine},
      {"POST", "/v1/kernels/{id}/restart", kOperator, Lane::kLong,
       [](S& s, Exchange& ex, const Params& p) { s.ReplyKernel(ex, s.service_.RestartKernel(p[0])); }, kEngine},
      {"POST", "/v1/kernels/{id}/exec", kOperator, Lane::kLong,
       [](S& s, Exchange& ex, const Params& p) { s.Exec(ex, p[0]); }, kEngine},
      {"GET", "/v1/kernels/{id}/exec/{exec}", kOperator, Lane::kLong,
       [](S& s, Exchange& ex, const Params& p) { s.ExecState(ex, p[0], p[1]); }, kEngine},
      {"POST", "/v1/kernels/{id}/exec/{exec}/resize", kOperator, Lane::kLong,
       [](S& s, Exchange& ex, const Params& p) { s.ResizeExec(ex, p[0], p[1]); }, kEngine},
      {"GET", "/v1/kernels/{id}/logs", kOperator, Lane::kLong,
       [](S& s, Exchange& ex, const Params& p) { s.Logs(ex, p[0]); }, kEngine},
      {"GET", "/v1/kernels/{id}/stats", kViewer, Lane::kQuick,
       [](S& s, Exchange& ex, const Params& p) { s.KernelStats(ex, p[0]); }},
      {"GET", "/v1/stats", kViewer, Lane::kQuick,
       [](S& s, Exchange& ex, const Params&) { ex.Reply(JsonResponse(200, ToJson(*s.collector_.Latest()))); }},
      {"GET", "/metrics", kViewer, Lane::kQuick, [](S& s, Exchange& ex, const Params&) { s.Metrics(ex); }},
      {"GET", "/v1/events", kViewer, Lane::kLong, [](S& s, Exchange& ex, const Params&) { s.Events(ex); }},
      {"POST", "/v1/agent/drain", kAdmin, Lane::kQuick, [](S& s, Exchange& ex, const Params&) { s.SetDraining(ex, true); }},
      {"POST", "/v1/agent/undrain", kAdmin, Lane::kQuick,
       [](S& s, Exchange& ex, const Params&) { s.SetDraining(ex, false); }},
      {"POST", "/v1/devices/{id}/drain", kAdmin, Lane::kQuick,
       [](S& s, Exchange& ex, const Params& p) { s.ChangeDevice(ex, p[0], "drain"); }},
      {"POST", "/v1/devices/{id}/undrain", kAdmin, Lane::kQuick,
       [](S& s, Exchange& ex, const Params& p) { s.ChangeDevice(ex, p[0], "undrain"); }},
      {"POST", "/v1/devices/{id}/clear", kAdmin, Lane::kQuick,
       [](S& s, Exchange& ex, const Params& p) { s.ChangeDevice(ex, p[0], "clear"); }},
      {"GET", "/v1/images", kViewer, Lane::kLong, [](S& s, Exchange& ex, const Params&) { s.ListImages(ex); }, kEngine},
      {"POST", "/v1/images/pull", kOperator, Lane::kLong, [](S& s, Exchange& ex, const Params&) { s.PullImage(ex); }, kEngine},
  };
  return kTable;
}

std::vector<ApiServer::RouteName> ApiServer::Routes() {
  std::vector<RouteName> names;
  for (const RouteEntry& route : RouteTable()) names.push_back({route.method, route.pattern, route.role});
  return names;
}

void ApiServer::AddRoutes() {
  for (const RouteEntry& route : RouteTable())
    router_.Add(route.method, route.pattern, route.role, route.lane,
                [this, handle = route.handle, engine = route.waits_on_engine](Exchange& ex, const Router::Params& p) {
                  // A hung engine would hold the request for the engine call's whole timeout (60 s).
                  if (engine && service_.EngineKnownDown()) return ex.Reply(EngineUnreachable());
                  handle(*this, ex, p);
                });
}

http::Response ApiServer::EngineUnreachable() const {
  const std::string address = service_.config().container.docker_host;
  const std::string engine = engine_ ? engine_->name + " at " + address : address;
  http::Response refused =
      ErrorResponse(503, "unavailable",
                    "the container engine (" + engine + ") does not answer: the agent's probes of it have gone "
                    "unanswered for " + std::to_string(KernelService::kEngineDownAfter.count()) +
                    " s (GET /health says engine_unreachable), so this request was not tried; retry once the "
                    "engine answers again");
  refused.headers.emplace_back("Retry-After", "2");
  return refused;
}

void ApiServer::ListKernels(Exchange& ex) const {
  const std::optional<bool> warm = Flag(ex.request(), "warm");
  if (!warm) return ex.Reply(ErrorResponse(Status::InvalidArgument("warm: expected 1, true, 0 or false")));
  ex.Reply(KernelListResponse(service_.ListKernelRecords(*warm)));
}

void ApiServer::GetKernel(Exchange& ex, const std::string& kernel_id) const {
  Result<std::shared_ptr<const std::string>> record = service_.KernelRecord(kernel_id);
  ex.Reply(record.ok() ? JsonTextResponse(200, **record) : ErrorResponse(record.status()));
}

void ApiServer::ReplyKernel(Exchange& ex, const Result<Kernel>& kernel) {
  ex.Reply(kernel.ok() ? JsonResponse(200, kernel->ToJson()) : ErrorResponse(kernel.status()));
}

void ApiServer::KernelStats(Exchange& ex, const std::string& kernel_id) const {
  auto kernel = service_.GetKernel(kernel_id);
  ex.Reply(kernel.ok() ? JsonResponse(200, KernelStatsJson(*kernel, *collector_.Latest()))
                       : ErrorResponse(kernel.status()));
}

// The drain's deadline that POST /v1/agent/drain's body asks for ({"deadline": "30m"}); unset: none.
static Result<std::optional<std::chrono::milliseconds>> DrainDeadlineOf(const json& body) {
  for (const auto& [key, value] : body.items())
    if (key != "deadline") return Status::InvalidArgument(key + ": unknown field; known: deadline");
  if (!body.contains("deadline")) return std::optional<std::chrono::milliseconds>();
  Result<std::chrono::milliseconds> within =
      ParseDurationField(body["deadline"], "deadline", std::chrono::seconds(1), std::chrono::hours(24 * 366));
  if (!within.ok()) return within.status();
  return std::optional<std::chrono::milliseconds>(*within);
}

void ApiServer::SetDraining(Exchange& ex, bool drain) {
  std::optional<std::chrono::milliseconds> within;
  if (drain) {
    Result<json> body = ParseBody(ex.request());
    if (!body.ok()) return ex.Reply(ErrorResponse(body.status()));
    if (!body->is_object()) return ex.Reply(ErrorResponse(Status::InvalidArgument("request body: expected a JSON object")));
    Result<std::optional<std::chrono::milliseconds>> asked = DrainDeadlineOf(*body);
    if (!asked.ok()) return ex.Reply(ErrorResponse(asked.status()));
    within = *asked;
  }
  const Result<KernelService::Drain> now = service_.SetDraining(drain, within);
  if (!now.ok()) {
    ex.Reply(ErrorResponse(now.status()));
    return;
  }
  ex.Reply(JsonResponse(200, {{"draining", now->draining},
                              {"draining_since", now->draining ? json(now->since) : json(nullptr)},
                              {"drain_deadline", now->deadline ? json(*now->deadline) : json(nullptr)}}));
}

namespace {

// The API form of an image.
json ImageJson(const ImageInfo& info) {
  return {{"id", info.id},
          {"tags", info.tags},
          {"digests", info.digests},
          {"size", info.size_bytes},
          {"created_at", info.created_unix}};
}

}  // namespace

void ApiServer::ListImages(Exchange& ex) {
  auto images = service_.ListImages();
  if (!images.ok()) return ex.Reply(ErrorResponse(images.status()));
  json list = json::array();
  for (const KernelService::NodeImage& image : *images) {
    json entry = ImageJson(image.info);
    entry["last_used"] = image.last_used ? json(image.last_used) : json(nullptr);
    entry["kernels"] = image.kernel_ids;
    list.push_back(std::move(entry));
  }
  ex.Reply(JsonResponse(200, {{"images", list}}));
}

void ApiServer::PullImage(Exchange& ex) {
  auto body = ParseBody(ex.request());
  if (!body.ok()) return ex.Reply(ErrorResponse(body.status()));
  const json* image = body->is_object() && body->contains("image") ? &(*body)["image"] : nullptr;
  if (image == nullptr || !image->is_string() || image->get<std::string>().empty() ||
      image->get<std::string>().size() > kMaxImageName)
    return ex.Reply(ErrorResponse(Status::InvalidArgument(
        "image: required, the image to pull, e.g. \"127.0.0.1:5000/team/torch:2.3\" (at most " +
        std::to_string(kMaxImageName) + " bytes)")));
  for (const auto& [key, value] : body->items())
    if (key != "image") return ex.Reply(ErrorResponse(Status::InvalidArgument(key + ": unknown field; known: image")));
  if (Status valid = ValidateImageRef(image->get<std::string>()); !valid.ok())
    return ex.Reply(ErrorResponse(valid.WithPrefix("image")));
  auto pulled = service_.PullImage(image->get<std::string>());
  ex.Reply(pulled.ok() ? JsonResponse(200, ImageJson(*pulled)) : ErrorResponse(pulled.status()));
}

void ApiServer::Health(Exchange& ex) const {
  const bool reachable = service_.EngineReachable();
  json answer = {{"status", reachable ? "ok" : "engine_unreachable"},
                 {"agent_id", service_.config().agent.id},
                 {"last_sync_age_s", service_.LastSyncAgeSeconds()}};
  // etcd out of reach is shown, not a failure: kernels and this API go on.
  if (registrar_ != nullptr) answer["etcd"] = RegistrationJson(registrar_->State());
  ex.Reply(JsonResponse(reachable ? 200 : 503, answer));
}

std::string ApiServer::AdvertisedAddress() const {
  const bool every_address = host_.empty() || host_ == "0.0.0.0" || host_ == "::" || host_ == "[::]";
  const std::string host = every_address ? service_.config().agent.node : host_;
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port_);
}

void ApiServer::DescribeAgent(Exchange& ex) const {
  const Config& c = service_.config();
  const KernelService::Drain drain = service_.Draining();
  ex.Reply(JsonResponse(200, {{"id", c.agent.id},
                              {"node", c.agent.node},
                              {"version", kSlotdVersion},
                              {"commit", kSlotdCommit},
                              {"scaling_group", c.agent.scaling_group},
                              {"api_address", host_ + ":" + std::to_string(port_)},
                              {"api_scheme", tls_ != nullptr ? "https" : "http"},
                              {"tls", tls_ != nullptr
                                          ? json{{"fingerprint_sha256", tls_->Fingerprint()},
                                                 {"client_certificates", tls_->AsksClientCertificates()},
                                                 {"min_version", WordOf(TlsVersionWords(), tls_->files().min_version)}}
                                          : json(nullptr)},
                              {"ipc_base_path", c.agent.ipc_base_path},
                              {"unix_socket", unix_path_},
                              {"port_range", {c.container.port_range_start, c.container.port_range_end}},
                              {"pid", static_cast<int>(::getpid())},
                              {"draining", drain.draining},
                              {"draining_since", drain.draining ? json(drain.since) : json(nullptr)},
                              {"drain_deadline", drain.deadline ? json(*drain.deadline) : json(nullptr)},
                              {"etcd", registrar_ ? RegistrationJson(registrar_->State()) : json(nullptr)},
                              {"engine", engine_ ? json{{"name", engine_->name},
                                                        {"version", engine_->version},
                                                        {"api_version", engine_->api_version},
                                                        {"address", c.container.docker_host}}
                                                 : json(nullptr)},
                              {"resources", service_.DescribeResources()},
                              {"warm", WarmJson(service_)}}));
}

void ApiServer::CreateKernel(Exchange& ex) {
  auto body = ParseBody(ex.request());
  if (!body.ok()) return ex.Reply(ErrorResponse(body.status()));
  auto request = ParseCreateRequest(*body);
  if (!request.ok()) return ex.Reply(ErrorResponse(request.status()));
  auto outcome = service_.CreateKernel(*request);
  if (!outcome.ok() && outcome.status().code() == Status::Code::kUnavailable && service_.Draining().draining)
    return ex.Reply(ErrorResponse(503, "draining", outcome.status().message()));
  if (!outcome.ok()) {
    // An unknown image is a bad field of the request, not a missing route or kernel.
    const bool bad_image = outcome.status().code() == Status::Code::kNotFound;
    return ex.Reply(ErrorResponse(outcome.status(), bad_image ? 400 : 0));
  }
  ex.Reply(JsonResponse(outcome->created ? 201 : 200, outcome->kernel.ToJson()));
}

namespace {

// A terminal dimension of a request body: `key` from 1 to 1000, or `fallback` when absent.
Result<int> TerminalSize(const json& body, const char* key, int fallback) {
  if (!body.contains(key)) return fallback;
  const json& v = body[key];
  if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 1000)
    return Status::InvalidArgument(std::string(key) + ": expected a whole number from 1 to 1000");
  return v.get<int>();
}

// Whether the request asks to turn its connection into a raw stream.
bool AsksForUpgrade(const http::Request& request) {
  return EqualsIgnoringAsciiCase(request.Header("Upgrade"), "tcp");
}

}  // namespace

void ApiServer::Exec(Exchange& ex, const std::string& kernel_id) {
  auto body = ParseBody(ex.request());
  if (!body.ok()) return ex.Reply(ErrorResponse(body.status()));
  const json& b = *body;
  const json* command_json = b.is_object() && b.contains("command") ? &b["command"] : nullptr;
  if (command_json == nullptr || !command_json->is_array() || command_json->empty())
    return ex.Reply(ErrorResponse(Status::InvalidArgument("command: required, a non-empty array of strings")));
  std::vector<std::string> command;
  for (const auto& arg : *command_json) {
    if (!arg.is_string())
      return ex.Reply(ErrorResponse(Status::InvalidArgument("command: expected an array of strings")));
    command.push_back(arg.get<std::string>());
  }
  if (AsksForUpgrade(ex.request())) return ExecInteractive(ex, kernel_id, command, b);
  int timeout_s = 30;
  if (b.contains("timeout_s")) {
    const json& t = b["timeout_s"];
    if (!t.is_number_integer() || t.get<int64_t>() < 1 || t.get<int64_t>() > 86400)
      return ex.Reply(ErrorResponse(Status::InvalidArgument("timeout_s: expected whole seconds between 1 and 86400")));
    timeout_s = t.get<int>();
  }
  if (!oneshot_execs_.Take())
    return ex.Reply(ErrorResponse(503, "unavailable",
                                  "too many one-shot execs: " + std::to_string(oneshot_execs_.max()) +
                                      " are running, the most this agent runs at once ([api] max-oneshot-execs in "
                                      "its config); retry when one has ended"));
  // The place is given back before the answer is sent: a client that reads
  // its answer and sends the next exec finds its place free.
  http::Response answer = [&]() -> http::Response {
    struct Release {
      ExecPlaces& places;
      ~Release() { places.Release(); }
    } release{oneshot_execs_};
    std::string exec_id;
    auto result = service_.Exec(kernel_id, command, std::chrono::seconds(timeout_s), &ex.Gone(), &exec_id);
    if (!result.ok() && ex.Gone() && !exec_id.empty()) {
      // Its client is gone: the command would be left behind, counting against the kernel's pids.
      if (Status ended = service_.HangUpExec(kernel_id, exec_id, kHangUpGrace); !ended.ok())
        spdlog::warn("exec {} of kernel {}: its client is gone, but: {}", exec_id, kernel_id, ended.message());
    }
    if (!result.ok()) return ErrorResponse(result.status());
    json body = {{"exit_code", result->exit_code}};
    ExactText(body, "stdout", result->stdout_text);
    ExactText(body, "stderr", result->stderr_text);
    if (result->stdout_truncated) body["stdout_truncated"] = true;
    if (result->stderr_truncated) body["stderr_truncated"] = true;
    return JsonResponse(200, body);
  }();
  ex.Reply(std::move(answer));
}

void ApiServer::ExecInteractive(Exchange& ex, const std::string& kernel_id, const std::vector<std::string>& command,
                                const json& body) {
  Result<int> rows = TerminalSize(body, "rows", 24);
  if (!rows.ok()) return ex.Reply(ErrorResponse(rows.status()));
  Result<int> cols = TerminalSize(body, "cols", 80);
  if (!cols.ok()) return ex.Reply(ErrorResponse(cols.status()));
  if (!exec_sessions_.Take())
    return ex.Reply(ErrorResponse(503, "unavailable",
                                  "too many interactive execs: " + std::to_string(exec_sessions_.max()) +
                                      " are open, the most this agent serves at once ([api] max-exec-sessions in its "
                                      "config); retry when one has ended"));
  struct Release {
    ExecPlaces& places;
    ~Release() { places.Release(); }
  } release{exec_sessions_};
  Result<ExecSession> session = service_.ExecInteractive(kernel_id, command, *rows, *cols);
  if (!session.ok()) return ex.Reply(ErrorResponse(session.status()));
  std::string early;
  const int client = ex.Upgrade({{"X-Slotd-Exec-Id", session->exec_id}}, early);
  // The client's input ending (a close, a reset or a half-close) is a
  // hang-up: on a terminal there is no end of input to pass on.
  RelayEnd end = RelayEnd::kOutputGone;
  if (client >= 0) {
    RelayOptions options;
    options.write_timeout = write_timeout_;
    options.input_end_ends = true;
    if (WriteAll(session->fd, early.data(), early.size(), write_timeout_, &ex.Gone()) &&
        WriteAll(client, session->early.data(), session->early.size(), write_timeout_, &ex.Gone()))
      end = Relay(client, client, session->fd, ex.Gone(), options);
    ::close(client);
  }
  ::close(session->fd);
  service_.InteractiveExecEnded(kernel_id);
  if (end == RelayEnd::kRemoteEnded) return;  // the command ended
  // Its client is gone (or the agent stops): the command would be left behind, counting against the kernel's pids.
  if (Status ended = service_.HangUpExec(kernel_id, session->exec_id, kHangUpGrace); !ended.ok())
    spdlog::warn("interactive exec {} of kernel {}: its client is gone, but: {}", session->exec_id, kernel_id,
                 ended.message());
}

bool ApiServer::ExecPlaces::Take() {
  MutexLock lock(mutex_);
  if (taken_ >= max_) return false;
  ++taken_;
  return true;
}

void ApiServer::ExecPlaces::Release() {
  MutexLock lock(mutex_);
  --taken_;
}

void ApiServer::ExecState(Exchange& ex, const std::string& kernel_id, const std::string& exec_id) {
  Result<ExecInfo> info = service_.InspectExec(kernel_id, exec_id);
  if (!info.ok()) return ex.Reply(ErrorResponse(info.status()));
  ex.Reply(JsonResponse(200, {{"kernel_id", kernel_id},
                              {"exec_id", exec_id},
                              {"running", info->running},
                              {"exit_code", info->exit_code ? json(*info->exit_code) : json(nullptr)}}));
}

void ApiServer::ResizeExec(Exchange& ex, const std::string& kernel_id, const std::string& exec_id) {
  auto body = ParseBody(ex.request());
  if (!body.ok()) return ex.Reply(ErrorResponse(body.status()));
  if (!body->is_object() || !body->contains("rows") || !body->contains("cols"))
    return ex.Reply(ErrorResponse(Status::InvalidArgument("rows and cols: required, e.g. {\"rows\": 40, \"cols\": 120}")));
  Result<int> rows = TerminalSize(*body, "rows", 0);
  if (!rows.ok()) return ex.Reply(ErrorResponse(rows.status()));
  Result<int> cols = TerminalSize(*body, "cols", 0);
  if (!cols.ok()) return ex.Reply(ErrorResponse(cols.status()));
  const Status resized = service_.ResizeExec(kernel_id, exec_id, *rows, *cols);
  ex.Reply(resized.ok() ? JsonResponse(200, {{"rows", *rows}, {"cols", *cols}}) : ErrorResponse(resized));
}

void ApiServer::Logs(Exchange& ex, const std::string& kernel_id) {
  const http::Request& req = ex.request();
  int tail = 0;
  if (req.HasParam("tail")) {
    auto n = WholeNumber(req.Param("tail"), 0);
    if (!n || *n > 100'000'000)
      return ex.Reply(ErrorResponse(Status::InvalidArgument("tail: expected a whole number of lines, 0 or more")));
    tail = static_cast<int>(*n);
  }
  const std::optional<bool> follow = Flag(req, "follow");
  if (!follow) return ex.Reply(ErrorResponse(Status::InvalidArgument("follow: expected 1 or 0")));
  bool begun = false;
  const Status s = service_.StreamLogs(
      kernel_id, tail, *follow,
      [&] { begun = ex.BeginStream(200, "text/plain", {{"Cache-Control", "no-cache"}}); },
      [&](std::string_view bytes) { return begun && ex.Write(bytes); }, ex.Gone());
  if (!ex.Answered()) {
    // The engine refused before any byte: a plain error answer (or an empty log).
    if (!s.ok()) return ex.Reply(ErrorResponse(s));
    http::Response empty;
    empty.content_type = "text/plain";
    return ex.Reply(std::move(empty));
  }
  if (!s.ok() && !ex.Gone()) spdlog::warn("log stream of kernel {} ended early: {}", kernel_id, s.message());
}

void ApiServer::Events(Exchange& ex) {
  std::unique_ptr<EventHub::Subscription> sub = hub_.Subscribe();
  if (!ex.BeginStream(200, "text/event-stream", {{"Cache-Control", "no-cache"}})) return;
  auto last_write = std::chrono::steady_clock::now();
  while (!ex.Gone()) {
    auto event = sub->Next(std::chrono::milliseconds(500));
    std::string frame;
    if (event) {
      frame = std::string("event: ") + EventTypeName(event->type) + "\ndata: " + DumpJson(event->body) + "\n\n";
    } else if (std::chrono::steady_clock::now() - last_write >= kKeepAliveEvery) {
      frame = ": keep-alive\n\n";
    } else {
      continue;
    }
    if (!ex.Write(frame)) return;
    last_write = std::chrono::steady_clock::now();
  }
}

void ApiServer::ChangeDevice(Exchange& ex, const std::string& device, const std::string& action) {
  Result<KernelService::DeviceChange> change = action == "clear" ? service_.ClearDevice(device)
                                                         : service_.DrainDevice(device, action == "drain");
  if (!change.ok()) {
    ex.Reply(ErrorResponse(change.status()));
    return;
  }
  json body = {{"plugin", change->plugin}, {"devices", change->devices}};
  if (action == "clear") body["cleared"] = true;
  else body["drained"] = action == "drain";
  ex.Reply(JsonResponse(200, body));
}

void ApiServer::Metrics(Exchange& ex) const {
  MetricsFacts facts;
  const std::vector<Kernel> kernels = service_.ListKernels();
  facts.kernels_by_state = CountByState(kernels);
  facts.kernels_with_condition = static_cast<int>(
      std::count_if(kernels.begin(), kernels.end(), [](const Kernel& k) { return !k.condition.empty(); }));
  for (const Kernel& k : kernels) {
    if (k.request.restart.when != RestartWhen::kNever || k.restarts > 0) facts.kernel_restarts[k.id()] = k.restarts;
    if (k.health && k.state() == KernelState::kRunning)
      facts.kernel_health[k.id()] = {k.health->ready, k.health->status == HealthStatus::kHealthy, k.health->checks};
  }
  facts.engine_reachable = service_.EngineReachable();
  facts.draining = service_.Draining().draining;
  facts.build = {kSlotdVersion, kSlotdCommit, label::kCurrentFormat};
  if (registrar_ != nullptr) {
    const Registration registration = registrar_->State();
    facts.etcd = MetricsFacts::Etcd{registration.phase == Registration::Phase::kRegistered, registration.writes,
                                    registration.keep_alives};
  }
  for (const KernelService::DeviceState& device : service_.DeviceStates())
    facts.devices.push_back(
        {device.plugin, device.device, device.health.health == DeviceHealth::kHealthy, device.drained});
  http::Response response;
  response.content_type = kMetricsContentType;
  response.body = RenderMetrics(*collector_.Latest(), facts);
  ex.Reply(std::move(response));
}

}  // namespace slotd
