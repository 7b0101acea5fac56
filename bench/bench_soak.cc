// bench_soak: an hour of an agent's life compressed into a few minutes. Does
// anything pile up in the agent (memory, open files, threads), does any
// operation fail, and how much does the churn slow GET /health?
//
// Against the real build/bin/slotd and the engine at $DOCKER_HOST, for
// --duration seconds (default 180), all at once:
//   - one churn thread per free core (at most 4; kernels hold whole cores):
//     create a kernel, 3 execs, its logs, its logs followed until a line
//     comes (then the client hangs up), delete, again and again;
//   - event subscribers on /v1/events: kSteadySubscribers connected
//     throughout, kReconnectingSubscribers that hang up and reconnect
//     every few seconds;
//   - slow clients: kSlowClients send a GET /health byte by byte (and must
//     get their answer), kIdleClients send half a request or nothing and
//     must be cut by the agent at its request-timeout (kRequestTimeout);
//   - a probe: GET /health every kProbeEvery on the unix socket.
// Before the churn the same probe runs on the quiet agent (kQuietProbes
// calls). The agent's footprint (VmRSS and Threads of /proc/<pid>/status,
// the entries of /proc/<pid>/fd, counted by kind: unix or TCP socket, pipe,
// eventfd, cgroup file, ...) is read after a warm-up round of every kind of
// operation, and again once the churn has stopped and the agent is idle (its
// threads and open files back to their start or kIdleWait past).
//
// --parts picks parts of the mix (default all of kParts), to find which one
// makes a footprint grow.
//
// Exits 1 when any operation failed, when the resident memory grew by more
// than kRssGrowthLimitMiB, or when the open files or threads grew (naming
// the kinds of open file that grew). The /health figures are printed, not
// checked.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "common.h"
#include "common/mutex.h"
#include "common/units.h"

namespace slotd::bench {
namespace {

constexpr int kMaxChurnThreads = 4;
constexpr int kExecsPerKernel = 3;
constexpr int kSteadySubscribers = 6;
constexpr int kReconnectingSubscribers = 3;
constexpr int kSlowClients = 2;
constexpr int kIdleClients = 2;
constexpr auto kSlowByteEvery = std::chrono::milliseconds(10);
constexpr char kRequestTimeout[] = "2s";
constexpr auto kRequestTimeoutMs = std::chrono::milliseconds(2000);
constexpr auto kProbeEvery = std::chrono::milliseconds(10);
constexpr int kQuietProbes = 1000;
constexpr auto kIdleWait = std::chrono::seconds(20);
constexpr double kRssGrowthLimitMiB = 4;
constexpr char kKernelMemory[] = "32m";
// Prints "tick" every second and exits at once on SIGTERM, so a delete does
// not wait out the stop-timeout (sleep as PID 1 ignores SIGTERM).
constexpr char kKernelScript[] = "trap 'exit 0' TERM; while :; do echo tick; sleep 1 & wait $!; done";

using testing::AgentProcess;
using testing::RawClient;

// The parts of the mix --parts can pick. A churn thread runs when "kernels",
// "exec", "logs" or "follow" is picked: it creates and deletes kernels, and
// does in each what else is picked of those.
constexpr const char* kParts[] = {"kernels", "exec", "logs", "follow", "events", "reconnect", "slow", "idle", "probe"};

// The parts picked: a set of names of kParts.
using Parts = std::set<std::string>;

// What the threads did: operations by kind, and every unexpected failure.
class Tally {
 public:
  void Count(const std::string& kind, long n = 1) {
    MutexLock lock(mutex_);
    counts_[kind] += n;
  }
  void Fail(const std::string& what) {
    MutexLock lock(mutex_);
    errors_.push_back(what);
  }
  std::map<std::string, long> counts() const {
    MutexLock lock(mutex_);
    return counts_;
  }
  std::vector<std::string> errors() const {
    MutexLock lock(mutex_);
    return errors_;
  }

 private:
  mutable Mutex mutex_;
  std::map<std::string, long> counts_ GUARDED_BY(mutex_);
  std::vector<std::string> errors_ GUARDED_BY(mutex_);
};

// The agent's footprint at one moment.
struct Footprint {
  long rss_kib = 0;
  long open_files = 0;
  long threads = 0;
  std::map<std::string, long> file_kinds;  // the open files by kind (testing::OpenFileKinds)
};

Footprint FootprintOf(pid_t pid) {
  std::map<std::string, long> kinds = testing::OpenFileKinds(pid);
  long open_files = 0;
  for (const auto& [kind, n] : kinds) open_files += n;
  return {testing::ProcStatusField(pid, "VmRSS"), open_files, testing::ProcStatusField(pid, "Threads"),
          std::move(kinds)};
}

std::string Describe(const Footprint& f) {
  char text[128];
  std::snprintf(text, sizeof text, "resident %.1f MiB, %ld open files, %ld threads", f.rss_kib / 1024.0, f.open_files,
                f.threads);
  std::string kinds;
  for (const auto& [kind, n] : f.file_kinds) kinds += (kinds.empty() ? "" : ", ") + kind + " " + std::to_string(n);
  return std::string(text) + "\n    open files by kind: " + kinds;
}

// Calls the agent over its unix socket; true when it answered `expect`,
// else records the failure in `tally` under `what`.
bool Expect(const AgentProcess& agent, Tally& tally, const std::string& what, const std::string& method,
            const std::string& path, const std::string& body, long expect, HttpResponse* out = nullptr) {
  HttpResponse res = agent.Call(method, path, body);
  if (out) *out = res;
  if (res.status == expect) return true;
  tally.Fail(what + ": " + method + " " + path + ": HTTP " + std::to_string(res.status) + " (expected " +
             std::to_string(expect) + "): " + res.body.substr(0, 300));
  return false;
}

// Follows the logs of `kernel_id` over a raw unix-socket connection until a
// "tick" arrives, then hangs up.
bool FollowLogsUntilALine(const AgentProcess& agent, Tally& tally, const std::string& kernel_id) {
  RawClient client(agent.socket_path());
  const std::string what = "logs follow of " + kernel_id;
  if (!client.connected() ||
      !client.Send("GET /v1/kernels/" + kernel_id + "/logs?follow=1&tail=1 HTTP/1.1\r\nHost: soak\r\n\r\n")) {
    tally.Fail(what + ": cannot connect to " + agent.socket_path());
    return false;
  }
  bool closed = false;
  const std::string got = client.Read(std::chrono::seconds(10), &closed, "tick");
  if (got.rfind("HTTP/1.1 200", 0) != 0 || got.find("tick") == std::string::npos) {
    tally.Fail(what + ": no line within 10 s" + (closed ? " (the agent closed the stream)" : "") + "; got: " +
               got.substr(0, 300));
    return false;
  }
  return true;
}

// One kernel's life: create, execs, logs, logs followed (those of them
// picked in `parts`), delete.
void ChurnOnce(const AgentProcess& agent, Tally& tally, const std::string& kernel_id, const Parts& parts) {
  nlohmann::json request = KernelRequestBody(kernel_id, kKernelMemory);
  request["command"] = {"sh", "-c", kKernelScript};
  if (!Expect(agent, tally, "create", "POST", "/v1/kernels", request.dump(), 201)) return;
  tally.Count("create");
  const std::string path = "/v1/kernels/" + kernel_id;
  for (int i = 0; parts.contains("exec") && i < kExecsPerKernel; ++i) {
    HttpResponse res;
    if (!Expect(agent, tally, "exec", "POST", path + "/exec", R"({"command":["echo","soak"]})", 200, &res)) continue;
    const nlohmann::json answer = nlohmann::json::parse(res.body, nullptr, false);
    if (answer.is_discarded() || answer.value("exit_code", -1) != 0 || answer.value("stdout", "") != "soak\n")
      tally.Fail("exec in " + kernel_id + ": expected exit code 0 and stdout \"soak\\n\", got " + res.body.substr(0, 300));
    else
      tally.Count("exec");
  }
  if (parts.contains("logs") && Expect(agent, tally, "logs", "GET", path + "/logs?tail=10", "", 200))
    tally.Count("logs");
  if (parts.contains("follow") && FollowLogsUntilALine(agent, tally, kernel_id)) tally.Count("logs follow");
  if (Expect(agent, tally, "delete", "DELETE", path, "", 200)) tally.Count("delete");
}

// Holds a /v1/events stream open, reading and counting its events, until
// `stop`; with `reconnect_every` > 0, hangs up and reconnects that often.
void Subscribe(const AgentProcess& agent, Tally& tally, const std::atomic<bool>& stop, int index,
               std::chrono::milliseconds reconnect_every, std::atomic<long>& events) {
  const std::string who = "event subscriber " + std::to_string(index);
  while (!stop) {
    RawClient client(agent.port());
    const std::string request = "GET /v1/events HTTP/1.1\r\nHost: soak\r\nAuthorization: Bearer " +
                                agent.options().token + "\r\n\r\n";
    if (!client.connected() || !client.Send(request)) {
      tally.Fail(who + ": cannot connect to port " + std::to_string(agent.port()));
      return;
    }
    const std::string head = client.Read(std::chrono::seconds(10), nullptr, "\r\n\r\n");
    if (head.rfind("HTTP/1.1 200", 0) != 0) {
      tally.Fail(who + ": " + head.substr(0, 300));
      return;
    }
    tally.Count("events connect");
    std::string pending = head.substr(head.find("\r\n\r\n") + 4);
    const auto hang_up = Clock::now() + reconnect_every;
    while (!stop && (reconnect_every.count() == 0 || Clock::now() < hang_up)) {
      bool closed = false;
      pending += client.Read(std::chrono::milliseconds(200), &closed);
      size_t at = 0;
      for (size_t found; (found = pending.find("event: ", at)) != std::string::npos; at = found + 7) ++events;
      pending.erase(0, std::max(at, pending.size() > 6 ? pending.size() - 6 : 0));
      if (closed) {
        tally.Fail(who + ": the agent closed the event stream");
        return;
      }
    }
  }
}

// Sends a whole GET /health on TCP one byte at a time; the answer must be 200.
void SlowRequest(const AgentProcess& agent, Tally& tally) {
  RawClient client(agent.port());
  const std::string request = "GET /health HTTP/1.1\r\nHost: soak\r\nConnection: close\r\n\r\n";
  for (char byte : request) {
    if (!client.connected() || !client.Send(std::string_view(&byte, 1))) {
      tally.Fail("slow client: the agent hung up on a request sent a byte every 10 ms");
      return;
    }
    std::this_thread::sleep_for(kSlowByteEvery);
  }
  const std::string answer = client.Read(std::chrono::seconds(5), nullptr, "\r\n\r\n");
  if (answer.rfind("HTTP/1.1 200", 0) != 0)
    tally.Fail("slow client: expected HTTP/1.1 200, got: " + answer.substr(0, 300));
  else
    tally.Count("slow request");
}

// Connects on TCP, sends half a request (or nothing when `silent`) and waits:
// the agent must close the connection at its request-timeout.
void IdleConnection(const AgentProcess& agent, Tally& tally, bool silent) {
  RawClient client(agent.port());
  if (!client.connected() || (!silent && !client.Send("GET /health HTTP/1.1\r\nHost: so"))) {
    tally.Fail("idle client: cannot connect to port " + std::to_string(agent.port()));
    return;
  }
  bool closed = false;
  client.Read(kRequestTimeoutMs + std::chrono::seconds(5), &closed);
  if (!closed)
    tally.Fail(std::string("idle client (") + (silent ? "silent" : "half a request") +
               "): still open 5 s past the request-timeout of " + kRequestTimeout);
  else
    tally.Count(silent ? "idle cut (silent)" : "idle cut (half a request)");
}

// GET /health on the unix socket every kProbeEvery until `stop` or `count`
// calls (0: no limit); non-200 answers are failures.
Samples Probe(const AgentProcess& agent, Tally& tally, const std::atomic<bool>& stop, int count) {
  const HttpClient client = HttpClient::Unix(agent.socket_path());
  Samples samples;
  while (!stop && (count == 0 || static_cast<int>(samples.size()) < count)) {
    const auto start = Clock::now();
    auto res = client.Request("GET", "/health", "", std::chrono::seconds(10));
    const auto end = Clock::now();
    if (!res.ok() || res->status != 200)
      tally.Fail("GET /health: " + (res.ok() ? "HTTP " + std::to_string(res->status) + ": " + res->body
                                             : res.status().message()));
    else
      samples.Add(Millis(start, end));
    std::this_thread::sleep_for(kProbeEvery);
  }
  return samples;
}

// Waits until the agent's threads and open files are back to `start` (or
// kIdleWait has passed); returns its footprint then and the seconds waited.
std::pair<Footprint, double> WaitUntilIdle(pid_t pid, const Footprint& start) {
  const auto begin = Clock::now();
  Footprint now = FootprintOf(pid);
  while (Clock::now() - begin < kIdleWait && (now.threads > start.threads || now.open_files > start.open_files)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    now = FootprintOf(pid);
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));  // let the last freed memory settle
  return {FootprintOf(pid), Millis(begin, Clock::now()) / 1000};
}

// The parts as "a, b, c".
std::string Join(const Parts& parts) {
  std::string text;
  for (const std::string& part : parts) text += (text.empty() ? "" : ", ") + part;
  return text;
}

void Run(const std::string& id, std::chrono::seconds duration, const Parts& parts) {
  testing::AgentOptions options = BenchAgentOptions(id);
  options.extra_toml = std::string("[api]\nrequest-timeout = \"") + kRequestTimeout + "\"\n";
  options.token = "bench-" + id;  // TCP clients other than /health need it
  const int churn_threads = std::min<int>(kMaxChurnThreads, static_cast<int>(
                                                                  Check(ParseCoreList(options.cores), "cores").size()));
  const bool churning = parts.contains("kernels") || parts.contains("exec") || parts.contains("logs") ||
                        parts.contains("follow");
  const int subscribers = (parts.contains("events") ? kSteadySubscribers : 0) +
                          (parts.contains("reconnect") ? kReconnectingSubscribers : 0);
  PrintHeader("bench_soak", options);
  if (parts.size() != std::size(kParts))
    std::printf("  parts of the mix: %s (the warm-up does every kind once all the same)\n", Join(parts).c_str());
  std::printf("  %lld s of churn: %d churn threads (create, %d execs, logs, logs followed, delete; %s, 1 core each), "
              "%d event subscribers held throughout and %d reconnecting, %d slow and %d idle clients "
              "(request-timeout %s), GET /health every %lld ms\n",
              static_cast<long long>(duration.count()), churning ? churn_threads : 0, kExecsPerKernel, kKernelMemory,
              parts.contains("events") ? kSteadySubscribers : 0, parts.contains("reconnect") ? kReconnectingSubscribers : 0,
              parts.contains("slow") ? kSlowClients : 0, parts.contains("idle") ? kIdleClients : 0, kRequestTimeout,
              static_cast<long long>(kProbeEvery.count()));
  std::fflush(stdout);
  AgentProcess agent(options);
  StartAgent(agent);

  // Warm-up: every kind of operation once, so that what the agent sets up
  // on first use is there before the start is measured.
  Tally warm_up;
  std::atomic<bool> stop{false};
  std::atomic<long> warm_up_events{0};
  {
    std::jthread subscriber([&] {
      Subscribe(agent, warm_up, stop, 0, std::chrono::milliseconds(0), warm_up_events);
    });
    ChurnOnce(agent, warm_up, "warm-up", Parts(std::begin(kParts), std::end(kParts)));
    SlowRequest(agent, warm_up);
    IdleConnection(agent, warm_up, /*silent=*/true);
    stop = true;
  }
  if (!warm_up.errors().empty()) throw BenchFailure("warm-up: " + warm_up.errors().front());
  std::this_thread::sleep_for(std::chrono::seconds(2));  // the warm-up's streams end on the agent's side
  const Footprint start = FootprintOf(agent.pid());
  std::printf("  agent at start (after warm-up):   %s\n", Describe(start).c_str());
  std::fflush(stdout);

  Tally tally;
  stop = false;
  const Samples quiet = Probe(agent, tally, stop, kQuietProbes);

  std::atomic<long> events{0};
  Samples churn;
  {
    std::vector<std::jthread> threads;
    for (int w = 0; churning && w < churn_threads; ++w)
      threads.emplace_back([&, w] {
        for (long n = 0; !stop; ++n)
          ChurnOnce(agent, tally, "s" + std::to_string(w) + "-" + std::to_string(n), parts);
      });
    for (int i = 0; i < kSteadySubscribers + kReconnectingSubscribers; ++i) {
      const bool steady = i < kSteadySubscribers;
      if (!parts.contains(steady ? "events" : "reconnect")) continue;
      threads.emplace_back([&, i, steady] {
        Subscribe(agent, tally, stop, i, std::chrono::milliseconds(steady ? 0 : 2000 + 1000 * i), events);
      });
    }
    for (int i = 0; parts.contains("slow") && i < kSlowClients; ++i)
      threads.emplace_back([&] {
        while (!stop) SlowRequest(agent, tally);
      });
    for (int i = 0; parts.contains("idle") && i < kIdleClients; ++i)
      threads.emplace_back([&, i] {
        for (bool silent = i % 2 == 0; !stop; silent = !silent) IdleConnection(agent, tally, silent);
      });
    if (parts.contains("probe")) threads.emplace_back([&] { churn = Probe(agent, tally, stop, 0); });

    const auto end = Clock::now() + duration;
    try {
      while (Clock::now() < end) {
        ThrowIfInterrupted();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    } catch (...) {
      stop = true;
      throw;
    }
    stop = true;
  }
  tally.Count("events received", events);
  tally.Count("GET /health", static_cast<long>(quiet.size() + churn.size()));

  const auto [end, waited] = WaitUntilIdle(agent.pid(), start);
  const auto listed = CallAgent(agent, "GET", "/v1/kernels", nullptr, 200);
  std::printf("  agent at end (idle after %.1f s): %s; %zu kernels listed\n", waited, Describe(end).c_str(),
              listed["kernels"].size());
  std::printf("  operations:\n");
  for (const auto& [kind, n] : tally.counts()) std::printf("    %-28s %8ld\n", kind.c_str(), n);
  const std::vector<std::string> errors = tally.errors();
  std::printf("  unexpected failures: %zu\n", errors.size());
  for (size_t i = 0; i < errors.size() && i < 20; ++i) std::printf("    %s\n", errors[i].c_str());
  if (parts.contains("probe"))
    std::printf("  GET /health unix: quiet p50 %6.2f ms  p99 %6.2f ms (n=%zu) | churn p50 %6.2f ms  p99 %6.2f ms (n=%zu) "
                "| ratio churn/quiet p50 %.2f  p99 %.2f\n",
                quiet.Median(), quiet.Percentile(99), quiet.size(), churn.Median(), churn.Percentile(99), churn.size(),
                churn.Median() / std::max(quiet.Median(), 0.001),
                churn.Percentile(99) / std::max(quiet.Percentile(99), 0.001));

  std::vector<std::string> failed;
  const double rss_growth_mib = (end.rss_kib - start.rss_kib) / 1024.0;
  std::printf("  checks: resident memory %+.1f MiB (limit +%.0f MiB), open files %+ld, threads %+ld (limit +0 each), "
              "unexpected failures %zu (limit 0), kernels left %zu (limit 0)\n",
              rss_growth_mib, kRssGrowthLimitMiB, end.open_files - start.open_files, end.threads - start.threads,
              errors.size(), listed["kernels"].size());
  std::fflush(stdout);
  if (rss_growth_mib > kRssGrowthLimitMiB) failed.push_back("resident memory grew by " + std::to_string(rss_growth_mib) + " MiB");
  if (end.open_files > start.open_files)
    failed.push_back("open files grew (" + testing::GrownFileKinds(start.file_kinds, end.file_kinds) + ")");
  if (end.threads > start.threads) failed.push_back("threads grew");
  if (!errors.empty()) failed.push_back(std::to_string(errors.size()) + " operations failed");
  if (!listed["kernels"].empty()) failed.push_back("kernels are left");
  if (churning && tally.counts()["create"] == 0) failed.push_back("no kernel was created");
  if (churning && subscribers > 0 && events == 0) failed.push_back("no event reached a subscriber");
  if (!failed.empty()) {
    std::string text;
    for (const auto& f : failed) text += (text.empty() ? "" : "; ") + f;
    throw BenchFailure(text);
  }
  std::printf("  all checks met\n");
}

// The command line: --duration in seconds and --parts.
struct Arguments {
  std::chrono::seconds duration{180};
  Parts parts{std::begin(kParts), std::end(kParts)};
};

// Parses --parts' value, "exec,logs": each a name of kParts; exits 2 on a bad one.
Parts ParseParts(const std::string& value, const char* usage) {
  Parts parts;
  for (size_t at = 0; at <= value.size();) {
    const size_t comma = std::min(value.find(',', at), value.size());
    const std::string part = value.substr(at, comma - at);
    if (std::find(std::begin(kParts), std::end(kParts), part) == std::end(kParts)) {
      std::fprintf(stderr, "bench_soak: --parts \"%s\": unknown part \"%s\"\n%s", value.c_str(), part.c_str(), usage);
      std::exit(2);
    }
    parts.insert(part);
    at = comma + 1;
  }
  return parts;
}

// Parses the command line; exits 2 on a bad argument.
Arguments ParseArguments(int argc, char** argv) {
  const char* usage =
      "usage: bench_soak [--duration SECONDS] [--parts PART,...]\n"
      "  --duration  seconds of churn, 1 to 86400 (default 180)\n"
      "  --parts     the parts of the mix to run (default all): kernels (create, delete), exec, logs, follow\n"
      "              (done in each kernel), events (held subscribers), reconnect (reconnecting subscribers),\n"
      "              slow, idle (clients), probe (GET /health every 10 ms)\n"
      "see bench/README.md\n";
  Arguments arguments;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    if (arg == "--help" || arg == "-h") {
      std::printf("%s", usage);
      std::exit(0);
    }
    if (arg == "--parts" && i + 1 < argc) {
      arguments.parts = ParseParts(argv[++i], usage);
      continue;
    }
    if (arg.rfind("--parts=", 0) == 0) {
      arguments.parts = ParseParts(arg.substr(8), usage);
      continue;
    }
    if (arg == "--duration" && i + 1 < argc) value = argv[++i];
    else if (arg.rfind("--duration=", 0) == 0) value = arg.substr(11);
    else {
      std::fprintf(stderr, "bench_soak: unknown argument \"%s\"\n%s", arg.c_str(), usage);
      std::exit(2);
    }
    char* parsed_end = nullptr;
    const long seconds = std::strtol(value.c_str(), &parsed_end, 10);
    if (value.empty() || *parsed_end != '\0' || seconds < 1 || seconds > 86400) {
      std::fprintf(stderr, "bench_soak: --duration \"%s\": expected whole seconds from 1 to 86400\n%s", value.c_str(), usage);
      std::exit(2);
    }
    arguments.duration = std::chrono::seconds(seconds);
  }
  return arguments;
}

}  // namespace
}  // namespace slotd::bench

int main(int argc, char** argv) {
  using namespace slotd::bench;
  const Arguments arguments = ParseArguments(argc, argv);
  const std::string agent_id = UniqueAgentId("soak");
  return RunBenchmark("bench_soak", {agent_id}, [&] { Run(agent_id, arguments.duration, arguments.parts); });
}
