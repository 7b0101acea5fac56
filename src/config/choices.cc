#include "config/choices.h"

namespace slotd {

const ChoiceWords<ScratchType>& ScratchTypeWords() {
  static const ChoiceWords<ScratchType> words = {
      {ScratchType::kHostDir, "hostdir"}, {ScratchType::kHostFile, "hostfile"}, {ScratchType::kTmpfs, "tmpfs"}};
  return words;
}

const ChoiceWords<StatsType>& StatsTypeWords() {
  static const ChoiceWords<StatsType> words = {{StatsType::kCgroup, "cgroup"}, {StatsType::kDocker, "docker"}};
  return words;
}

const ChoiceWords<PullPolicy>& PullPolicyWords() {
  static const ChoiceWords<PullPolicy> words = {
      {PullPolicy::kDigest, "digest"}, {PullPolicy::kTag, "tag"}, {PullPolicy::kNone, "none"}};
  return words;
}

}  // namespace slotd
