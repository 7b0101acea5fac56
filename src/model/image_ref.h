// Image references as Docker reads them: [registry/]repository[:tag][@digest].
// Pure text rules, shared by the engine (what to pull), the registry
// credentials (whose they are) and the puller (one pull per image).
#pragma once

#include <string>

#include "common/status.h"

namespace slotd {

struct ImageRef {
  std::string name;        // the reference as written ("127.0.0.1:5000/team/torch:2.3")
  std::string registry;    // "127.0.0.1:5000", "registry.example.com"; "docker.io" when the name has none
  std::string repository;  // the name as written, without tag or digest ("127.0.0.1:5000/team/torch")
  std::string tag;         // "latest" when neither a tag nor a digest is written; "" with a digest alone
  std::string digest;      // "sha256:..."; "" when none is written

  // repository@digest when there is a digest, else repository:tag: one
  // spelling per image, for comparing and for keys.
  std::string Canonical() const { return digest.empty() ? repository + ":" + tag : repository + "@" + digest; }

  bool operator==(const ImageRef&) const = default;
};

// Splits `image`, once: code that takes an ImageRef never parses again.
// The first path component is a registry when it has a ".", a ":" or an
// upper-case letter, or is "localhost" (Docker's rule); otherwise the image
// is Docker Hub's. Never fails: ValidateImageRef says whether the name is one.
ImageRef ParseImageRef(const std::string& image);

// OK when `image` is a reference as the engine's grammar has it
// (distribution/reference): [host[:port]/]path[:tag][@algorithm:hex], the
// path in lower case, components of [a-z0-9] joined by ".", "_", "__" or
// dashes, at most 255 bytes before the tag. Otherwise kInvalidArgument
// saying what is wrong, for the caller to prefix with its field. A name
// that passes never has an empty, "." or ".." path component, so it cannot
// reach another engine route.
Status ValidateImageRef(const std::string& image);

}  // namespace slotd
