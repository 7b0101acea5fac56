// FakeEngine: an in-memory ContainerEngine for unit tests and benchmarks of
// the agent core. No Docker, no processes: a container is a record in a map.
//
// It behaves like the Docker Engine where the core can tell the difference:
//  - Create refuses a duplicate name (kConflict) and an image it does not
//    know (kNotFound); it does not start the container.
//  - Methods taking an id accept the container's id or its name; an unknown
//    one is kNotFound.
//  - List applies the label filters itself, like the engine's server-side
//    filter ("key=value" or "key", all must match), returns every state, and
//    leaves exit_code, pid, started/finished times and HostConfig fields
//    empty: only Inspect fills them, as with Docker.
//  - Every change emits the events Docker would (create, start, kill, die
//    with "exitCode", stop, restart, destroy), with the container's labels,
//    "name" and "image" as attributes. They go to open StreamEvents
//    subscribers whose label filters match, and to a bounded log (Events()).
//
// Deterministic: ids come from a counter, times from a logical clock that
// advances one second per event, and nothing runs in the background. Only StreamEvents blocks (in its caller's
// thread) until its `stop` flag is set.
//
// Thread-safe: mutex_ guards all state, so a benchmark may drive it from
// several threads.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "engine/container_engine.h"

namespace slotd {

class FakeEngine : public ContainerEngine {
 public:
  // The ContainerEngine methods, for FailNext and CallCount.
  // kVolumes stands for the three volume calls.
  enum class Method { kIdentify, kCreate, kStart, kStop, kKill, kRestart, kUpdate, kRename, kRemove, kInspect, kList, kExec, kLogs, kStats, kPing,
                      kVolumes, kStreamEvents, kPull, kImages, kReadFile };

  // The image every test kernel uses; known from the start.
  static constexpr char kDefaultImage[] = "slotd-test/busybox:latest";
  // Exit code a container gets from Stop (SIGTERM honoured).
  static constexpr int kStopExitCode = 143;
  // Exit code a container gets from Kill, and from Remove(force) while running (SIGKILL).
  static constexpr int kKillExitCode = 137;

  FakeEngine();

  // ---- ContainerEngine

  // Returns "fake".
  Result<EngineIdentity> Identify() override;
  Status Ping(std::chrono::milliseconds timeout) override;
  // Stores the container in state "created"; emits "create".
  Result<std::string> Create(const ContainerSpec& spec) override;
  // Runs it; a running container is left as is (Docker's 304). Emits "start".
  Status Start(const std::string& id) override;
  // Exits a running container with kStopExitCode (emits "kill", "die", "stop"); a stopped one is OK.
  Status Stop(const std::string& id, std::chrono::seconds timeout) override;
  // Exits a running container with kKillExitCode (emits "kill", "die"); kConflict when it is not running.
  Status Kill(const std::string& id, const std::string& signal = "KILL") override;
  // Stops it if running, then starts it (emits those events, then "restart").
  Status Restart(const std::string& id, std::chrono::seconds timeout) override;
  // Gives it `name` (emits "rename"); kConflict when another container has it.
  Status UpdateCpuset(const std::string& id, const std::string& cpuset) override;
  Status Rename(const std::string& id, const std::string& name) override;
  // Deletes it (emits "destroy"); a running one needs `force` (else kConflict) and is killed first.
  Status Remove(const std::string& id, bool force) override;
  // Everything known about the container, HostConfig fields included.
  Result<ContainerInfo> Inspect(const std::string& id) override;
  // The file SetImageFile gave the container's image at `path`; kNotFound
  // for any other (links are not modelled).
  Result<std::string> ReadFile(const std::string& id, const std::string& path, size_t max_bytes) override;
  // Containers matching every filter, in creation order, with list-only fields.
  Result<std::vector<ContainerInfo>> List(const std::vector<std::string>& label_filters) override;
  // Echoes the command: exit code 0, stdout the arguments joined by spaces and a newline.
  // kConflict when the container is not running.
  Result<ExecResult> Exec(const std::string& id, const std::vector<std::string>& command,
                          std::chrono::seconds timeout, const std::atomic<bool>* stop,
                          std::string* exec_id) override;
  // A session that ends at once: the returned socket's other end is closed,
  // and the exec is recorded as ended with code 0. kConflict when the
  // container is not running. Counted as kExec.
  Result<ExecSession> ExecInteractive(const std::string& id, const std::vector<std::string>& command, int rows,
                                      int cols) override;
  // Records the size (ExecSize); kNotFound for an unknown exec.
  Status ResizeExec(const std::string& exec_id, int rows, int cols) override;
  Result<ExecInfo> InspectExec(const std::string& exec_id) override;
  // The text set by SetLogs, its last `tail` lines when tail > 0, in one
  // piece; `follow` adds nothing (no output comes later).
  Status StreamLogs(const std::string& id, int tail, bool follow, const std::function<void()>& on_started,
                    const std::function<bool(std::string_view)>& on_output, const std::atomic<bool>& stop) override;
  // The reading set by SetStats (zeros until then); kFailedPrecondition when
  // the container is not running.
  Result<ContainerStats> Stats(const std::string& id) override;
  // A volume is a name with labels; creating an existing one changes nothing.
  Status CreateVolume(const std::string& name, const Labels& labels) override;
  Result<std::vector<VolumeInfo>> ListVolumes(const std::vector<std::string>& label_filters) override;
  Status RemoveVolume(const std::string& name) override;
  // Copies an image AddRemoteImage made into the engine's images, sending
  // "Pulling fs layer" and "Pull complete" for one layer; kNotFound for
  // an image the registry does not have.
  Status Pull(const std::string& image, const std::string& registry_auth,
              const std::function<void(const PullMessage&)>& on_message, const std::atomic<bool>& stop) override;
  // The digest AddRemoteImage gave; kNotFound for an unknown image.
  Result<std::string> RegistryDigest(const std::string& image, const std::string& registry_auth) override;
  // kPull counts these two; kImages the three below.
  Result<ImageInfo> InspectImage(const std::string& image) override;
  Result<std::vector<ImageInfo>> ListImages() override;
  // "/fake/data-root".
  Result<EngineInfo> Info() override;
  // kConflict while a container was created from it.
  Status RemoveImage(const std::string& id) override;
  // Calls on_connected, then on_event (in this thread, without the fake's
  // lock held) for each event emitted from then on whose container matches
  // `label_filters`, until `stop` is set (checked at least every 10 ms);
  // returns OK then.
  Status StreamEvents(const std::vector<std::string>& label_filters, const std::vector<std::string>& actions,
                      const std::function<void()>& on_connected,
                      const std::function<void(const EngineEvent&)>& on_event,
                      const std::atomic<bool>& stop) override;

  // ---- Test controls. None of them counts as a call.

  // Makes `image` known to Create, running as `user` (Config.User).
  void AddImage(const std::string& image, const std::string& user = "");
  // Makes `image` known to Create as AddImage does, created at `created_unix`.
  void AddImageCreatedAt(const std::string& image, int64_t created_unix);
  // Gives containers of `image` the file `path` holding `content` (ReadFile).
  void SetImageFile(const std::string& image, const std::string& path, const std::string& content);
  // Puts `image` in the registry that Pull and RegistryDigest ask, with `digest`.
  void AddRemoteImage(const std::string& image, const std::string& digest);

  // Makes the next call of `method` fail with `status` (which must not be OK)
  // without any effect. Several calls queue up, one failure per call.
  void FailNext(Method method, Status status);

  // Makes the next call of `method` stop before it has any effect (and
  // before a FailNext failure applies) until Release(method), so that a test
  // can run other calls while it is in flight. Returns at once.
  void HoldNext(Method method);
  // Makes the next call of `method` have its effect and compute its answer,
  // then stop before returning it until Release(method): the answer is stale
  // by the time the caller sees it, as a slow engine's can be. kList only.
  void HoldNextAnswer(Method method);
  // Waits until a call of `method` is held; false when none is within 10 s.
  bool WaitUntilHeld(Method method);
  // Lets the held call of `method` go on.
  void Release(Method method);

  // The container exits on its own with `exit_code`, as if its process ended
  // or was killed by someone else; returns the "die" event it emits.
  // kNotFound for an unknown container, kFailedPrecondition when it is not running.
  Result<EngineEvent> KillBehindBack(const std::string& id, int exit_code);

  // The container is removed by someone else (`docker rm -f`); returns the
  // "destroy" event (a running one also emits "kill" and "die" before it).
  Result<EngineEvent> RemoveBehindBack(const std::string& id);

  // Puts a container there as someone else would (another agent, a user, or
  // this agent before a crash): `labels` are arbitrary; running, or exited
  // with `exit_code`. Emits "create" and "start" (then "die" when not
  // running). Returns its id.
  // kConflict when the name is taken.
  Result<std::string> AddContainer(const std::string& name, const Labels& labels, bool running = true,
                                   int exit_code = 0, const std::string& image = kDefaultImage);

  // Sets the reading Stats returns for the container.
  void SetStats(const std::string& id, const ContainerStats& stats);

  // Sets the text StreamLogs gives for the container.
  void SetLogs(const std::string& id, const std::string& text);

  // How many ContainerEngine calls named this container (by id or name),
  // plus how many times List returned it. 0 for one the engine never saw.
  int CallsFor(const std::string& id) const;

  // How many times `method` was called, failed calls included.
  int CallCount(Method method) const;

  // The container as Inspect would show it, or nullopt; by id or name.
  std::optional<ContainerInfo> Peek(const std::string& id) const;

  // The spec the container was created from, or nullopt; by id or name.
  std::optional<ContainerSpec> SpecOf(const std::string& id) const;

  // How many containers exist, in any state.
  size_t ContainerCount() const;

  // The events emitted so far, oldest first (the last kEventLogSize of them).
  std::vector<EngineEvent> Events() const;

  // How many events Events() keeps, so that a long benchmark stays small.
  static constexpr size_t kEventLogSize = 10'000;

 private:
  // One container: how it was made and what it is now.
  struct Container {
    ContainerSpec spec;
    ContainerInfo info;  // the Inspect view
    std::string logs;
    ContainerStats stats;
  };
  // One open StreamEvents call.
  struct Subscriber {
    std::vector<std::string> filters;
    std::vector<std::string> actions;  // empty: any
    std::deque<EngineEvent> pending;
  };

  // The container named by id or name, or nullptr.
  Container* Resolve(const std::string& id_or_name) REQUIRES(mutex_);
  const Container* Resolve(const std::string& id_or_name) const REQUIRES(mutex_);
  // Blocks the calling method as held (see HoldNext) until Release.
  void HoldHere(Method method) REQUIRES(mutex_);
  // Counts a call of `method` and pops its queued failure, if any.
  Status Enter(Method method) REQUIRES(mutex_);
  // Enter, then resolves `id_or_name` and counts the call against it.
  Result<Container*> EnterFor(Method method, const std::string& id_or_name) REQUIRES(mutex_);
  // Emits `action` for `c` to the log and matching subscribers.
  EngineEvent Emit(const Container& c, const std::string& action, std::optional<int> exit_code = std::nullopt)
      REQUIRES(mutex_);
  // Sets `c` running; emits "start".
  void Run(Container& c) REQUIRES(mutex_);
  // Exits running `c` with `exit_code`; emits "kill" first when `killed`, then "die".
  EngineEvent Exit(Container& c, int exit_code, bool killed) REQUIRES(mutex_);
  // Deletes `c` (exiting it first if running); emits "destroy".
  EngineEvent Destroy(Container& c) REQUIRES(mutex_);
  // Creates a container in state "created".
  Result<std::string> Make(const ContainerSpec& spec) REQUIRES(mutex_);
  // Whether `labels` satisfy every "key=value" / "key" filter.
  static bool Matches(const Labels& labels, const std::vector<std::string>& filters);

  mutable Mutex mutex_;
  std::condition_variable events_cv_;            // signalled on every Emit
  std::map<std::string, ImageInfo> images_ GUARDED_BY(mutex_);  // by name as created from
  std::map<std::string, std::string> remote_images_ GUARDED_BY(mutex_);  // name -> digest
  std::map<std::pair<std::string, std::string>, std::string> image_files_ GUARDED_BY(mutex_);  // (image, path) -> content
  std::map<std::string, Container> containers_ GUARDED_BY(mutex_);  // id -> container, in creation order
  std::map<std::string, std::string> names_ GUARDED_BY(mutex_);  // name -> id
  std::map<std::string, Labels> volumes_ GUARDED_BY(mutex_);  // name -> labels
  std::map<std::string, ExecInfo> execs_ GUARDED_BY(mutex_);  // interactive execs by id
  std::map<Method, std::deque<Status>> failures_ GUARDED_BY(mutex_);  // queued FailNext
  std::set<Method> holds_armed_ GUARDED_BY(mutex_);  // HoldNext not yet met by a call
  std::set<Method> answer_holds_armed_ GUARDED_BY(mutex_);  // HoldNextAnswer not yet met by a call
  std::set<Method> holding_ GUARDED_BY(mutex_);  // calls held now
  std::condition_variable hold_cv_;                 // signalled when a call is held or released
  std::map<std::string, int> calls_for_ GUARDED_BY(mutex_);  // container id -> calls
  std::map<Method, int> calls_ GUARDED_BY(mutex_);  // method -> calls
  std::deque<EngineEvent> events_ GUARDED_BY(mutex_);  // the last kEventLogSize events
  std::set<Subscriber*> subscribers_ GUARDED_BY(mutex_);  // open StreamEvents calls
  uint64_t next_id_ GUARDED_BY(mutex_) = 1;  // for container ids and pids
  int64_t clock_ns_ GUARDED_BY(mutex_) = 0;  // logical time, +1 s per event
};

}  // namespace slotd
