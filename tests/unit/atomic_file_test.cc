// WriteFileAtomically: the one way files the agent keeps are written.

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "common/atomic_file.h"
#include "testing/temp_tree.h"

namespace slotd {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Lowers this process's file size limit to `bytes` (writes past it fail
// with EFBIG, as on a full disk) for the life of the object.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &before_);
    old_handler_ = ::signal(SIGXFSZ, SIG_IGN);
    rlimit lower = before_;
    lower.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &lower);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &before_);
    ::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit before_{};
  sighandler_t old_handler_;
};

TEST(AtomicFile, TheFileIsReplacedWhole) {
  TempTree dir("atomic-file-test");
  const std::string path = dir.root() + "/sd.json";
  ASSERT_TRUE(WriteFileAtomically(path, "[]\n").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "[1]\n").ok());
  EXPECT_EQ(Read(path), "[1]\n");
  Status refused = WriteFileAtomically(dir.root() + "/missing/sd.json", "[]\n");
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("check that its directory exists"), std::string::npos) << refused.message();
}

TEST(AtomicFile, AWriteThatFailsHalfWayLeavesThePreviousFileAndNoTemporaryFile) {
  TempTree dir("atomic-file-test");
  const std::string path = dir.root() + "/state.json";
  ASSERT_TRUE(WriteFileAtomically(path, "{\"draining\": false}\n").ok());
  Status failed;
  {
    FileSizeLimit limit(8);  // the new text is longer: its write fails part way, as on a full disk
    failed = WriteFileAtomically(path, "{\"draining\": true, \"padding\": \"" + std::string(4096, 'x') + "\"}\n");
  }
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.code(), Status::Code::kUnavailable);
  EXPECT_NE(failed.message().find("cannot write " + path), std::string::npos) << failed.message();
  EXPECT_NE(failed.message().find("the previous file is unchanged"), std::string::npos) << failed.message();
  EXPECT_EQ(Read(path), "{\"draining\": false}\n");
  int files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.root())) ++files;
  EXPECT_EQ(files, 1) << "a temporary file was left behind";
}

TEST(AtomicFile, TheFileGetsTheModeAskedForWhateverTheUmask) {
  TempTree dir("atomic-file-test");
  const std::string path = dir.root() + "/api.token";
  ASSERT_TRUE(WriteFileAtomically(path, "secret\n", 0600).ok());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

}  // namespace
}  // namespace slotd
