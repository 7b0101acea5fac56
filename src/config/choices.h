// The settings that are choices, as enums: agent.toml's words are read into
// them once, when the file is loaded (ChoiceType in schema.h), and code
// compares values, never strings.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace slotd {

// How each kernel's scratch space is made ([container] scratch-type).
enum class ScratchType {
  kHostDir,   // a directory under scratch-root (sized by project quota where the filesystem has them)
  kHostFile,  // an ext4 image file under scratch-root, loop-mounted: always sized
  kTmpfs,     // a tmpfs in the kernel's memory
};

// Where kernels' usage is read ([container] stats-type).
enum class StatsType {
  kCgroup,  // the kernels' cgroup files, directly
  kDocker,  // the engine's stats API
};

// When the agent pulls a kernel's image ([container] auto-pull, a request's
// "pull"), from the loosest to the strictest.
enum class PullPolicy {
  kNone,    // never: the image must be on the node
  kTag,     // when the node does not have it
  kDigest,  // also when its tag now names another digest in the registry
};

// What a client of the API may do (SPEC.md "Roles"), each role able to do
// everything the ones before it can: the order of the enumerators is the
// order of the roles.
enum class Role {
  kViewer,    // reads the node, its kernels and their usage; never logs or execs
  kOperator,  // also creates, stops, deletes and restarts kernels, execs, reads logs, pulls
  kAdmin,     // also drains the agent and its devices: anything agent-wide
};

// The oldest TLS version the API's TCP listener accepts ([agent] tls-min-version).
enum class TlsVersion { k12, k13 };

// A choice and the word agent.toml and the API write for it.
template <typename E>
using ChoiceWords = std::vector<std::pair<E, std::string>>;

// The words of each choice, in the order the docs list them.
const ChoiceWords<ScratchType>& ScratchTypeWords();
const ChoiceWords<StatsType>& StatsTypeWords();
const ChoiceWords<PullPolicy>& PullPolicyWords();
const ChoiceWords<Role>& RoleWords();
const ChoiceWords<TlsVersion>& TlsVersionWords();

// The word of `choice`.
template <typename E>
const std::string& WordOf(const ChoiceWords<E>& words, E choice) {
  for (const auto& [value, word] : words)
    if (value == choice) return word;
  return words.front().second;  // every enumerator is in its table
}

// The choice `word` names; nullopt when it names none.
template <typename E>
std::optional<E> ChoiceOf(const ChoiceWords<E>& words, std::string_view word) {
  for (const auto& [value, each] : words)
    if (each == word) return value;
  return std::nullopt;
}

}  // namespace slotd
