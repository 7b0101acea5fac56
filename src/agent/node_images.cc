#include "agent/node_images.h"

#include <algorithm>
#include <utility>

#include "agent/registry_credentials.h"
#include "model/label_codec.h"

namespace slotd {

NodeImages::NodeImages(const Config& config, ContainerEngine& engine, EventHub& hub, Clock& clock)
    : config_(config),
      engine_(engine),
      clock_(clock),
      puller_(engine, hub, clock, config.agent.id,
              ImagePuller::Limits{config.container.pull_timeout, config.container.pull_stall_timeout},
              RegistryCredentials()),
      collector_(engine, hub, clock, config.agent.id,
                 ImageCollector::Marks{static_cast<int>(config.container.image_gc_high),
                                       static_cast<int>(config.container.image_gc_low)},
                 config.node.claims_dir + "/image-gc.lock") {}

Status NodeImages::LoadCredentials() {
  Result<RegistryCredentials> credentials = RegistryCredentials::Load(config_.container.registry_auth_file);
  if (!credentials.ok()) return credentials.status();
  puller_.SetCredentials(std::move(*credentials));
  return Status::Ok();
}

Result<std::optional<ImageInfo>> NodeImages::Ensure(const ImageRef& image, PullPolicy policy) {
  return puller_.Ensure(image, policy);
}

void NodeImages::RecordUse(const ImageRef& image) { collector_.RecordUse(image, clock_.UnixSeconds()); }

Result<ImageInfo> NodeImages::PullNow(const std::string& image) {
  if (Status pulled = puller_.Pull(ParseImageRef(image)); !pulled.ok()) return pulled;
  return engine_.InspectImage(image);
}

Result<std::vector<KernelService::NodeImage>> NodeImages::List() {
  using NodeImage = KernelService::NodeImage;
  Result<std::vector<ImageInfo>> images = engine_.ListImages();
  if (!images.ok()) return images.status();
  Result<std::vector<ContainerInfo>> containers = engine_.List({});  // every owner's: what uses each image
  if (!containers.ok()) return containers.status();
  std::vector<NodeImage> out;
  for (ImageInfo& info : *images) {
    NodeImage image{std::move(info), 0, {}};
    for (const ContainerInfo& c : *containers) {
      if (c.image_id != image.info.id) continue;
      image.last_used = std::max(image.last_used, c.created_unix);
      auto owner = c.labels.find(label::kOwner);
      auto kernel_id = c.labels.find(label::kKernelId);
      if (owner != c.labels.end() && owner->second == config_.agent.id && kernel_id != c.labels.end())
        image.kernel_ids.push_back(kernel_id->second);
    }
    std::sort(image.kernel_ids.begin(), image.kernel_ids.end());
    out.push_back(std::move(image));
  }
  std::stable_sort(out.begin(), out.end(), [](const NodeImage& a, const NodeImage& b) {
    return std::max(a.last_used, a.info.created_unix) > std::max(b.last_used, b.info.created_unix);
  });
  return out;
}

}  // namespace slotd
