// Image references as Docker reads them: [registry/]repository[:tag][@digest].
// Pure text rules, shared by the engine (what to pull), the registry
// credentials (whose they are) and the puller (one pull per image).
#pragma once

#include <string>

namespace slotd {

struct ImageRef {
  std::string registry;    // "127.0.0.1:5000", "registry.example.com"; "docker.io" when the name has none
  std::string repository;  // the name as written, without tag or digest ("127.0.0.1:5000/team/torch")
  std::string tag;         // "latest" when neither a tag nor a digest is written; "" with a digest alone
  std::string digest;      // "sha256:..."; "" when none is written

  // repository@digest when there is a digest, else repository:tag: one
  // spelling per image, for comparing and for keys.
  std::string Canonical() const;
};

// Splits `image`. The first path component is a registry when it has a "."
// or a ":" or is "localhost" (Docker's rule); otherwise the image is Docker
// Hub's. Never fails: validating the name is the engine's business.
ImageRef ParseImageRef(const std::string& image);

}  // namespace slotd
