// Warm pools ([[pool]] in agent.toml): which creates a pool may serve, and
// the record of the warm kernels given to them.
//
// A warm kernel's container is created and started ahead of any request,
// with its final labels: an id the agent chose and an allocation reserved
// for the pool's shape. The engine never changes a container's labels, so
// what a create adds when it is given a warm kernel (its session id, its
// labels, its lifetime, restart policy, health check and idle rule) is kept
// beside the container, in one file per given kernel under
// <var-base-path>/warm-claims (WarmClaims). A file, not a second container
// nor a marker inside the kernel: it is written in a millisecond, where a
// container is hundreds; it is the agent's own, where the kernel could write
// a marker in its own filesystem; and it is written whole and fsynced before
// the create is answered, so an agent killed at any point either finds it
// (the kernel is the create's) or does not (the kernel is still warm, and
// the create was never answered).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/kernel.h"
#include "common/status.h"
#include "config/config.h"

namespace slotd {

// One [[pool]] entry as the agent keeps it.
struct WarmPool {
  std::string name;
  // Its kernels' request: the entry's image, command and resources, nothing
  // else (no id, env, mounts or policies).
  CreateRequest shape;
  int count = 0;  // how many WARM kernels it keeps
};

// The pools of `config`, each shape read as a create request's image and
// resources are (ParseRequestWithin): kInvalidArgument naming the pool and
// the field for a shape no request could ask for, or a name given twice.
Result<std::vector<WarmPool>> WarmPoolsOf(const Config& config);

// Whether `request` asks for the kernel `pool` makes: its image, command
// (none: the image's) and exactly its resources.
bool HasPoolsShape(const CreateRequest& request, const WarmPool& pool);

// Whether one of `pools` keeps a kernel made for pool `pool_name` with
// request `request`: a pool of that name whose shape it has (HasPoolsShape).
bool PoolKeeps(const std::vector<WarmPool>& pools, const std::string& pool_name, const CreateRequest& request);

// Whether a warm kernel of `pool` may serve `request`: the request named no
// kernel id (the pool's kernels have ids the agent chose), asks for the
// pool's image, its command (none: the image's) and exactly its resources,
// and for nothing a running container cannot be given afterwards: no env,
// no mounts, no stop signal or timeout of its own (the engine's are set at
// create), no pull policy.
bool MatchesPool(const CreateRequest& request, const WarmPool& pool);

// The records of warm kernels given to creates: <dir>/<kernel id>.json.
// Thread-safe (each call works on its own file).
class WarmClaims {
 public:
  // What a create gave a warm kernel.
  struct Claim {
    CreateRequest request;  // the create's, with the warm kernel's id
    int64_t given_at = 0;   // unix seconds: the kernel's creation as its user sees it
    std::optional<int64_t> deadline;  // unix seconds when its lifetime runs out; unset: never
  };

  // `dir` is <var-base-path>/warm-claims; empty: nothing is recorded (every
  // call succeeds and nothing is found), for an agent with no var-base-path.
  explicit WarmClaims(std::string dir);

  // Records `claim` of `kernel_id` whole or not at all (WriteFileAtomically),
  // making the directory (0700) first; kUnavailable naming the file on failure.
  Status Write(const std::string& kernel_id, const Claim& claim) const;
  // The record of `kernel_id`; nullopt when there is none; kInvalidArgument
  // naming the file when it is not a record.
  Result<std::optional<Claim>> Read(const std::string& kernel_id) const;
  // Removes the record of `kernel_id` (none: OK); logs what fails.
  void Remove(const std::string& kernel_id) const;
  // The kernel ids that have a record.
  std::vector<std::string> KernelIds() const;
  // Removes the temporary files of writes that never ended (an agent killed
  // while writing): the kernel they were for is still warm.
  void RemoveLeftovers() const;

 private:
  std::string PathOf(const std::string& kernel_id) const;
  const std::string dir_;
};

}  // namespace slotd
