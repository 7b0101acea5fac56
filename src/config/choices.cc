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

const ChoiceWords<Role>& RoleWords() {
  static const ChoiceWords<Role> words = {
      {Role::kViewer, "viewer"}, {Role::kOperator, "operator"}, {Role::kAdmin, "admin"}};
  return words;
}

const ChoiceWords<TlsVersion>& TlsVersionWords() {
  static const ChoiceWords<TlsVersion> words = {{TlsVersion::k12, "1.2"}, {TlsVersion::k13, "1.3"}};
  return words;
}

}  // namespace slotd
