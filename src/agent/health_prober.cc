#include "agent/health_prober.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdlib>

#include <spdlog/spdlog.h>


namespace slotd {

namespace {

using std::chrono::milliseconds;

// `text` cut to what a kernel's record keeps.
std::string Bounded(std::string text) {
  if (text.size() > kMaxHealthOutput) text.resize(kMaxHealthOutput);
  return text;
}

using SteadyTime = std::chrono::steady_clock::time_point;

// Milliseconds left until `deadline`, at least 0.
int MillisLeft(SteadyTime deadline) {
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

// Waits until `fd` is ready for `events`, by `deadline`: OK, or why not
// (`what` names the step for the message).
Status WaitFor(int fd, short events, SteadyTime deadline, const char* what, milliseconds timeout) {
  pollfd p{fd, events, 0};
  int ready;
  do {
    ready = ::poll(&p, 1, MillisLeft(deadline));
  } while (ready < 0 && errno == EINTR);
  if (ready == 0) return Status::DeadlineExceeded(std::string(what) + ": no answer within " + std::to_string(timeout.count()) + " ms");
  if (ready < 0) return Status::Unavailable(std::string(what) + ": " + std::strerror(errno));
  return Status::Ok();
}

// A non-blocking TCP socket, made by `open_socket`, connected to
// 127.0.0.1:port by `deadline`; -1 with `why`.
int ConnectBy(int port, SteadyTime deadline, milliseconds timeout, const HealthProber::SocketOpener& open_socket,
              Status& why) {
  const int fd = open_socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (fd < 0) return why = Status::Internal(std::string("socket: ") + std::strerror(errno)), -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) return fd;
  if (errno != EINPROGRESS) {
    why = Status::Unavailable(std::string("connect: ") + std::strerror(errno));
  } else if (why = WaitFor(fd, POLLOUT, deadline, "connect", timeout); why.ok()) {
    int error = 0;
    socklen_t len = sizeof error;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 && error == 0) return fd;
    why = Status::Unavailable(std::string("connect: ") + std::strerror(error ? error : errno));
  }
  ::close(fd);
  return -1;
}

// The most of an answer's head an HTTP check reads.
constexpr size_t kMaxAnswerHead = 16 * 1024;

// An HTTP check's answer: its status and the start of its body.
struct HttpAnswer {
  int status = 0;
  std::string body;  // as sent (not decoded), at most kMaxHealthOutput bytes
};

// Reads the answer to the request sent on `fd`, by `deadline`. A passing
// status ends the read at once; a failing one reads the start of the body
// for the message, as much as comes by the deadline or the end.
Result<HttpAnswer> ReadAnswer(int fd, SteadyTime deadline, milliseconds timeout) {
  std::string received;
  size_t head_end = std::string::npos;
  HttpAnswer answer;
  char buffer[4096];
  while (true) {
    if (head_end == std::string::npos) {
      head_end = received.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        // "HTTP/1.1 200 OK": the status is the three digits after the first space.
        const size_t space = received.find(' ');
        if (received.compare(0, 5, "HTTP/") != 0 || space == std::string::npos || space + 4 > head_end ||
            !std::isdigit(static_cast<unsigned char>(received[space + 1])) ||
            !std::isdigit(static_cast<unsigned char>(received[space + 2])) ||
            !std::isdigit(static_cast<unsigned char>(received[space + 3]))) {
          return Status::InvalidArgument("not an HTTP answer: " + received.substr(0, std::min<size_t>(head_end, 80)));
        }
        answer.status = std::stoi(received.substr(space + 1, 3));
        if (answer.status >= 200 && answer.status < 400) return answer;
        received.erase(0, head_end + 4);
      } else if (received.size() > kMaxAnswerHead) {
        return Status::InvalidArgument("the answer's head is longer than " + std::to_string(kMaxAnswerHead) + " bytes");
      }
    }
    if (head_end != std::string::npos) {
      answer.body = received.substr(0, kMaxHealthOutput);
      if (received.size() >= kMaxHealthOutput) return answer;
    }
    Status ready = WaitFor(fd, POLLIN, deadline, "answer", timeout);
    if (!ready.ok()) {
      if (head_end != std::string::npos) return answer;  // a failing status, and what came of its body
      return ready;
    }
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return Status::Unavailable(std::string("answer: ") + std::strerror(errno));
    if (n == 0) {
      if (head_end != std::string::npos) return answer;
      return Status::Unavailable("the connection closed before a whole answer's head came");
    }
    received.append(buffer, static_cast<size_t>(n));
  }
}

// GET `path` from 127.0.0.1:port on a socket `open_socket` makes, the whole
// exchange within `timeout`: HTTP/1.1, one request, then the connection is
// closed. Its own few calls rather than a general client: a check runs
// every second for each of hundreds of kernels, and needs only the status.
Result<HttpAnswer> HttpGet(int port, const std::string& path, milliseconds timeout,
                           const HealthProber::SocketOpener& open_socket) {
  const SteadyTime deadline = std::chrono::steady_clock::now() + timeout;
  Status why;
  const int fd = ConnectBy(port, deadline, timeout, open_socket, why);
  if (fd < 0) return why;
  // The path was checked when the request came: printable ASCII, no spaces.
  const std::string request = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                              "\r\nUser-Agent: slotd-health-check\r\nAccept: */*\r\nConnection: close\r\n\r\n";
  size_t sent = 0;
  Status send_failed;
  while (sent < request.size() && send_failed.ok()) {
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n >= 0) {
      sent += static_cast<size_t>(n);
    } else if (errno == EAGAIN || errno == EINTR) {
      send_failed = WaitFor(fd, POLLOUT, deadline, "request", timeout);
    } else {
      send_failed = Status::Unavailable(std::string("request: ") + std::strerror(errno));
    }
  }
  if (!send_failed.ok()) {
    ::close(fd);
    return send_failed;
  }
  Result<HttpAnswer> answer = ReadAnswer(fd, deadline, timeout);
  // What of the answer has come already is read (at most kDrain), so that
  // the close does not reset the connection under a server still sending.
  constexpr size_t kDrain = 64 * 1024;
  char rest[4096];
  for (size_t drained = 0; drained < kDrain;) {
    const ssize_t n = ::recv(fd, rest, sizeof rest, MSG_DONTWAIT);
    if (n <= 0) break;
    drained += static_cast<size_t>(n);
  }
  ::close(fd);
  return answer;
}

// socket(2), close-on-exec.
int PlainSocket(int domain, int type, int protocol) { return ::socket(domain, type | SOCK_CLOEXEC, protocol); }

}  // namespace

HealthProber::HealthProber(ContainerEngine& engine)
    : engine_(engine), own_netns_(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) {}

HealthProber::~HealthProber() {
  if (own_netns_ >= 0) ::close(own_netns_);
  MutexLock lock(netns_mutex_);
  for (const auto& [id, held] : netns_) ::close(held.fd);
}

void HealthProber::Forget(const std::string& container_id) {
  MutexLock lock(netns_mutex_);
  auto it = netns_.find(container_id);
  if (it == netns_.end()) return;
  ::close(it->second.fd);
  netns_.erase(it);
}

ProbeResult HealthProber::Probe(const HealthRule& rule, const std::string& container_id,
                                const ProbeAddress& address) {
  if (rule.check.kind == ProbeKind::kExec) return Exec(rule, container_id);
  if (address.kernel_netns) return ConnectInside(rule, container_id, address.port);
  return Connect(rule, address.port, PlainSocket);
}

ProbeResult HealthProber::Exec(const HealthRule& rule, const std::string& container_id) const {
  // The engine counts whole seconds.
  const auto timeout = std::chrono::seconds((rule.timeout.count() + 999) / 1000);
  Result<ExecResult> ran = engine_.Exec(container_id, rule.check.command, timeout, nullptr, nullptr);
  if (!ran.ok()) return {false, Bounded(ran.status().message())};
  std::string output = ran->stdout_text + ran->stderr_text;
  if (ran->exit_code != 0) output = "exit code " + std::to_string(ran->exit_code) + (output.empty() ? "" : ": ") + output;
  return {ran->exit_code == 0, Bounded(std::move(output))};
}

ProbeResult HealthProber::Connect(const HealthRule& rule, int port, const HealthProber::SocketOpener& open_socket) {
  const std::string where = "127.0.0.1:" + std::to_string(port);
  if (rule.check.kind == ProbeKind::kTcp) {
    Status why;
    const int fd = ConnectBy(port, std::chrono::steady_clock::now() + rule.timeout, rule.timeout, open_socket, why);
    if (fd < 0) return {false, Bounded(where + ": " + why.message())};
    ::close(fd);
    return {true, ""};
  }
  const Result<HttpAnswer> answer = HttpGet(port, rule.check.path, rule.timeout, open_socket);
  if (!answer.ok()) return {false, Bounded("GET " + rule.check.path + " on " + where + ": " + answer.status().message())};
  const bool passed = answer->status >= 200 && answer->status < 400;
  return {passed, Bounded("GET " + rule.check.path + ": HTTP " + std::to_string(answer->status) +
                          (passed || answer->body.empty() ? "" : ": " + answer->body))};
}

int HealthProber::NetnsOf(const std::string& container_id, std::string& why) {
  {
    MutexLock lock(netns_mutex_);
    auto it = netns_.find(container_id);
    if (it != netns_.end()) {
      // The namespace held stays alive, so no other namespace has its inode;
      // a PID that ended, or was reused, names another or none.
      struct stat now {};
      const std::string path = "/proc/" + std::to_string(it->second.pid) + "/ns/net";
      if (::stat(path.c_str(), &now) == 0 && now.st_ino == it->second.inode) return ::dup(it->second.fd);
      ::close(it->second.fd);
      netns_.erase(it);
    }
  }
  Result<ContainerInfo> info = engine_.Inspect(container_id);
  if (!info.ok()) return why = info.status().message(), -1;
  if (info->pid <= 0) return why = "the container is not running", -1;
  const std::string path = "/proc/" + std::to_string(info->pid) + "/ns/net";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat opened {};
  if (fd < 0 || ::fstat(fd, &opened) != 0) {
    why = "cannot open the kernel's network namespace " + path + ": " + std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return -1;
  }
  MutexLock lock(netns_mutex_);
  auto [it, added] = netns_.try_emplace(container_id, HeldNetns{info->pid, fd, opened.st_ino});
  if (!added) ::close(fd);  // another probe of it opened one meanwhile: keep that one
  return ::dup(it->second.fd);
}

ProbeResult HealthProber::ConnectInside(const HealthRule& rule, const std::string& container_id, int port) {
  std::string why;
  const int ns = NetnsOf(container_id, why);
  if (ns < 0) return {false, Bounded(why)};
  std::string failure;
  const auto open_inside = [&](int domain, int type, int protocol) {
    return SocketInNetns(ns, domain, type, protocol, failure);
  };
  ProbeResult result = Connect(rule, port, open_inside);
  ::close(ns);
  if (!failure.empty()) result = {false, Bounded(failure)};
  return result;
}

int HealthProber::SocketInNetns(int ns, int domain, int type, int protocol, std::string& why) const {
  if (own_netns_ < 0) {
    why = "cannot check kernels on network \"none\": the agent could not open its own network namespace";
    return -1;
  }
  if (::setns(ns, CLONE_NEWNET) != 0) {
    why = std::string("cannot enter the kernel's network namespace (the agent needs CAP_SYS_ADMIN for checks of "
                      "kernels on network \"none\"): ") +
          std::strerror(errno);
    return -1;
  }
  const int fd = ::socket(domain, type | SOCK_CLOEXEC, protocol);
  const int socket_errno = errno;
  if (::setns(own_netns_, CLONE_NEWNET) != 0) {
    // This thread would go on inside a kernel's network: never.
    spdlog::critical("health check: cannot go back to the agent's network namespace: {}; stopping the agent",
                     std::strerror(errno));
    std::abort();
  }
  if (fd < 0) why = std::string("socket in the kernel's network namespace: ") + std::strerror(socket_errno);
  return fd;
}

}  // namespace slotd
