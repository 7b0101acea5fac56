#include "agent/image_puller.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <ctime>
#include <thread>

#include "common/thread_name.h"
#include "common/units.h"
#include "model/image_ref.h"

namespace slotd {
namespace {

using SteadyClock = std::chrono::steady_clock;
using nlohmann::json;

// Progress events of one pull are published at most this often.
constexpr std::chrono::milliseconds kEventEvery{250};

}  // namespace

void PullTally::Add(const PullMessage& message) {
  if (message.layer.empty()) return;
  // Messages of the whole image ("Pulling from x", "Digest: ...") carry the
  // tag as their id; a layer's first word is one of these.
  const std::string& status = message.status;
  const bool layer_status = status == "Pulling fs layer" || status == "Waiting" || status == "Downloading" ||
                            status == "Verifying Checksum" || status == "Download complete" ||
                            status == "Extracting" || status == "Pull complete" || status == "Already exists";
  if (!layer_status) return;
  Layer& layer = layers_[message.layer];
  if (status == "Downloading") {
    if (message.total > 0) layer.size = message.total;
    layer.downloaded = std::min(message.current, layer.size ? layer.size : message.current);
  } else if (status == "Verifying Checksum" || status == "Download complete" || status == "Extracting") {
    layer.downloaded = layer.size;
  } else if (status == "Pull complete" || status == "Already exists") {
    layer.downloaded = layer.size;
    layer.complete = true;
  }
}

PullProgress PullTally::Now() const {
  PullProgress progress;
  for (const auto& [id, layer] : layers_) {
    ++progress.layers;
    if (layer.complete) ++progress.layers_done;
    progress.bytes_done += layer.downloaded;
    progress.bytes_total += layer.size;
  }
  return progress;
}

ImagePuller::ImagePuller(ContainerEngine& engine, EventHub& hub, const Clock& clock, std::string agent_id,
                         Limits limits, RegistryCredentials credentials)
    : engine_(engine), hub_(hub), clock_(clock), agent_id_(std::move(agent_id)), limits_(limits),
      credentials_(std::move(credentials)) {}

void ImagePuller::SetCredentials(RegistryCredentials credentials) {
  MutexLock lock(mutex_);
  credentials_ = std::move(credentials);
}

ImagePuller::Login ImagePuller::LoginFor(const ImageRef& image) const {
  MutexLock lock(mutex_);
  return {credentials_.AuthFor(image), credentials_.Has(image.registry)};
}

Result<std::optional<ImageInfo>> ImagePuller::Ensure(const ImageRef& image, PullPolicy policy) {
  if (policy == PullPolicy::kNone) return std::optional<ImageInfo>();
  // The digest policy's question: the digest the tag names in the registry now.
  std::optional<std::string> wanted;
  if (policy == PullPolicy::kDigest && image.digest.empty()) {
    const Login login = LoginFor(image);
    Result<std::string> digest = engine_.RegistryDigest(image.name, login.auth);
    if (!digest.ok()) return Explain(digest.status(), image, login.has_credentials);
    wanted = "@" + *digest;
  }
  Result<ImageInfo> local = engine_.InspectImage(image.name);
  if (!local.ok() && local.status().code() != Status::Code::kNotFound) return local.status();
  const bool current = local.ok() && (!wanted || std::any_of(local->digests.begin(), local->digests.end(),
                                                              [&](const std::string& d) {
                                                                return d.size() > wanted->size() &&
                                                                       d.ends_with(*wanted);
                                                              }));
  if (current) return std::optional<ImageInfo>(std::move(*local));
  if (Status pulled = Pull(image); !pulled.ok()) return pulled;
  return std::optional<ImageInfo>();
}

Status ImagePuller::Pull(const ImageRef& image) {
  const std::string key = image.Canonical();
  std::shared_ptr<InFlight> pull;
  {
    MutexLock lock(mutex_);
    if (auto it = in_flight_.find(key); it != in_flight_.end()) {
      std::shared_ptr<InFlight> shared = it->second;
      ++shared->sharers;
      pull_done_.wait(lock.native(), [&] { return shared->done; });
      --shared->sharers;
      return shared->outcome;
    }
    pull = std::make_shared<InFlight>();
    in_flight_[key] = pull;
  }
  const Login login = LoginFor(image);
  Status outcome = RunPull(image, login.auth, login.has_credentials);
  MutexLock lock(mutex_);
  pull->outcome = outcome;
  pull->done = true;
  in_flight_.erase(key);
  pull_done_.notify_all();
  return outcome;
}

int ImagePuller::SharingCalls() const {
  MutexLock lock(mutex_);
  int sharing = 0;
  for (const auto& [key, pull] : in_flight_) sharing += pull->sharers;
  return sharing;
}

// What a pull's engine thread and the thread that waits for it share.
struct ImagePuller::PullWatch {
  Mutex mutex;
  std::condition_variable changed;
  SteadyClock::time_point last_progress GUARDED_BY(mutex);
  SteadyClock::time_point last_event GUARDED_BY(mutex);
  PullTally tally GUARDED_BY(mutex);
  bool finished GUARDED_BY(mutex) = false;
  Status result GUARDED_BY(mutex);
};

Status ImagePuller::RunPull(const ImageRef& image, const std::string& auth, bool has_credentials) {
  auto watch = std::make_shared<PullWatch>();
  const SteadyClock::time_point started = SteadyClock::now();
  {
    MutexLock lock(watch->mutex);
    watch->last_progress = started;
    watch->last_event = started - kEventEvery;
  }
  spdlog::info("pulling image {}", image.name);
  Publish(image, "pulling", PullProgress{});
  auto stop = std::make_shared<std::atomic<bool>>(false);
  std::thread worker([this, watch, stop, image, auth] {
    NameThisThread("image-pull");
    auto on_message = [&](const PullMessage& message) {
      std::optional<PullProgress> to_publish;
      {
        MutexLock lock(watch->mutex);
        watch->tally.Add(message);
        const SteadyClock::time_point now = SteadyClock::now();
        watch->last_progress = now;
        if (now - watch->last_event >= kEventEvery) {
          watch->last_event = now;
          to_publish = watch->tally.Now();
        }
      }
      if (to_publish) Publish(image, "pulling", *to_publish);
    };
    Status result = engine_.Pull(image.name, auth, on_message, *stop);
    MutexLock lock(watch->mutex);
    watch->result = result;
    watch->finished = true;
    watch->changed.notify_all();
  });

  const Status outcome = AwaitPull(*watch, started, image, has_credentials);
  stop->store(true);
  worker.join();
  PublishPullEnd(*watch, image, outcome);
  return outcome;
}

Status ImagePuller::AwaitPull(PullWatch& watch, std::chrono::steady_clock::time_point started,
                              const ImageRef& image, bool has_credentials) {
  MutexLock lock(watch.mutex);
  while (!watch.finished) {
    const SteadyClock::time_point total_end = started + limits_.total;
    const SteadyClock::time_point stall_end = watch.last_progress + limits_.stall;
    const SteadyClock::time_point now = SteadyClock::now();
    if (now >= total_end)
      return Status::DeadlineExceeded("pulling " + image.name + " took longer than [container] pull-timeout (" +
                                      FormatDuration(limits_.total) +
                                      "); it was abandoned. Raise pull-timeout for images this large, or "
                                      "pull the image ahead with slotctl pull");
    if (now >= stall_end)
      return Status::DeadlineExceeded(
          "pulling " + image.name + " made no progress for " + FormatDuration(limits_.stall) +
          " ([container] pull-stall-timeout); it was abandoned. The registry " + image.registry +
          " may be stalled or overloaded; check it and retry");
    watch.changed.wait_until(lock.native(), std::min(total_end, stall_end));
  }
  return watch.result.ok() ? Status::Ok() : Explain(watch.result, image, has_credentials);
}

void ImagePuller::PublishPullEnd(PullWatch& watch, const ImageRef& image, const Status& outcome) {
  PullProgress final_progress;
  {
    MutexLock lock(watch.mutex);
    final_progress = watch.tally.Now();
  }
  if (outcome.ok()) {
    if (final_progress.bytes_total > 0)
      spdlog::info("pulled image {} ({} layers, {} bytes)", image.name, final_progress.layers,
                   final_progress.bytes_total);
    else  // the engine sent no sizes (Podman)
      spdlog::info("pulled image {} ({} layers)", image.name, final_progress.layers);
    Publish(image, "done", final_progress);
  } else {
    spdlog::warn("{}", outcome.message());
    Publish(image, "failed", final_progress, outcome.message());
  }
}

void ImagePuller::Publish(const ImageRef& image, const char* state, const PullProgress& progress,
                          const std::string& error) {
  json event = {{"agent_id", agent_id_},
                {"image", image.name},
                {"state", state},
                {"layers", progress.layers},
                {"layers_done", progress.layers_done},
                {"bytes_done", progress.bytes_done},
                {"bytes_total", progress.bytes_total},
                {"time", clock_.UnixSeconds()}};
  if (!error.empty()) event["error"] = error;
  hub_.Publish(EventType::kImagePull, std::move(event));
}

Status ImagePuller::Explain(const Status& error, const ImageRef& image, bool has_credentials) const {
  const std::string& registry = image.registry;
  // Docker trusts a loopback registry over plain HTTP; Podman (and Docker
  // for any other address) must be told it may.
  if (error.message().find("server gave HTTP response to HTTPS client") != std::string::npos)
    return Status::Unavailable("registry " + registry + " speaks plain HTTP and the engine asked it over HTTPS to pull " +
                               image.name + " (" + error.message() + "); if that registry is meant to be spoken to "
                               "without TLS, mark it insecure in the engine: Podman's registries.conf [[registry]] "
                               "location = \"" + registry + "\" insecure = true (read when its service starts), Docker's "
                               "daemon.json insecure-registries; then pull again");
  switch (error.code()) {
    case Status::Code::kNotFound:
      return Status::NotFound("image " + image.name + " is not in registry " + registry + " (" + error.message() +
                              "); check its name and tag, or push it there");
    case Status::Code::kPermissionDenied:
      if (!has_credentials)
        return Status::PermissionDenied("registry " + registry + " wants credentials to pull " + image.name + " (" +
                                        error.message() + "), and [container] registry-auth-file has none for it; "
                                        "add them (docker login " + registry + " writes the file) and send the "
                                        "agent SIGHUP");
      return Status::PermissionDenied("registry " + registry + " refused the credentials for " + registry +
                                      " in [container] registry-auth-file when pulling " + image.name + " (" +
                                      error.message() + "); fix them (docker login " + registry +
                                      ") and send the agent SIGHUP");
    case Status::Code::kUnavailable:
      return Status::Unavailable("registry " + registry + " cannot be reached to pull " + image.name + " (" +
                                 error.message() + "); check that it is up and that this node's engine can reach it");
    default:
      return error;
  }
}

}  // namespace slotd
