// NodeImages: the engine's images as the agent uses them: bringing a
// kernel's image onto the node as its pull policy says (ImagePuller, with
// the registry credentials), pulling one on request, listing them with
// their use, and removing unused ones when the engine's disk fills
// (ImageCollector).
//
// Thread-safety: every method may be called from any thread; it holds no
// lock of the agent's and is never called under one.
#pragma once

#include <string>
#include <vector>

#include "agent/event_hub.h"
#include "agent/image_collector.h"
#include "agent/image_puller.h"
#include "agent/kernel_service.h"
#include "common/clock.h"
#include "common/status.h"
#include "config/config.h"
#include "engine/container_engine.h"
#include "model/image_ref.h"

namespace slotd {

class NodeImages {
 public:
  // `config`, `engine`, `hub` and `clock` must outlive it; no registry
  // credentials until LoadCredentials.
  NodeImages(const Config& config, ContainerEngine& engine, EventHub& hub, Clock& clock);

  // Reads [container] registry-auth-file (at start, and again on SIGHUP);
  // later pulls send its credentials. On error the credentials in use stay
  // and the message names the file and what is wrong.
  Status LoadCredentials();
  // `image` on the node as `policy` asks (ImagePuller::Ensure): the image
  // when the pull policy had it inspected or pulled, nullopt when it was
  // left to the create to find.
  Result<std::optional<ImageInfo>> Ensure(const ImageRef& image, PullPolicy policy);
  // Records that a kernel was made from `image` now (for the collector).
  void RecordUse(const ImageRef& image);
  // Pulls `image` now, whether or not it is there (slotctl pull), and
  // returns it as the engine has it; errors as ImagePuller's.
  Result<ImageInfo> PullNow(const std::string& image);
  // Every image of the engine with its use (the newest container of any
  // owner made from it; this agent's kernels running it), newest use first.
  Result<std::vector<KernelService::NodeImage>> List();
  // One round of [container] image-gc-high/low (ImageCollector::CollectOnce).
  Result<std::vector<std::string>> Collect() { return collector_.CollectOnce(); }

 private:
  const Config& config_;
  ContainerEngine& engine_;
  Clock& clock_;
  ImagePuller puller_;
  ImageCollector collector_;
};

}  // namespace slotd
