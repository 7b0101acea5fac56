#include "common/process_limits.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <charconv>
#include <fstream>
#include <sstream>

#include "common/unique_fd.h"

namespace slotd {

pid_t UnixSocketListenerPid(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un address{};
  if (!fd.valid() || path.size() >= sizeof(address.sun_path)) return 0;
  address.sun_family = AF_UNIX;
  path.copy(address.sun_path, path.size());
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) return 0;
  ucred peer{};
  socklen_t size = sizeof(peer);
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0) return 0;
  return peer.pid;
}

std::optional<int64_t> ProcessHardLimit(pid_t pid, std::string_view row) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/limits");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(row, 0) != 0) continue;
    std::istringstream fields(line.substr(row.size()));
    std::string soft, hard;
    fields >> soft >> hard;
    int64_t value = 0;
    const auto [end, error] = std::from_chars(hard.data(), hard.data() + hard.size(), value);
    if (error != std::errc() || end != hard.data() + hard.size() || value < 0) return std::nullopt;
    return value;
  }
  return std::nullopt;
}

}  // namespace slotd
