// ImagePuller: brings kernels' images onto the node from their registries,
// as [container] auto-pull (or a stricter request) asks. One pull per image
// at a time: every create that needs an image being pulled waits for that
// pull and shares its outcome. A pull has a total deadline and a
// no-progress deadline; past either it is abandoned. Progress goes to the
// event stream as image_pull events.
//
// Thread-safety: every public method may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "agent/event_hub.h"
#include "model/kernel.h"
#include "agent/registry_credentials.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "engine/container_engine.h"
#include "model/image_ref.h"

namespace slotd {

// A pull's progress, summed over its layers.
struct PullProgress {
  int layers = 0;           // layers the engine has named so far
  int layers_done = 0;      // of them, pulled and extracted, or already on the node
  uint64_t bytes_done = 0;  // downloaded so far, over the layers whose size is known
  uint64_t bytes_total = 0; // the sizes of the layers whose size is known

  bool operator==(const PullProgress&) const = default;
};

// Sums the engine's progress messages of one pull into its PullProgress.
class PullTally {
 public:
  void Add(const PullMessage& message);
  PullProgress Now() const;

 private:
  struct Layer {
    uint64_t downloaded = 0;
    uint64_t size = 0;  // 0: not known yet
    bool complete = false;
  };
  std::map<std::string, Layer> layers_;  // by layer id
};

class ImagePuller {
 public:
  struct Limits {
    std::chrono::milliseconds total{30 * 60'000};  // [container] pull-timeout
    std::chrono::milliseconds stall{60'000};       // [container] pull-stall-timeout
  };

  // `engine`, `hub` and `clock` (the time of its events) must outlive the
  // puller; `agent_id` marks its events.
  ImagePuller(ContainerEngine& engine, EventHub& hub, const Clock& clock, std::string agent_id, Limits limits,
              RegistryCredentials credentials);

  // Replaces the registry credentials (the file read again on SIGHUP); pulls
  // under way keep the ones they started with.
  void SetCredentials(RegistryCredentials credentials) EXCLUDES(mutex_);

  // Makes sure `image` is on the node as `policy` asks, pulling it when it
  // must; returns when it is there, with the engine's view of it when that
  // was read on the way (nothing after a pull, or with kNone, which checks
  // nothing: the engine's create then says whether the image is there). An
  // image named by digest never changes, so kDigest reads it as kTag.
  // Errors name the image and its registry and say what to do: kNotFound
  // (no such image or tag), kPermissionDenied (credentials missing or
  // refused), kUnavailable (the registry cannot be reached),
  // kDeadlineExceeded (the pull ran past pull-timeout or stalled past
  // pull-stall-timeout).
  Result<std::optional<ImageInfo>> Ensure(const ImageRef& image, PullPolicy policy) EXCLUDES(mutex_);

  // Pulls `image` whether or not the node has it (slotctl pull), or waits
  // for the pull of it already under way and shares its outcome; errors as
  // Ensure's.
  Status Pull(const ImageRef& image) EXCLUDES(mutex_);
  // How many calls wait now for a pull that another call makes.
  int SharingCalls() const EXCLUDES(mutex_);

 private:
  // One pull under way, shared by every caller that needs it.
  struct InFlight {
    bool done = false;
    Status outcome;
    int sharers = 0;  // the calls waiting for it
  };
  // What a pull from an image's registry sends, and whether there was any.
  struct Login {
    std::string auth;  // the X-Registry-Auth value; "" when none
    bool has_credentials = false;
  };
  // What a pull's engine thread and the thread that waits for it share
  // (defined in image_puller.cc).
  struct PullWatch;

  Login LoginFor(const ImageRef& image) const EXCLUDES(mutex_);
  // Runs one pull through the engine under the two deadlines, publishing
  // its progress; the error said for a user.
  Status RunPull(const ImageRef& image, const std::string& auth, bool has_credentials);
  // Waits until the engine's pull of `image` that `watch` follows, started at
  // `started`, finishes or passes a deadline. Returns OK, the engine's error
  // said for a user (Explain), or kDeadlineExceeded saying which deadline it
  // passed and what to do; the pull is not stopped here.
  Status AwaitPull(PullWatch& watch, std::chrono::steady_clock::time_point started, const ImageRef& image,
                   bool has_credentials);
  // Logs the end of the pull of `image` and publishes its image_pull event,
  // "done" or "failed" with `outcome`'s message, with the progress in `watch`.
  void PublishPullEnd(PullWatch& watch, const ImageRef& image, const Status& outcome);
  // Publishes an image_pull event.
  void Publish(const ImageRef& image, const char* state, const PullProgress& progress,
               const std::string& error = "");
  // An engine or registry error about `image`, said with what to do.
  Status Explain(const Status& error, const ImageRef& image, bool has_credentials) const;

  ContainerEngine& engine_;
  EventHub& hub_;
  const Clock& clock_;
  const std::string agent_id_;
  const Limits limits_;

  mutable Mutex mutex_;
  std::condition_variable pull_done_;  // signalled when an InFlight is done
  RegistryCredentials credentials_ GUARDED_BY(mutex_);
  std::map<std::string, std::shared_ptr<InFlight>> in_flight_ GUARDED_BY(mutex_);  // by ImageRef::Canonical()
};

}  // namespace slotd
