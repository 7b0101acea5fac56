#include "testing/engine_proxy.h"

#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string_view>

#include "api/http_server.h"  // http::PercentDecode
#include "common/process_limits.h"

namespace slotd {
namespace {

constexpr size_t kMaxHead = 64 * 1024;  // a longer request head stops the recording of its connection
constexpr char kUnixPrefix[] = "unix://";

sockaddr_un UnixAddress(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  return addr;
}

int ConnectUnix(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const sockaddr_un addr = UnixAddress(path);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Splits the bytes a client sends into requests, as they arrive in pieces
// cut anywhere, and hands each request's head to `on_request`.
class RequestReader {
 public:
  explicit RequestReader(std::function<void(EngineProxy::Request)> on_request) : on_request_(std::move(on_request)) {}

  void Feed(std::string_view bytes) {
    if (state_ == State::kRaw) return;
    buffer_.append(bytes);
    size_t pos = 0;
    while (Step(pos)) {
    }
    buffer_.erase(0, pos);
  }

 private:
  enum class State { kHead, kBody, kChunkSize, kChunkData, kTrailer, kRaw };

  // Consumes what it can of buffer_ from `pos`; false when it needs more bytes.
  bool Step(size_t& pos) {
    switch (state_) {
      case State::kHead: {
        const size_t end = buffer_.find("\r\n\r\n", pos);
        if (end == std::string::npos) {
          if (buffer_.size() - pos > kMaxHead) state_ = State::kRaw;
          return false;
        }
        ParseHead(std::string_view(buffer_).substr(pos, end - pos));
        pos = end + 4;
        return state_ != State::kRaw;
      }
      case State::kBody:
      case State::kChunkData: {
        const size_t take = std::min<size_t>(left_, buffer_.size() - pos);
        pos += take;
        left_ -= take;
        if (left_ > 0) return false;
        state_ = state_ == State::kBody ? State::kHead : State::kChunkSize;
        return true;
      }
      case State::kChunkSize:
      case State::kTrailer: {
        const size_t end = buffer_.find("\r\n", pos);
        if (end == std::string::npos) return false;
        const std::string line = buffer_.substr(pos, end - pos);
        pos = end + 2;
        if (state_ == State::kTrailer) {
          if (line.empty()) state_ = State::kHead;
          return true;
        }
        char* parsed_end = nullptr;
        const unsigned long long size = std::strtoull(line.c_str(), &parsed_end, 16);
        if (parsed_end == line.c_str()) {
          state_ = State::kRaw;
          return false;
        }
        if (size == 0) {
          state_ = State::kTrailer;
        } else {
          left_ = size + 2;  // the data and its CRLF
          state_ = State::kChunkData;
        }
        return true;
      }
      case State::kRaw:
        return false;
    }
    return false;
  }

  // Records the request of `head` (request line and headers) and sets the
  // state for what follows it.
  void ParseHead(std::string_view head) {
    const size_t line_end = head.find("\r\n");
    const std::string_view line = head.substr(0, line_end);
    const size_t first_space = line.find(' ');
    const size_t second_space = line.find(' ', first_space + 1);
    if (first_space == std::string_view::npos || second_space == std::string_view::npos) {
      state_ = State::kRaw;
      return;
    }
    EngineProxy::Request request;
    request.method = std::string(line.substr(0, first_space));
    request.target = std::string(line.substr(first_space + 1, second_space - first_space - 1));
    request.container = EngineProxy::NamedContainer(request.target);

    bool chunked = false, upgrade = false;
    left_ = 0;
    for (size_t at = line_end; at != std::string_view::npos && at < head.size();) {
      const size_t next = head.find("\r\n", at + 2);
      const std::string_view header = head.substr(at + 2, next == std::string_view::npos ? head.npos : next - at - 2);
      at = next;
      const size_t colon = header.find(':');
      if (colon == std::string_view::npos) continue;
      const std::string name = Lower(header.substr(0, colon));
      const std::string value = Lower(header.substr(colon + 1));
      if (name == "content-length") left_ = std::strtoull(value.c_str(), nullptr, 10);
      if (name == "transfer-encoding" && value.find("chunked") != std::string::npos) chunked = true;
      if (name == "upgrade" || (name == "connection" && value.find("upgrade") != std::string::npos)) upgrade = true;
    }
    on_request_(std::move(request));
    if (upgrade)
      state_ = State::kRaw;
    else if (chunked)
      state_ = State::kChunkSize;
    else
      state_ = left_ > 0 ? State::kBody : State::kHead;
  }

  const std::function<void(EngineProxy::Request)> on_request_;
  State state_ = State::kHead;
  std::string buffer_;  // bytes received and not yet consumed
  size_t left_ = 0;     // bytes of the current body or chunk still to come
};

}  // namespace

namespace {

// Lowers this process's hard (and soft) RLIMIT_NOFILE and RLIMIT_NPROC to
// those of the process listening on `socket_path`, where higher.
void LowerLimitsTo(const std::string& socket_path) {
  const pid_t engine = UnixSocketListenerPid(socket_path);
  if (engine <= 0) return;
  for (const auto& [resource, row] : {std::pair{RLIMIT_NOFILE, "Max open files"}, std::pair{RLIMIT_NPROC, "Max processes"}}) {
    const std::optional<int64_t> limit = ProcessHardLimit(engine, row);
    rlimit own{};
    if (!limit || ::getrlimit(resource, &own) != 0) continue;
    const rlim_t theirs = static_cast<rlim_t>(*limit);
    if (own.rlim_max != RLIM_INFINITY && own.rlim_max <= theirs) continue;
    own.rlim_max = theirs;
    own.rlim_cur = std::min(own.rlim_cur, theirs);
    ::setrlimit(resource, &own);
  }
}

}  // namespace

EngineProxy::EngineProxy(const std::string& engine_host)
    : engine_path_(engine_host.rfind(kUnixPrefix, 0) == 0 ? engine_host.substr(std::strlen(kUnixPrefix)) : ""),
      dir_("slotd-engine-proxy"),
      socket_path_(dir_.root() + "/engine.sock") {
  if (engine_path_.empty())
    throw std::runtime_error("the engine proxy forwards to a unix socket only; the engine is at \"" + engine_host +
                             "\" (set DOCKER_HOST=unix:///path/to/docker.sock)");
  listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const sockaddr_un addr = UnixAddress(socket_path_);
  if (listener_ < 0 || ::bind(listener_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener_, 128) != 0) {
    const std::string why = std::strerror(errno);
    if (listener_ >= 0) ::close(listener_);
    throw std::runtime_error("engine proxy: cannot listen on " + socket_path_ + ": " + why);
  }
  LowerLimitsTo(engine_path_);
  acceptor_ = std::thread([this] { Accept(); });
}

EngineProxy::~EngineProxy() {
  stop_ = true;
  ::shutdown(listener_, SHUT_RDWR);
  acceptor_.join();
  for (auto& connection : connections_) connection.pump.join();
  ::close(listener_);
}

std::vector<EngineProxy::Request> EngineProxy::Requests() const {
  MutexLock lock(mutex_);
  return requests_;
}

int EngineProxy::CallsNaming(const std::set<std::string>& containers) const {
  MutexLock lock(mutex_);
  int calls = 0;
  for (const auto& request : requests_) calls += !request.container.empty() && containers.count(request.container);
  return calls;
}

std::string EngineProxy::NamedContainer(const std::string& target) {
  std::string_view path = std::string_view(target).substr(0, target.find('?'));
  const std::string_view query =
      target.find('?') == std::string::npos ? std::string_view() : std::string_view(target).substr(target.find('?') + 1);
  if (path.rfind("/v1.", 0) == 0) path.remove_prefix(std::min(path.size(), path.find('/', 1)));
  constexpr std::string_view kContainers = "/containers/";
  if (path.rfind(kContainers, 0) != 0) return "";
  path.remove_prefix(kContainers.size());
  const std::string_view first = path.substr(0, path.find('/'));
  if (first == "create") {
    for (size_t at = 0; at <= query.size();) {
      const size_t amp = std::min(query.size(), query.find('&', at));
      const std::string_view pair = query.substr(at, amp - at);
      if (pair.rfind("name=", 0) == 0) return http::PercentDecode(pair.substr(5), /*plus_is_space=*/true);
      at = amp + 1;
    }
    return "";
  }
  // /containers/json (the list) and /containers/prune name none.
  if (first.empty() || (first == "json" && first.size() == path.size()) || first == "prune") return "";
  return http::PercentDecode(first);
}

void EngineProxy::Record(Request request) {
  MutexLock lock(mutex_);
  requests_.push_back(std::move(request));
}

void EngineProxy::Accept() {
  while (!stop_) {
    connections_.remove_if([](Connection& connection) {
      if (!connection.done) return false;
      connection.pump.join();
      return true;
    });
    pollfd p{listener_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    const int engine = ConnectUnix(engine_path_);
    if (engine < 0) {
      ::close(client);  // the client sees the engine as unreachable
      continue;
    }
    Connection& connection = connections_.emplace_back();
    connection.pump = std::thread([this, client, engine, &connection] { Pump(client, engine, connection.done); });
  }
}

void EngineProxy::Pump(int client, int engine, std::atomic<bool>& done) {
  RequestReader reader([this](Request request) { Record(std::move(request)); });
  char buffer[65536];
  bool open = true;
  while (open && !stop_) {
    if (frozen_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    pollfd p[2] = {{client, POLLIN, 0}, {engine, POLLIN, 0}};
    if (::poll(p, 2, 50) <= 0) continue;
    for (int i = 0; i < 2 && open; ++i) {
      if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = ::recv(p[i].fd, buffer, sizeof buffer, 0);
      if (n <= 0) {
        open = false;
        break;
      }
      const std::string_view bytes(buffer, static_cast<size_t>(n));
      if (i == 0) reader.Feed(bytes);
      open = SendAll(p[1 - i].fd, bytes);
    }
  }
  ::close(client);
  ::close(engine);
  done = true;
}

}  // namespace slotd
