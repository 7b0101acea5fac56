#include "testing/fake_engine.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <utility>

namespace slotd {
namespace {

// The logical clock starts here (2023-11-14T22:13:20Z) so times look real.
constexpr int64_t kEpochUnix = 1'700'000'000;
constexpr int64_t kNanosPerSecond = 1'000'000'000;

int64_t UnixSeconds(int64_t clock_ns) { return kEpochUnix + clock_ns / kNanosPerSecond; }
int64_t UnixMillis(int64_t clock_ns) { return kEpochUnix * 1000 + clock_ns / 1'000'000; }

std::string Rfc3339(int64_t clock_ns) {
  std::time_t t = static_cast<std::time_t>(UnixSeconds(clock_ns));
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

FakeEngine::FakeEngine() { images_[kDefaultImage] = ImageInfo{"sha256:default", {kDefaultImage}, {}, 1 << 20, 0, ""}; }

// ------------------------------------------------------------ private helpers

FakeEngine::Container* FakeEngine::Resolve(const std::string& id_or_name) {
  if (auto it = containers_.find(id_or_name); it != containers_.end()) return &it->second;
  if (auto it = names_.find(id_or_name); it != names_.end()) return &containers_.at(it->second);
  return nullptr;
}

const FakeEngine::Container* FakeEngine::Resolve(const std::string& id_or_name) const {
  if (auto it = containers_.find(id_or_name); it != containers_.end()) return &it->second;
  if (auto it = names_.find(id_or_name); it != names_.end()) return &containers_.at(it->second);
  return nullptr;
}

void FakeEngine::HoldHere(Method method) {
  // Wait with mutex_ released, as the real engine works while others call it.
  holding_.insert(method);
  hold_cv_.notify_all();
  mutex_.Wait(hold_cv_, [&]() REQUIRES(mutex_) { return holding_.count(method) == 0; });
}

Status FakeEngine::Enter(Method method) {
  ++calls_[method];
  if (holds_armed_.erase(method) > 0) HoldHere(method);
  auto it = failures_.find(method);
  if (it == failures_.end() || it->second.empty()) return Status::Ok();
  Status failure = std::move(it->second.front());
  it->second.pop_front();
  return failure;
}

Result<FakeEngine::Container*> FakeEngine::EnterFor(Method method, const std::string& id_or_name) {
  Container* c = Resolve(id_or_name);
  ++calls_for_[c ? c->info.id : id_or_name];
  if (Status s = Enter(method); !s.ok()) return s;
  if (!c) return Status::NotFound("No such container: " + id_or_name);
  return c;
}

EngineEvent FakeEngine::Emit(const Container& c, const std::string& action, std::optional<int> exit_code) {
  clock_ns_ += kNanosPerSecond;
  EngineEvent event;
  event.type = "container";
  event.action = action;
  event.id = c.info.id;
  event.attributes = c.info.labels;
  event.attributes["name"] = c.info.name;
  event.attributes["image"] = c.info.image;
  if (exit_code) event.attributes["exitCode"] = std::to_string(*exit_code);
  event.time_nano = kEpochUnix * kNanosPerSecond + clock_ns_;
  if (events_.size() == kEventLogSize) events_.pop_front();
  events_.push_back(event);
  for (Subscriber* sub : subscribers_) {
    const bool wanted = sub->actions.empty() || std::count(sub->actions.begin(), sub->actions.end(), action) > 0;
    if (wanted && Matches(c.info.labels, sub->filters)) sub->pending.push_back(event);
  }
  events_cv_.notify_all();
  return event;
}

void FakeEngine::Run(Container& c) {
  c.info.state = "running";
  c.info.running = true;
  c.info.exit_code = 0;
  // Above Linux's PID_MAX_LIMIT (4,194,304): never a process of the host,
  // whose /proc the agent reads for a started kernel's user and mounts.
  c.info.pid = static_cast<int>(5'000'000 + next_id_++);
  c.info.started_at = Rfc3339(clock_ns_);
  c.info.started_ms = UnixMillis(clock_ns_);
  c.info.finished_at.clear();
  c.info.finished_ms = 0;
  Emit(c, "start");
}

EngineEvent FakeEngine::Exit(Container& c, int exit_code, bool killed) {
  if (killed) Emit(c, "kill");
  c.info.state = "exited";
  c.info.running = false;
  c.info.exit_code = exit_code;
  c.info.pid = 0;
  c.info.finished_at = Rfc3339(clock_ns_);
  c.info.finished_ms = UnixMillis(clock_ns_);
  return Emit(c, "die", exit_code);
}

EngineEvent FakeEngine::Destroy(Container& c) {
  if (c.info.running) Exit(c, kKillExitCode, /*killed=*/true);
  EngineEvent destroyed = Emit(c, "destroy");
  names_.erase(c.info.name);
  containers_.erase(c.info.id);  // `c` dangles from here
  return destroyed;
}

Result<std::string> FakeEngine::Make(const ContainerSpec& spec) {
  if (const Container* existing = Resolve(spec.name))
    return Status::Conflict("Conflict. The container name \"/" + spec.name + "\" is already in use by container \"" +
                            existing->info.id + "\". You have to remove (or rename) that container to be able to "
                            "reuse that name.");
  if (!images_.count(spec.image)) return Status::NotFound("No such image: " + spec.image);
  char id[65];  // fixed-width hex of a counter: map order is creation order
  std::snprintf(id, sizeof id, "%064llx", static_cast<unsigned long long>(next_id_++));
  Container c;
  c.spec = spec;
  c.info.id = id;
  c.info.name = spec.name;
  c.info.image = spec.image;
  if (auto image = images_.find(spec.image); image != images_.end()) c.info.image_id = image->second.id;
  c.info.labels = spec.labels;
  c.info.state = "created";
  c.info.created_unix = UnixSeconds(clock_ns_);
  c.info.cpuset_cpus = spec.cpuset_cpus;
  c.info.memory_bytes = spec.memory_bytes;
  c.info.env = spec.env;
  names_[spec.name] = id;
  Container& stored = containers_[id] = std::move(c);
  Emit(stored, "create");
  return std::string(id);
}

bool FakeEngine::Matches(const Labels& labels, const std::vector<std::string>& filters) {
  for (const std::string& filter : filters) {
    size_t eq = filter.find('=');
    auto it = labels.find(filter.substr(0, eq));
    if (it == labels.end()) return false;
    if (eq != std::string::npos && it->second != filter.substr(eq + 1)) return false;
  }
  return true;
}

// ------------------------------------------------------------ ContainerEngine

Result<EngineIdentity> FakeEngine::Identify() {
  MutexLock lock(mutex_);
  if (Status s = Enter(Method::kIdentify); !s.ok()) return s;
  return EngineIdentity{.name = "fake", .version = "0", .api_version = "1.41"};
}

Status FakeEngine::Ping(std::chrono::milliseconds) {
  MutexLock lock(mutex_);
  return Enter(Method::kPing);
}

Result<std::string> FakeEngine::Create(const ContainerSpec& spec) {
  MutexLock lock(mutex_);
  if (Status s = Enter(Method::kCreate); !s.ok()) return s;
  return Make(spec);
}

Status FakeEngine::Start(const std::string& id) {
  MutexLock lock(mutex_);
  auto c = EnterFor(Method::kStart, id);
  if (!c.ok()) return c.status();
  if (!(*c)->info.running) Run(**c);
  return Status::Ok();
}

Status FakeEngine::Stop(const std::string& id, std::chrono::seconds /*timeout*/) {
  MutexLock lock(mutex_);
  auto c = EnterFor(Method::kStop, id);
  if (!c.ok()) return c.status();
  if ((*c)->info.running) {
    Exit(**c, kStopExitCode, /*killed=*/true);
    Emit(**c, "stop");
  }
  return Status::Ok();
}

Status FakeEngine::Kill(const std::string& id, const std::string& /*signal*/) {
  MutexLock lock(mutex_);
  auto c = EnterFor(Method::kKill, id);
  if (!c.ok()) return c.status();
  if (!(*c)->info.running)
    return Status::Conflict("Cannot kill container: " + id + ": container " + (*c)->info.id + " is not running");
  Exit(**c, kKillExitCode, /*killed=*/true);
  return Status::Ok();
}

Status FakeEngine::UpdateCpuset(const std::string& id, const std::string& cpuset) {
  MutexLock lock(mutex_);
  auto c = EnterFor(Method::kUpdate, id);
  if (!c.ok()) return c.status();
  (*c)->info.cpuset_cpus = cpuset;
  Emit(**c, "update");
  return Status::Ok();
}

Status FakeEngine::Rename(const std::string& id, const std::string& name) {
  MutexLock lock(mutex_);
  auto c = EnterFor(Method::kRename, id);
  if (!c.ok()) return c.status();
  if (auto taken = names_.find(name); taken != names_.end() && taken->second != (*c)->info.id)
    return Status::Conflict("Conflict. The container name \"/" + name + "\" is already in use");
  names_.erase((*c)->info.name);
  (*c)->info.name = name;
  names_[name] = (*c)->info.id;
  Emit(**c, "rename");
  return Status::Ok();
}

Status FakeEngine::Restart(const std::string& id, std::chrono::seconds /*timeout*/) {
  MutexLock lock(mutex_);
  auto c = EnterFor(Method::kRestart, id);
  if (!c.ok()) return c.status();
  if ((*c)->info.running) {
    Exit(**c, kStopExitCode, /*killed=*/true);
    Emit(**c, "stop");
  }
  Run(**c);
  Emit(**c, "restart");
  return Status::Ok();
}

Status FakeEngine::Remove(const std::string& id, bool force) {
  MutexLock lock(mutex_);
  auto c = EnterFor(Method::kRemove, id);
  if (!c.ok()) return c.status();
  if ((*c)->info.running && !force)
    return Status::Conflict("You cannot remove a running container " + (*c)->info.id +
                            ". Stop the container before attempting removal or force remove");
  Destroy(**c);
  return Status::Ok();
}

Result<ContainerInfo> FakeEngine::Inspect(const std::string& id) {
  MutexLock lock(mutex_);
  auto c = EnterFor(Method::kInspect, id);
  if (!c.ok()) return c.status();
  return (*c)->info;
}

Result<std::vector<ContainerInfo>> FakeEngine::List(const std::vector<std::string>& label_filters) {
  MutexLock lock(mutex_);
  if (Status s = Enter(Method::kList); !s.ok()) return s;
  std::vector<ContainerInfo> out;
  for (const auto& [id, c] : containers_) {
    const ContainerInfo& full = c.info;
    if (!Matches(full.labels, label_filters)) continue;
    ++calls_for_[id];
    ContainerInfo listed;  // what Docker's list carries, nothing more
    listed.id = full.id;
    listed.name = full.name;
    listed.image = full.image;
    listed.labels = full.labels;
    listed.state = full.state;
    listed.running = full.running;
    listed.created_unix = full.created_unix;
    out.push_back(std::move(listed));
  }
  if (answer_holds_armed_.erase(Method::kList) > 0) HoldHere(Method::kList);
  return out;
}

Status FakeEngine::CreateVolume(const std::string& name, const Labels& labels) {
  MutexLock lock(mutex_);
  if (Status s = Enter(Method::kVolumes); !s.ok()) return s;
  volumes_.try_emplace(name, labels);
  return Status::Ok();
}

Result<std::vector<VolumeInfo>> FakeEngine::ListVolumes(const std::vector<std::string>& label_filters) {
  MutexLock lock(mutex_);
  if (Status s = Enter(Method::kVolumes); !s.ok()) return s;
  std::vector<VolumeInfo> out;
  for (const auto& [name, labels] : volumes_)
    if (Matches(labels, label_filters)) out.push_back({name, labels});
  return out;
}

Status FakeEngine::RemoveVolume(const std::string& name) {
  MutexLock lock(mutex_);
  if (Status s = Enter(Method::kVolumes); !s.ok()) return s;
  if (volumes_.erase(name) == 0) return Status::NotFound("get " + name + ": no such volume");
  return Status::Ok();
}

Result<ExecResult> FakeEngine::Exec(const std::string& id, const std::vector<std::string>& command,
                                    std::chrono::seconds /*timeout*/, const std::atomic<bool>* /*stop*/,
                                    std::string* /*exec_id*/) {
  MutexLock lock(mutex_);
  auto c = EnterFor(Method::kExec, id);
  if (!c.ok()) return c.status();
  if (!(*c)->info.running) return Status::Conflict("Container " + (*c)->info.id + " is not running");
  ExecResult result;
  result.exit_code = 0;
  for (size_t i = 0; i < command.size(); ++i) result.stdout_text += (i ? " " : "") + command[i];
  result.stdout_text += "\n";
  return result;
}

Result<ContainerStats> FakeEngine::Stats(const std::string& id) {
  MutexLock lock(mutex_);
  auto c = EnterFor(Method::kStats, id);
  if (!c.ok()) return c.status();
  if (!(*c)->info.running) return Status::FailedPrecondition("stats of container " + id + ": not running");
  return (*c)->stats;
}

Result<ExecSession> FakeEngine::ExecInteractive(const std::string& id, const std::vector<std::string>&, int, int) {
  MutexLock lock(mutex_);
  auto c = EnterFor(Method::kExec, id);
  if (!c.ok()) return c.status();
  if (!(*c)->info.running) return Status::Conflict("container " + id + " is not running");
  int ends[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) return Status::Internal("socketpair failed");
  ::close(ends[1]);
  ExecSession session{"exec-" + std::to_string(next_id_++), ends[0], ""};
  execs_[session.exec_id] = ExecInfo{.container_id = (*c)->info.id};
  return session;
}

Status FakeEngine::ResizeExec(const std::string& exec_id, int, int) {
  MutexLock lock(mutex_);
  if (Status s = Enter(Method::kExec); !s.ok()) return s;
  return execs_.count(exec_id) ? Status::Ok() : Status::NotFound("No such exec instance: " + exec_id);
}

Result<ExecInfo> FakeEngine::InspectExec(const std::string& exec_id) {
  MutexLock lock(mutex_);
  if (Status s = Enter(Method::kExec); !s.ok()) return s;
  auto it = execs_.find(exec_id);
  if (it == execs_.end()) return Status::NotFound("No such exec instance: " + exec_id);
  return it->second;
}

Status FakeEngine::StreamLogs(const std::string& id, int tail, bool, const std::function<void()>& on_started,
                              const std::function<bool(std::string_view)>& on_output, const std::atomic<bool>&) {
  std::string text;
  {
    MutexLock lock(mutex_);
    auto c = EnterFor(Method::kLogs, id);
    if (!c.ok()) return c.status();
    text = (*c)->logs;
  }
  if (tail > 0) {
    // Walk back over `tail` line ends, not counting the one that ends the text.
    size_t start = text.size();
    if (start > 0 && text[start - 1] == '\n') --start;
    for (int lines = 0; start > 0; --start) {
      if (text[start - 1] == '\n' && ++lines == tail) break;
    }
    text = text.substr(start);
  }
  on_started();
  if (!text.empty()) on_output(text);
  return Status::Ok();
}

Status FakeEngine::StreamEvents(const std::vector<std::string>& label_filters, const std::vector<std::string>& actions,
                                const std::function<void()>& on_connected,
                                const std::function<void(const EngineEvent&)>& on_event,
                                const std::atomic<bool>& stop) {
  Subscriber sub;
  sub.filters = label_filters;
  sub.actions = actions;
  {
    MutexLock lock(mutex_);
    if (Status s = Enter(Method::kStreamEvents); !s.ok()) return s;
    subscribers_.insert(&sub);
  }
  on_connected();
  MutexLock lock(mutex_);
  while (true) {
    // `stop` has no way to wake us, so look at it every 10 ms.
    events_cv_.wait_for(lock.native(), std::chrono::milliseconds(10),
                        [&] { return stop.load() || !sub.pending.empty(); });
    if (stop) break;
    std::deque<EngineEvent> batch = std::exchange(sub.pending, {});
    lock.Unlock();
    for (const EngineEvent& event : batch) on_event(event);
    lock.Lock();
  }
  subscribers_.erase(&sub);
  return Status::Ok();
}

// ---------------------------------------------------------------- test controls

void FakeEngine::AddImage(const std::string& image, const std::string& user) {
  MutexLock lock(mutex_);
  images_[image] = ImageInfo{"sha256:" + std::to_string(next_id_++), {image}, {}, 1 << 20, 0, user};
}

void FakeEngine::AddRemoteImage(const std::string& image, const std::string& digest) {
  MutexLock lock(mutex_);
  remote_images_[image] = digest;
}

Status FakeEngine::Pull(const std::string& image, const std::string&,
                        const std::function<void(const PullMessage&)>& on_message, const std::atomic<bool>&) {
  std::string digest;
  {
    MutexLock lock(mutex_);
    if (Status s = Enter(Method::kPull); !s.ok()) return s;
    auto it = remote_images_.find(image);
    if (it == remote_images_.end()) return Status::NotFound("pulling " + image + ": manifest unknown");
    digest = it->second;
  }
  on_message(PullMessage{"layer1", "Pulling fs layer", 0, 0});
  on_message(PullMessage{"layer1", "Pull complete", 0, 0});
  MutexLock lock(mutex_);
  const std::string repository = image.substr(0, image.rfind(':'));
  images_[image] = ImageInfo{"sha256:" + digest, {image}, {repository + "@" + digest}, 1 << 20, 0, ""};
  return Status::Ok();
}

Result<std::string> FakeEngine::RegistryDigest(const std::string& image, const std::string&) {
  MutexLock lock(mutex_);
  if (Status s = Enter(Method::kPull); !s.ok()) return s;
  auto it = remote_images_.find(image);
  if (it == remote_images_.end()) return Status::NotFound("asking the registry for " + image + ": manifest unknown");
  return it->second;
}

Result<ImageInfo> FakeEngine::InspectImage(const std::string& image) {
  MutexLock lock(mutex_);
  if (Status s = Enter(Method::kImages); !s.ok()) return s;
  auto it = images_.find(image);
  if (it == images_.end()) return Status::NotFound("No such image: " + image);
  return it->second;
}

Result<std::string> FakeEngine::ReadFile(const std::string& id, const std::string& path, size_t max_bytes) {
  MutexLock lock(mutex_);
  if (Status s = Enter(Method::kReadFile); !s.ok()) return s;
  const Container* c = Resolve(id);
  if (!c) return Status::NotFound("No such container: " + id);
  auto it = image_files_.find({c->spec.image, path});
  if (it == image_files_.end()) return Status::NotFound("Could not find the file " + path + " in container " + id);
  if (it->second.size() > max_bytes) return Status::InvalidArgument(path + ": longer than " + std::to_string(max_bytes));
  return it->second;
}

void FakeEngine::SetImageFile(const std::string& image, const std::string& path, const std::string& content) {
  MutexLock lock(mutex_);
  image_files_[{image, path}] = content;
}

Result<EngineInfo> FakeEngine::Info() { return EngineInfo{"/fake/data-root", "cgroupfs", "1"}; }

void FakeEngine::AddImageCreatedAt(const std::string& image, int64_t created_unix) {
  MutexLock lock(mutex_);
  images_[image] = ImageInfo{"sha256:" + std::to_string(next_id_++), {image}, {}, 1 << 20, created_unix, ""};
}

Result<std::vector<ImageInfo>> FakeEngine::ListImages() {
  MutexLock lock(mutex_);
  if (Status s = Enter(Method::kImages); !s.ok()) return s;
  std::vector<ImageInfo> out;
  for (const auto& [name, info] : images_) out.push_back(info);
  return out;
}

Status FakeEngine::RemoveImage(const std::string& id) {
  MutexLock lock(mutex_);
  if (Status s = Enter(Method::kImages); !s.ok()) return s;
  for (auto it = images_.begin(); it != images_.end(); ++it) {
    if (it->second.id != id && it->first != id) continue;
    for (const auto& [cid, c] : containers_)
      if (c.spec.image == it->first) return Status::Conflict("image " + id + " is used by container " + cid);
    images_.erase(it);
    return Status::Ok();
  }
  return Status::NotFound("No such image: " + id);
}


void FakeEngine::HoldNext(Method method) {
  MutexLock lock(mutex_);
  holds_armed_.insert(method);
}

void FakeEngine::HoldNextAnswer(Method method) {
  MutexLock lock(mutex_);
  answer_holds_armed_.insert(method);
}

bool FakeEngine::WaitUntilHeld(Method method) {
  MutexLock lock(mutex_);
  return hold_cv_.wait_for(lock.native(), std::chrono::seconds(10),
                           [&]() REQUIRES(mutex_) { return holding_.count(method) > 0; });
}

void FakeEngine::Release(Method method) {
  MutexLock lock(mutex_);
  holding_.erase(method);
  hold_cv_.notify_all();
}

void FakeEngine::FailNext(Method method, Status status) {
  MutexLock lock(mutex_);
  failures_[method].push_back(std::move(status));
}

Result<EngineEvent> FakeEngine::KillBehindBack(const std::string& id, int exit_code) {
  MutexLock lock(mutex_);
  Container* c = Resolve(id);
  if (!c) return Status::NotFound("No such container: " + id);
  if (!c->info.running) return Status::FailedPrecondition("container " + id + " is not running");
  return Exit(*c, exit_code, /*killed=*/false);
}

Result<EngineEvent> FakeEngine::RemoveBehindBack(const std::string& id) {
  MutexLock lock(mutex_);
  Container* c = Resolve(id);
  if (!c) return Status::NotFound("No such container: " + id);
  return Destroy(*c);
}

Result<std::string> FakeEngine::AddContainer(const std::string& name, const Labels& labels, bool running,
                                             int exit_code, const std::string& image) {
  MutexLock lock(mutex_);
  ContainerSpec spec;
  spec.name = name;
  spec.image = image;
  spec.labels = labels;
  auto id = Make(spec);
  if (!id.ok()) return id;
  Container& c = containers_.at(*id);
  Run(c);
  if (!running) Exit(c, exit_code, /*killed=*/false);
  return id;
}

void FakeEngine::SetLogs(const std::string& id, const std::string& text) {
  MutexLock lock(mutex_);
  if (Container* c = Resolve(id)) c->logs = text;
}

void FakeEngine::SetStats(const std::string& id, const ContainerStats& stats) {
  MutexLock lock(mutex_);
  if (Container* c = Resolve(id)) c->stats = stats;
}

int FakeEngine::CallsFor(const std::string& id) const {
  MutexLock lock(mutex_);
  const Container* c = Resolve(id);
  auto it = calls_for_.find(c ? c->info.id : id);
  return it == calls_for_.end() ? 0 : it->second;
}

int FakeEngine::CallCount(Method method) const {
  MutexLock lock(mutex_);
  auto it = calls_.find(method);
  return it == calls_.end() ? 0 : it->second;
}

std::optional<ContainerInfo> FakeEngine::Peek(const std::string& id) const {
  MutexLock lock(mutex_);
  const Container* c = Resolve(id);
  if (!c) return std::nullopt;
  return c->info;
}

std::optional<ContainerSpec> FakeEngine::SpecOf(const std::string& id) const {
  MutexLock lock(mutex_);
  const Container* c = Resolve(id);
  if (!c) return std::nullopt;
  return c->spec;
}

size_t FakeEngine::ContainerCount() const {
  MutexLock lock(mutex_);
  return containers_.size();
}

std::vector<EngineEvent> FakeEngine::Events() const {
  MutexLock lock(mutex_);
  return {events_.begin(), events_.end()};
}

}  // namespace slotd
