#include "agent/health_prober.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <cstdlib>

#include <spdlog/spdlog.h>

#include "common/http_client.h"

namespace slotd {

namespace {

using std::chrono::milliseconds;

// `text` cut to what a kernel's record keeps.
std::string Bounded(std::string text) {
  if (text.size() > kMaxHealthOutput) text.resize(kMaxHealthOutput);
  return text;
}

// Connects a TCP socket, made by `open_socket`, to 127.0.0.1:port within
// `timeout`; OK or why not.
Status TcpConnect(int port, milliseconds timeout, const HttpClient::SocketOpener& open_socket) {
  const int fd = open_socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (fd < 0) return Status::Internal(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  Status result = Status::Ok();
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno != EINPROGRESS) {
      result = Status::Unavailable(std::string("connect: ") + std::strerror(errno));
    } else {
      pollfd p{fd, POLLOUT, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
      int error = 0;
      socklen_t len = sizeof error;
      if (ready == 0) {
        result = Status::DeadlineExceeded("connect: no answer within " + std::to_string(timeout.count()) + " ms");
      } else if (ready < 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0 || error != 0) {
        result = Status::Unavailable(std::string("connect: ") + std::strerror(error ? error : errno));
      }
    }
  }
  ::close(fd);
  return result;
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
  Result<ExecResult> ran = engine_.Exec(container_id, rule.check.command, timeout);
  if (!ran.ok()) return {false, Bounded(ran.status().message())};
  std::string output = ran->stdout_text + ran->stderr_text;
  if (ran->exit_code != 0) output = "exit code " + std::to_string(ran->exit_code) + (output.empty() ? "" : ": ") + output;
  return {ran->exit_code == 0, Bounded(std::move(output))};
}

ProbeResult HealthProber::Connect(const HealthRule& rule, int port, const HttpClient::SocketOpener& open_socket) {
  if (rule.check.kind == ProbeKind::kTcp) {
    const Status connected = TcpConnect(port, rule.timeout, open_socket);
    return {connected.ok(), connected.ok() ? "" : Bounded("127.0.0.1:" + std::to_string(port) + ": " +
                                                          connected.message())};
  }
  // The body is read and dropped: only the status counts, and a kernel may send anything.
  HttpClient client = HttpClient::Tcp("http://127.0.0.1:" + std::to_string(port));
  client.SetSocketOpener(open_socket);
  Result<HttpResponse> answer =
      client.RequestStreamed("GET", rule.check.path, "", rule.timeout, [](std::string_view) { return true; });
  if (!answer.ok()) return {false, Bounded(answer.status().message())};
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
