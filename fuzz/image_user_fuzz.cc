// Fuzz target: what an image holds that decides the user a kernel runs as,
// all of it the image author's. Byte 0 chooses: even, the rest is the tar
// archive the engine sends for one file (ParseFirstArchivedFile); odd, the
// rest is "<user>\n<passwd>\0<group>" (ResolveUser, and StatusIds and
// IdsProblem on the whole rest as a /proc status text).
// Invariants: nothing throws or crashes; a file read from an archive is no
// longer than the archive; a resolved user and group are ids the runtime
// takes (0 to 2^31-1) and read back from their label text as themselves
// (ParseRunAs), and a refusal is kInvalidArgument with a message.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "model/image_user.h"
#include "engine/docker/docker_answers.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    slotd::Result<slotd::ArchivedFile> file = slotd::ParseFirstArchivedFile(rest);
    if (file.ok()) {
      FUZZ_CHECK(file->content.size() <= rest.size(), "a file longer than its archive");
    } else {
      FUZZ_CHECK(!file.status().message().empty(), "an archive error without a message");
    }
    return 0;
  }
  const size_t newline = rest.find('\n');
  const std::string user(rest.substr(0, newline));
  const std::string_view files = newline == std::string_view::npos ? std::string_view() : rest.substr(newline + 1);
  const size_t nul = files.find('\0');
  const std::string_view passwd = files.substr(0, nul);
  const std::string_view group = nul == std::string_view::npos ? std::string_view() : files.substr(nul + 1);
  slotd::Result<slotd::RunAs> run_as = slotd::ResolveUser(user, passwd, group);
  if (run_as.ok()) {
    FUZZ_CHECK(run_as->uid >= 0 && run_as->uid <= 2147483647, "uid out of range: " + std::to_string(run_as->uid));
    FUZZ_CHECK(run_as->gid >= 0 && run_as->gid <= 2147483647, "gid out of range: " + std::to_string(run_as->gid));
    FUZZ_CHECK(slotd::ParseRunAs(run_as->Text()) == *run_as, "not read back from its label: " + run_as->Text());
  } else {
    FUZZ_CHECK(run_as.status().code() == slotd::Status::Code::kInvalidArgument, run_as.status().message());
    FUZZ_CHECK(!run_as.status().message().empty(), "a refusal without a message");
  }
  if (const std::optional<slotd::ProcessIds> ids = slotd::StatusIds(rest))
    (void)slotd::IdsProblem(*ids, slotd::ParseRunAs(user), data[0] % 4 == 1);
  return 0;
}
