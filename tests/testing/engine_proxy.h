// EngineProxy: a Docker Engine API proxy on a unix socket of its own, in
// front of a real engine's unix socket, for tests and benchmarks that must
// see what a client asks the engine, or must make the engine hang.
//
// Every connection accepted is forwarded to a connection of its own to the
// engine, bytes passed through unchanged both ways, so streamed answers
// (events, logs, execs) and HTTP/1.1 keep-alive work as against the engine.
// The requests on the way in are parsed only as far as needed to record
// each one (method, target, the container it names) and to find where the
// next one starts: headers up to 64 KiB, bodies by Content-Length or
// chunked. After a request that asks for a protocol upgrade (an attach),
// or one it cannot parse, the rest of that connection passes through
// unrecorded.
//
// While frozen it accepts and holds connections and bytes but forwards
// nothing, as an engine stopped with SIGSTOP would.
//
// Thread-safe: the accessors may be called from any thread while requests
// flow. One thread accepts; each connection has a thread of its own until
// either side closes it.
#pragma once

#include <atomic>
#include <list>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "testing/temp_tree.h"

namespace slotd {

class EngineProxy {
 public:
  // One request a client sent through the proxy.
  struct Request {
    std::string method;
    std::string target;     // as sent: path and query, still percent-encoded
    std::string container;  // the container it names (see NamedContainer); "" when none
  };

  // Listens on a fresh socket in a new directory under the temp dir and
  // forwards to `engine_host`, which must be "unix:///path/to/docker.sock".
  // Throws std::runtime_error when `engine_host` is of another form or the
  // socket cannot be set up. Lowers this process's hard nofile and nproc
  // limits to the engine's where they are higher: a client that reads the
  // limits of the process serving its socket (DockerEngine on Podman) then
  // reads what the engine's runtime can set, as it would without the proxy.
  explicit EngineProxy(const std::string& engine_host);
  ~EngineProxy();  // closes every connection, removes the socket's directory
  EngineProxy(const EngineProxy&) = delete;
  EngineProxy& operator=(const EngineProxy&) = delete;

  // "unix://<the proxy's socket>", for a DockerEngine or a slotd config.
  std::string docker_host() const { return "unix://" + socket_path_; }

  // Holds (true) or releases (false) all traffic, on open and new connections.
  void Freeze(bool frozen) { frozen_ = frozen; }

  // Every request recorded so far, in the order they arrived (on one
  // connection; across connections, in the order their heads completed).
  std::vector<Request> Requests() const;

  // How many recorded requests name one of `containers` (ids or names).
  int CallsNaming(const std::set<std::string>& containers) const;

  // The container a request target names: the {id} of /containers/{id}/...
  // (after an optional /v1.NN version prefix), or the name= of
  // /containers/create, percent-decoded; "" for every other target.
  static std::string NamedContainer(const std::string& target);

 private:
  struct Connection {
    std::thread pump;
    std::atomic<bool> done{false};
  };

  void Accept();
  // Copies bytes both ways between `client` and `engine` until either closes.
  void Pump(int client, int engine, std::atomic<bool>& done);
  void Record(Request request);

  const std::string engine_path_;
  const TempTree dir_;
  const std::string socket_path_;
  int listener_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<bool> frozen_{false};
  std::thread acceptor_;
  std::list<Connection> connections_;  // the acceptor's only, until the destructor joins them

  mutable Mutex mutex_;
  std::vector<Request> requests_ GUARDED_BY(mutex_);
};

}  // namespace slotd
