// ResolveMounts and MountStage: a request's mounts against [container]
// mount-allow on a real directory tree (links, "..", sockets, FIFOs and the
// agent's own files), and the binds the engine takes them from.
#include "agent/mounts.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/sysmacros.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "agent/mount_stage.h"
#include "testing/temp_tree.h"

namespace slotd {
namespace {

namespace fs = std::filesystem;

class MountsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tree_.Write("datasets/imagenet/train/0.jpg", "x");
    tree_.Write("shared/out/.keep", "");
    tree_.Write("secrets/key", "k");
    fs::create_symlink(tree_.root() + "/secrets", tree_.root() + "/datasets/escape");
    fs::create_symlink(tree_.root() + "/datasets/imagenet", tree_.root() + "/shared/imagenet-link");
    allowed_ = {{tree_.root() + "/datasets", "ro"}, {tree_.root() + "/shared", "rw"}};
  }

  // Resolves one mount of `source` at `target`.
  Result<std::vector<ResolvedMount>> Resolve(const std::string& source, const std::string& target, bool read_only,
                                             const std::vector<OwnPath>& own = {}) const {
    return ResolveMounts({{source, target, read_only}}, allowed_, own);
  }

  // The refusal of one mount of `source`: its code and message.
  Status Refusal(const std::string& source, bool read_only = true, const std::vector<OwnPath>& own = {}) const {
    Result<std::vector<ResolvedMount>> mounts = Resolve(source, "/data", read_only, own);
    return mounts.ok() ? Status::Ok() : mounts.status();
  }

  TempTree tree_{"slotd-mounts"};
  std::vector<MountAllow> allowed_;
};

TEST_F(MountsTest, AnAllowedDirectoryIsOpenedAsTheDirectoryItIs) {
  Result<std::vector<ResolvedMount>> mounts = ResolveMounts(
      {{tree_.root() + "/datasets/imagenet", "/data", true}, {tree_.root() + "/shared/out", "/out", false}}, allowed_,
      {});
  ASSERT_TRUE(mounts.ok()) << mounts.status().message();
  ASSERT_EQ(mounts->size(), 2u);
  struct stat st {};
  ASSERT_EQ(::stat((tree_.root() + "/datasets/imagenet").c_str(), &st), 0);
  const ResolvedMount& first = (*mounts)[0];
  EXPECT_EQ(first.path, tree_.root() + "/datasets/imagenet");
  EXPECT_TRUE(first.is_directory);
  EXPECT_EQ(first.device, st.st_dev);
  EXPECT_EQ(first.inode, st.st_ino);
  EXPECT_EQ(first.target, "/data");
  EXPECT_TRUE(first.read_only);
  EXPECT_TRUE(first.source.valid());
  EXPECT_EQ((*mounts)[1].target, "/out");
  EXPECT_FALSE((*mounts)[1].read_only);
}

TEST_F(MountsTest, AReadWriteMountOfAReadOnlyEntryIsRefused) {
  const Status refused = Refusal(tree_.root() + "/datasets/imagenet", /*read_only=*/false);
  EXPECT_EQ(refused.code(), Status::Code::kPermissionDenied);
  EXPECT_NE(refused.message().find("mounts[0]: " + tree_.root() + "/datasets/imagenet may be mounted "
                                   "read-only only; set \"readonly\": true"),
            std::string::npos)
      << refused.message();
}

TEST_F(MountsTest, SymbolicLinksBeneathAnAllowedDirectoryAreRefusedNotFollowed) {
  for (const std::string& source : {tree_.root() + "/datasets/escape", tree_.root() + "/datasets/escape/key"}) {
    SCOPED_TRACE(source);
    const Status refused = Refusal(source);
    EXPECT_EQ(refused.code(), Status::Code::kPermissionDenied);
    EXPECT_NE(refused.message().find("passes through a symbolic link (" + tree_.root() + "/datasets/escape)"),
              std::string::npos)
        << refused.message();
  }
  // A link from a read-write entry into a read-only one is not followed either.
  const Status linked = Refusal(tree_.root() + "/shared/imagenet-link", /*read_only=*/false);
  EXPECT_EQ(linked.code(), Status::Code::kPermissionDenied);
  EXPECT_NE(linked.message().find("passes through a symbolic link"), std::string::npos) << linked.message();
  for (const std::string& source : {tree_.root() + "/secrets", std::string("/etc")}) {
    SCOPED_TRACE(source);
    const Status refused = Refusal(source);
    EXPECT_EQ(refused.code(), Status::Code::kPermissionDenied);
    EXPECT_NE(refused.message().find("is not in a directory this agent lets kernels mount; allowed: " +
                                     tree_.root() + "/datasets (ro), " + tree_.root() + "/shared (rw)"),
              std::string::npos)
        << refused.message();
  }
}

TEST_F(MountsTest, ADirectorySwappedForALinkAfterTheCheckStillMountsWhatWasChecked) {
  Result<std::vector<ResolvedMount>> mounts = Resolve(tree_.root() + "/shared/out", "/out", false);
  ASSERT_TRUE(mounts.ok()) << mounts.status().message();
  fs::rename(tree_.root() + "/shared/out", tree_.root() + "/shared/out.moved");
  fs::create_symlink(tree_.root() + "/secrets", tree_.root() + "/shared/out");
  // The descriptor still names the directory that was checked.
  struct stat st {};
  ASSERT_EQ(::fstat((*mounts)[0].source.get(), &st), 0);
  struct stat moved {};
  ASSERT_EQ(::stat((tree_.root() + "/shared/out.moved").c_str(), &moved), 0);
  EXPECT_EQ(st.st_ino, moved.st_ino);
}

TEST_F(MountsTest, SocketsFifosAndDeviceNodesAreNeverMountedNorDirectoriesHoldingThem) {
  fs::create_directories(tree_.root() + "/shared/pipes");
  ASSERT_EQ(::mkfifo((tree_.root() + "/shared/pipes/fifo").c_str(), 0600), 0);
  Status fifo = Refusal(tree_.root() + "/shared/pipes/fifo");
  EXPECT_EQ(fifo.code(), Status::Code::kPermissionDenied);
  EXPECT_NE(fifo.message().find("is a FIFO"), std::string::npos) << fifo.message();
  Status holds_fifo = Refusal(tree_.root() + "/shared");
  EXPECT_EQ(holds_fifo.code(), Status::Code::kPermissionDenied);
  EXPECT_NE(holds_fifo.message().find("holds a FIFO (" + tree_.root() + "/shared/pipes/fifo)"), std::string::npos)
      << holds_fifo.message();
  fs::remove(tree_.root() + "/shared/pipes/fifo");

  // A socket deep down, as an engine's socket would be.
  fs::create_directories(tree_.root() + "/shared/run/docker");
  const std::string socket_path = tree_.root() + "/shared/run/docker/docker.sock";
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  ASSERT_LT(socket_path.size(), sizeof(address.sun_path));
  socket_path.copy(address.sun_path, socket_path.size());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  const Status holds_socket = Refusal(tree_.root() + "/shared");
  EXPECT_NE(holds_socket.message().find("holds a socket (" + socket_path + ")"), std::string::npos)
      << holds_socket.message();
  const Status socket = Refusal(socket_path);
  EXPECT_NE(socket.message().find("is a socket"), std::string::npos) << socket.message();
  ::close(fd);
  fs::remove(socket_path);

  if (::geteuid() == 0) {  // only root makes device nodes
    ASSERT_EQ(::mknod((tree_.root() + "/shared/run/null").c_str(), S_IFCHR | 0600, makedev(1, 3)), 0);
    const Status device = Refusal(tree_.root() + "/shared");
    EXPECT_NE(device.message().find("holds a character device"), std::string::npos) << device.message();
  }
}

TEST_F(MountsTest, TheAgentsOwnPathsAreNeverMountedNorWhatHoldsThemNorWhatIsInThem) {
  tree_.Write("shared/agent/ipc/agent.sock.txt", "");
  tree_.Write("shared/token", "secret");
  const std::vector<OwnPath> own = {{tree_.root() + "/shared/agent/ipc", "the agent's ipc-base-path", "agent.ipc-base-path"},
                                    {tree_.root() + "/shared/token", "the agent's token-file", "agent.token-file"}};
  const Status holds = Refusal(tree_.root() + "/shared/agent", true, own);
  EXPECT_EQ(holds.code(), Status::Code::kPermissionDenied);
  EXPECT_NE(holds.message().find("holds the agent's ipc-base-path (" + tree_.root() + "/shared/agent/ipc)"),
            std::string::npos)
      << holds.message();
  const Status inside = Refusal(tree_.root() + "/shared/agent/ipc/agent.sock.txt", true, own);
  EXPECT_NE(inside.message().find("lies in the agent's ipc-base-path"), std::string::npos) << inside.message();
  const Status is = Refusal(tree_.root() + "/shared/token", true, own);
  EXPECT_NE(is.message().find("is the agent's token-file"), std::string::npos) << is.message();
  // A hard link is the file itself.
  fs::create_directories(tree_.root() + "/shared/elsewhere");
  fs::create_hard_link(tree_.root() + "/shared/token", tree_.root() + "/shared/elsewhere/innocent");
  const Status linked = Refusal(tree_.root() + "/shared/elsewhere", true, own);
  EXPECT_EQ(linked.code(), Status::Code::kPermissionDenied);
  EXPECT_NE(linked.message().find("a link to a file of the agent"), std::string::npos) << linked.message();
  EXPECT_TRUE(Resolve(tree_.root() + "/shared/out", "/out", false, own).ok());
}

TEST_F(MountsTest, TargetsOverWhatTheAgentOrTheEngineProvidesAreRefused) {
  for (const std::string& target : {"/proc", "/proc/1", "/sys", "/dev", "/dev/shm", "/home/work", "/home/work/x", "/",
                                    "/etc", "/etc/hosts", "/etc/resolv.conf", "/etc/hostname"}) {
    SCOPED_TRACE(target);
    Result<std::vector<ResolvedMount>> mounts = Resolve(tree_.root() + "/shared/out", target, false);
    ASSERT_FALSE(mounts.ok());
    EXPECT_EQ(mounts.status().code(), Status::Code::kPermissionDenied);
    EXPECT_EQ(mounts.status().message().rfind("mounts[0].target: ", 0), 0u) << mounts.status().message();
  }
  EXPECT_TRUE(Resolve(tree_.root() + "/shared/out", "/home/workspace", false).ok());
  EXPECT_TRUE(Resolve(tree_.root() + "/shared/out", "/home", false).ok());
  EXPECT_TRUE(Resolve(tree_.root() + "/shared/out", "/etc/myapp", false).ok());
}

TEST_F(MountsTest, WithoutMountAllowNothingMayBeMountedAndAMissingSourceIsABadRequest) {
  Result<std::vector<ResolvedMount>> none = ResolveMounts({{tree_.root() + "/shared", "/data", true}}, {}, {});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("allowed: none ([container] mount-allow is not set)"), std::string::npos)
      << none.status().message();
  const Status missing = Refusal(tree_.root() + "/datasets/nope");
  EXPECT_EQ(missing.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(missing.message().rfind("mounts[0].source: ", 0), 0u) << missing.message();
}

TEST_F(MountsTest, WhatAProcessSeesAtATargetIsCheckedByDeviceAndInode) {
  // This process's root is the host's, so a mount's target is where its source is.
  Result<std::vector<ResolvedMount>> mounts = Resolve(tree_.root() + "/shared/out", tree_.root() + "/shared/out", true);
  ASSERT_TRUE(mounts.ok()) << mounts.status().message();
  EXPECT_TRUE(VerifyMounted(::getpid(), *mounts).ok());
  (*mounts)[0].target = tree_.root() + "/datasets";
  const Status differs = VerifyMounted(::getpid(), *mounts);
  EXPECT_EQ(differs.code(), Status::Code::kPermissionDenied);
  EXPECT_NE(differs.message().find("is not " + tree_.root() + "/shared/out"), std::string::npos) << differs.message();
}

TEST_F(MountsTest, AStagedBindKeepsTheCheckedDirectoryWhateverHappensToItsNameAndGoesWithoutTouchingIt) {
  Result<std::vector<ResolvedMount>> mounts = Resolve(tree_.root() + "/shared/out", "/out", true);
  ASSERT_TRUE(mounts.ok()) << mounts.status().message();
  MountStage stage(tree_.root() + "/stage");
  Result<std::vector<Mount>> binds = stage.Bind("k1", *mounts);
  if (!binds.ok() && binds.status().message().find("needs an agent that runs as root") != std::string::npos)
    GTEST_SKIP() << "binding needs CAP_SYS_ADMIN: " << binds.status().message();
  ASSERT_TRUE(binds.ok()) << binds.status().message();
  ASSERT_EQ(binds->size(), 1u);
  const Mount& bind = (*binds)[0];
  EXPECT_EQ(bind.source, tree_.root() + "/stage/k1/0");
  EXPECT_EQ(bind.target, "/out");
  EXPECT_TRUE(bind.read_only);
  fs::rename(tree_.root() + "/shared/out", tree_.root() + "/shared/out.moved");
  fs::create_symlink(tree_.root() + "/secrets", tree_.root() + "/shared/out");
  EXPECT_TRUE(fs::exists(bind.source + "/.keep"));
  EXPECT_FALSE(fs::exists(bind.source + "/key"));
  const int write = ::open((bind.source + "/new").c_str(), O_CREAT | O_WRONLY, 0600);
  EXPECT_LT(write, 0) << "a read-only bind took a write";
  if (write >= 0) ::close(write);
  ASSERT_TRUE(stage.Remove("k1").ok());
  EXPECT_FALSE(fs::exists(tree_.root() + "/stage/k1"));
  EXPECT_TRUE(fs::exists(tree_.root() + "/shared/out.moved/.keep"));  // the data stays
  // A leftover of a kernel that is gone is unbound by Collect.
  ASSERT_TRUE(stage.Bind("gone", *mounts).ok());
  stage.Collect([] { return std::set<std::string>{"k1"}; });
  EXPECT_FALSE(fs::exists(tree_.root() + "/stage/gone"));
  EXPECT_TRUE(fs::exists(tree_.root() + "/shared/out.moved/.keep"));
}

}  // namespace
}  // namespace slotd
