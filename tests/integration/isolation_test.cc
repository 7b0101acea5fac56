// Isolation against a hostile kernel: a kernel racing to swap a mounted
// directory for a link, images that are root under another name or number,
// scratch that other users could reach.
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "integration/harness.h"
#include "testing/engine_proxy.h"

namespace slotd::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// An image made from the test image: `passwd` (when not empty) as its
// /etc/passwd, `user` as its USER; tagged `tag`.
void MakeImage(const std::string& tag, const std::string& user, const std::string& passwd = "") {
  const std::string base = "slotd-isolation-base-" + RunTag();
  CommandResult r = RunCommand({"docker", "create", "--name", base, kTestImage});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  if (!passwd.empty()) {
    TempDir dir;
    WriteFile(dir.path() + "/passwd", passwd);
    r = RunCommand({"docker", "cp", dir.path() + "/passwd", base + ":/etc/passwd"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  CommitImage(base, tag, {"USER " + user});
  RunCommand({"docker", "rm", "-f", base});
}

// Creates, on `agent`, a kernel of `image`, made from the test image with
// `user` (and `passwd` as its /etc/passwd, when not empty), and expects it
// refused (403) with each of `words` in the message; removes the image.
void ExpectUserRefused(const AgentProcess& agent, const std::string& image, const std::string& user,
                       const std::string& passwd, const std::vector<std::string>& words) {
  ASSERT_NO_FATAL_FAILURE(MakeImage(image, user, passwd));
  json k = SleepKernel("k");
  k["image"] = image;
  const HttpResponse refused = agent.Call("POST", "/v1/kernels", k.dump());
  EXPECT_EQ(refused.status, 403) << refused.body;
  for (const std::string& word : words) EXPECT_NE(refused.body.find(word), std::string::npos) << refused.body;
  RunCommand({"docker", "rmi", image});
}

// The finding: ResolveMounts checked a path, the engine then mounted whatever
// the path named by then, so a kernel swapping a directory for a link got
// another kernel the directory the link pointed to, read-write.
TEST(Isolation, AKernelRacingToSwapAMountedDirectoryForALinkNeverGetsAnotherKernelWhatTheLinkPointsTo) {
  TempDir host;
  const std::string allowed = host.path() + "/shared";
  const std::string outside = host.path() + "/outside";
  fs::create_directories(allowed + "/sub");
  fs::create_directories(outside);
  WriteFile(allowed + "/sub/inside-marker", "inside\n");
  WriteFile(outside + "/outside-secret", "secret\n");
  AgentProcess agent(TwoCoreAgent("race", "mount-allow = [{ path = \"" + allowed + "\", mode = \"rw\" }]\n"));
  ASSERT_TRUE(agent.Start()) << agent.log();

  // The racer swaps sub for a link to the outside directory, and back, as fast as it can.
  json racer = SleepKernel("racer");
  racer["mounts"] = {{{"source", allowed}, {"target", "/shared"}}};
  racer["command"] = {"sh", "-c",
                      "cd /shared && while true; do mv sub sub.real && ln -s " + outside +
                          " sub && rm sub && mv sub.real sub; done"};
  agent.CreateKernel(racer);

  int mounted = 0;
  for (int i = 0; i < 12; ++i) {
    json victim = SleepKernel("victim");
    victim["mounts"] = {{{"source", allowed + "/sub"}, {"target", "/data"}}};
    const HttpResponse created = agent.Call("POST", "/v1/kernels", victim.dump());
    if (created.status != 201) {
      // Refused while sub was a link (403) or missing (400): never mounted.
      EXPECT_TRUE(created.status == 403 || created.status == 400) << created.status << " " << created.body;
      continue;
    }
    ++mounted;
    const std::string seen = RunIn(agent, "victim", "ls /data");
    EXPECT_EQ(seen.find("outside-secret"), std::string::npos) << "the victim got the outside directory: " << seen;
    EXPECT_NE(seen.find("inside-marker"), std::string::npos) << seen;
    agent.CallJson("DELETE", "/v1/kernels/victim", nullptr, 200);
  }
  RecordProperty("mounted", mounted);
  agent.CallJson("DELETE", "/v1/kernels/racer", nullptr, 200);
  EXPECT_TRUE(fs::exists(outside + "/outside-secret"));
  const std::string binds = agent.dir() + "/ipc/mounts";
  EXPECT_TRUE(!fs::exists(binds) || fs::is_empty(binds)) << "binds left behind after the kernels went";
}

// The same finding without luck: the engine is held (as a slow engine
// would be) from the moment the agent has taken the request until the
// source has been swapped for a link, so the swap always falls between the
// agent's check and the runtime's mount.
TEST(Isolation, ASourceSwappedForALinkWhileTheEngineIsHeldIsNeverWhatTheKernelGets) {
  TempDir host;
  const std::string allowed = host.path() + "/shared";
  const std::string outside = host.path() + "/outside";
  fs::create_directories(allowed + "/sub");
  fs::create_directories(outside);
  WriteFile(allowed + "/sub/inside-marker", "inside\n");
  WriteFile(outside + "/outside-secret", "secret\n");
  EngineProxy proxy(DockerHost());
  AgentOptions o = TwoCoreAgent("held", "mount-allow = [{ path = \"" + allowed + "\", mode = \"rw\" }]\n");
  o.docker_host = proxy.docker_host();
  AgentProcess agent(o);
  ASSERT_TRUE(agent.Start()) << agent.log();

  json victim = SleepKernel("victim");
  victim["mounts"] = {{{"source", allowed + "/sub"}, {"target", "/data"}}};
  proxy.Freeze(true);
  HttpResponse created;
  std::thread create([&] { created = agent.Call("POST", "/v1/kernels", victim.dump()); });
  // The kernel is listed once its request has passed the mount checks.
  bool taken = false;
  for (int i = 0; i < 500 && !taken; ++i) {
    taken = agent.CallJson("GET", "/v1/kernels", nullptr, 200)["kernels"].size() == 1;
    if (!taken) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  fs::rename(allowed + "/sub", allowed + "/sub.real");
  fs::create_directory_symlink(outside, allowed + "/sub");
  proxy.Freeze(false);
  create.join();
  ASSERT_TRUE(taken) << "the create was never listed";
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string seen = RunIn(agent, "victim", "ls /data");
  EXPECT_EQ(seen.find("outside-secret"), std::string::npos) << "the kernel got the link's target: " << seen;
  EXPECT_NE(seen.find("inside-marker"), std::string::npos) << seen;
  agent.CallJson("DELETE", "/v1/kernels/victim", nullptr, 200);
}

// The finding: a mount-allow entry that held the engine's socket let a
// kernel mount docker.sock and start a container with the host's / in it.
TEST(Isolation, TheEnginesSocketAndTheAgentsOwnFilesCannotBeMountedEvenFromAnAllowedDirectory) {
  TempDir host;
  const std::string allowed = host.path() + "/shared";
  fs::create_directories(allowed + "/data");
  AgentOptions o = TwoCoreAgent("sock", "mount-allow = [{ path = \"" + allowed + "\", mode = \"ro\" }]\n");
  o.token = "a-token-" + RunTag();
  AgentProcess agent(o);
  ASSERT_TRUE(agent.Start()) << agent.log();
  // An engine-like socket inside the allowed directory.
  const std::string socket = allowed + "/data/docker.sock";
  const int listener = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  ASSERT_LT(socket.size(), sizeof(address.sun_path));
  socket.copy(address.sun_path, socket.size());
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  for (const std::string& source : {socket, allowed + "/data", allowed}) {
    SCOPED_TRACE(source);
    json k = SleepKernel("sock");
    k["mounts"] = {{{"source", source}, {"target", "/data"}, {"readonly", true}}};
    const HttpResponse refused = agent.Call("POST", "/v1/kernels", k.dump());
    EXPECT_EQ(refused.status, 403) << refused.body;
    EXPECT_NE(refused.body.find("socket"), std::string::npos) << refused.body;
  }
  ::close(listener);
  fs::remove(socket);
  // A hard link of the agent's token file, put where kernels may mount.
  fs::create_hard_link(agent.dir() + "/token", allowed + "/data/innocent");
  json k = SleepKernel("token");
  k["mounts"] = {{{"source", allowed + "/data"}, {"target", "/data"}, {"readonly", true}}};
  const HttpResponse refused = agent.Call("POST", "/v1/kernels", k.dump());
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_NE(refused.body.find("a link to a file of the agent"), std::string::npos) << refused.body;
  const json described = agent.CallJson("GET", "/v1/agent", nullptr, 200);
  EXPECT_EQ(described["resources"]["cpu"]["used"], 0) << described.dump();  // nothing held by the refusals
}

// The finding: a mount-allow entry in the engine's data root (its
// containers' and images' files, every tenant's) was accepted, so a kernel
// could mount another kernel's files.
TEST(Isolation, AMountAllowEntryInTheEnginesDataRootIsRefusedAtStartAndByCheck) {
  Result<EngineInfo> info = Engine().Info();
  ASSERT_TRUE(info.ok()) << info.status().message();
  const std::string& root = info->data_root;
  for (const std::string& entry : {root + "/containers", root}) {
    SCOPED_TRACE(entry);
    AgentProcess agent(TwoCoreAgent("root", "mount-allow = [{ path = \"" + entry + "\", mode = \"ro\" }]\n"));
    EXPECT_FALSE(agent.Start());
    EXPECT_NE(agent.log().find("the container engine's data root (" + root + ")"), std::string::npos) << agent.log();
    const CommandResult checked = Slotd({"check", agent.config_path()});
    EXPECT_EQ(checked.exit_code, 1) << checked.out << checked.err;
    EXPECT_NE(checked.out.find("mount-allow[0]: " + entry), std::string::npos) << checked.out;
  }
}

// The finding: only the strings "root" and "0" were refused, so USER 00,
// +0, 0000:0 and a name with uid 0 in the image's passwd ran as root.
TEST(Isolation, AnImageThatIsRootByAnotherNumberOrNameDoesNotRunWithoutAllowRoot) {
  const std::string tag = RunTag();
  const std::string passwd = "root:x:0:0:root:/:/bin/sh\ntoor:x:0:0:root again:/:/bin/sh\n";
  struct Case {
    std::string user;
    std::string passwd;
  };
  const std::vector<Case> cases = {{"00", ""}, {"+0", ""}, {"0000:0", ""}, {"toor", passwd}};
  AgentOptions o = TwoCoreAgent("root");
  o.allow_root = false;
  AgentProcess agent(o);
  ASSERT_TRUE(agent.Start()) << agent.log();
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].user);
    ExpectUserRefused(agent, "slotd-test/user-" + std::to_string(i) + ":" + tag, cases[i].user, cases[i].passwd,
                      {"runs as root", "allow-root is false"});
  }
  EXPECT_EQ(agent.CallJson("GET", "/v1/kernels", nullptr, 200)["kernels"].size(), 0u);
  const CommandResult left = RunCommand({"docker", "ps", "-aq", "--filter", "label=ai.backend.owner=" + o.id});
  EXPECT_EQ(left.out, "") << "containers left by refused creates";
}

// An image whose user "work" (uid 1000, gid 1000) owns the image's
// /etc/passwd and /etc/group, as an image that chowns them does; tagged `tag`.
void MakeOwnUserDatabaseImage(const std::string& tag) {
  const std::string base = "slotd-isolation-base-" + RunTag();
  CommandResult r = RunCommand({"docker", "create", "--name", base, kTestImage});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  TempDir dir;
  const std::pair<const char*, const char*> files[] = {
      {"passwd", "root:x:0:0:root:/:/bin/sh\nwork:x:1000:1000::/home/work:/bin/sh\n"},
      {"group", "root:x:0:\nwork:x:1000:\n"}};
  for (const auto& [name, text] : files) {
    const std::string path = dir.path() + "/" + name;
    WriteFile(path, text);
    ASSERT_EQ(::chown(path.c_str(), 1000, 1000), 0);
    // -a: the copy keeps the file's owner, as an image that chowns it has.
    r = RunCommand({"docker", "cp", "-a", path, base + ":/etc/" + name});
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  CommitImage(base, tag, {"USER work"});
  RunCommand({"docker", "rm", "-f", base});
}

// Waits up to 20 s for the file `path` and returns what it holds ("" when it never came).
std::string WaitForFile(const std::string& path) {
  for (int i = 0; i < 200 && !fs::exists(path); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // written whole by then: one short echo
  return fs::exists(path) ? ReadFile(path) : "";
}

// The finding: the user was checked once, at create, by name, and the engine
// looks a name up again in the kernel's own /etc/passwd at every start and
// exec; a kernel able to write that file made itself root in every later
// exec, exec probe, pre_stop and restart, and left set-uid-root files in its
// read-write mounts.
TEST(Isolation, AKernelThatRewritesItsOwnPasswdIsNeverRootInAnyProcessTheAgentStarts) {
  const std::string image = "slotd-test/own-passwd:" + RunTag();
  ASSERT_NO_FATAL_FAILURE(MakeOwnUserDatabaseImage(image));
  TempDir data;
  fs::permissions(data.path(), fs::perms::all);
  AgentOptions o = TwoCoreAgent("passwd", "mount-allow = [{ path = \"" + data.path() + "\", mode = \"rw\" }]\n");
  o.allow_root = false;
  AgentProcess agent(o);
  ASSERT_TRUE(agent.Start()) << agent.log();
  json k = SleepKernel("k");
  k["image"] = image;
  k["mounts"] = {{{"source", data.path()}, {"target", "/data"}, {"readonly", false}}};
  k["pre_stop"] = {"sh", "-c", "id -u > /data/pre-stop; id -g >> /data/pre-stop"};
  k["health"] = {{"exec", {"sh", "-c", "id -u > /data/probe; id -g >> /data/probe"}}, {"interval", "200ms"}};
  k["restart"] = {{"policy", "always"}, {"backoff", {{"initial", "100ms"}}}};
  const json created = agent.CreateKernel(k);
  EXPECT_EQ(RunIn(agent, "k", "id -u; id -g"), "1000\n1000\n");
  if (RunIn(agent, "k", "stat -c %u /etc/passwd") != "1000\n" && EngineIsPodman())
    GTEST_SKIP() << "Podman's docker cp -a did not keep the file's owner, so this engine's image cannot be made so";

  // The attack: the kernel makes its user root in its own files.
  EXPECT_EQ(RunIn(agent, "k", "echo 'work:x:0:0::/:/bin/sh' > /etc/passwd && echo 'work:x:0:' > /etc/group && "
                              "echo rewritten"),
            "rewritten\n");
  EXPECT_EQ(RunIn(agent, "k", "id -u; id -g; id -G"), "1000\n1000\n1000\n") << "an exec through the API";
  fs::remove(data.path() + "/probe");
  EXPECT_EQ(WaitForFile(data.path() + "/probe"), "1000\n1000\n") << "an exec health probe";

  agent.CallJson("POST", "/v1/kernels/k/restart", nullptr, 200);
  EXPECT_EQ(RunIn(agent, "k", "grep -E '^(Uid|Gid):' /proc/1/status"), "Uid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\n")
      << "the first process after POST /restart";

  Result<ContainerInfo> info = Engine().Inspect(created["container_id"].get<std::string>());
  ASSERT_TRUE(info.ok()) << info.status().message();
  ASSERT_GT(info->pid, 0);
  ASSERT_EQ(::kill(info->pid, SIGKILL), 0);  // a crash: its restart policy starts it again
  json back;
  for (int i = 0; i < 100; ++i) {
    back = agent.CallJson("GET", "/v1/kernels/k", nullptr, 200);
    if (back["state"] == "RUNNING" && back["restarts"] == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(back["restarts"], 1) << back.dump();
  EXPECT_EQ(RunIn(agent, "k", "grep -E '^(Uid|Gid):' /proc/1/status"), "Uid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\n")
      << "the first process after a restart of its restart policy";

  agent.CallJson("DELETE", "/v1/kernels/k", nullptr, 200);
  EXPECT_EQ(ReadFile(data.path() + "/pre-stop"), "1000\n1000\n") << "its pre_stop command";
  for (const fs::directory_entry& entry : fs::directory_iterator(data.path())) {
    struct stat st {};
    ASSERT_EQ(::stat(entry.path().c_str(), &st), 0);
    EXPECT_NE(st.st_uid, 0u) << entry.path() << " belongs to root";
  }
  RunCommand({"docker", "rmi", image});
}

// The finding: a user in root's group (gid 0) was let run without
// allow-root; group 0 is how an image makes /etc/passwd writable to it.
TEST(Isolation, AnImageWhoseUserIsInRootsGroupDoesNotRunWithoutAllowRoot) {
  const std::string tag = RunTag();
  AgentOptions o = TwoCoreAgent("gid0");
  o.allow_root = false;
  AgentProcess agent(o);
  ASSERT_TRUE(agent.Start()) << agent.log();
  const std::string passwd = "root:x:0:0:root:/:/bin/sh\nwheel:x:1000:0::/:/bin/sh\n";
  const std::pair<std::string, std::string> cases[] = {{"1000:0", ""}, {"wheel", passwd}, {"1000:root", ""}};
  for (size_t i = 0; i < std::size(cases); ++i) {
    SCOPED_TRACE(cases[i].first);
    ExpectUserRefused(agent, "slotd-test/gid0-" + std::to_string(i) + ":" + tag, cases[i].first, cases[i].second,
                      {"root's group", "allow-root is false"});
  }
  const CommandResult left = RunCommand({"docker", "ps", "-aq", "--filter", "label=ai.backend.slotd.user-probe"});
  EXPECT_EQ(left.out, "") << "containers made to read the images' users were left behind";
}

// The findings: scratch was 0777 without kernel-uid, so any local user could
// replace a kernel's files; and a non-root kernel could still gain root
// through a set-uid file of its image.
TEST(Isolation, AKernelsScratchBelongsToItsImagesUserAloneAndItGainsNoPrivileges) {
  const std::string image = "slotd-test/user-nobody:" + RunTag();
  ASSERT_NO_FATAL_FAILURE(MakeImage(image, "nobody"));
  AgentOptions o = TwoCoreAgent("nobody");
  o.allow_root = false;
  AgentProcess agent(o);
  ASSERT_TRUE(agent.Start()) << agent.log();
  json k = SleepKernel("job");
  k["image"] = image;
  agent.CreateKernel(k);
  EXPECT_EQ(RunIn(agent, "job", "id -u"), "65534\n");
  EXPECT_EQ(RunIn(agent, "job", "echo ok > /home/work/f && cat /home/work/f"), "ok\n");
  EXPECT_EQ(RunIn(agent, "job", "grep NoNewPrivs /proc/self/status"), "NoNewPrivs:\t1\n");
  struct stat st {};
  ASSERT_EQ(::stat((agent.dir() + "/var/scratch/job").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(st.st_uid, 65534u);
  EXPECT_EQ(st.st_gid, 65534u);
  agent.CallJson("DELETE", "/v1/kernels/job", nullptr, 200);
  RunCommand({"docker", "rmi", image});
}

// The finding: a target of /etc made the engine's start fail, and the agent
// answered 500 with the engine's data-root path in the message.
TEST(Isolation, AMountOverEtcIsRefusedUpFrontWithoutTheEnginesPaths) {
  TempDir host;
  fs::create_directories(host.path() + "/shared/conf");
  AgentProcess agent(TwoCoreAgent("etc", "mount-allow = [{ path = \"" + host.path() + "/shared\", mode = \"ro\" }]\n"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  for (const char* target : {"/etc", "/etc/hosts", "/etc/resolv.conf"}) {
    SCOPED_TRACE(target);
    json k = SleepKernel("etc");
    k["mounts"] = {{{"source", host.path() + "/shared/conf"}, {"target", target}, {"readonly", true}}};
    const HttpResponse refused = agent.Call("POST", "/v1/kernels", k.dump());
    EXPECT_EQ(refused.status, 403) << refused.body;
    EXPECT_EQ(refused.body.find("/var/lib/docker"), std::string::npos) << refused.body;
  }
}

// The finding: a child of a kernel killed for lack of memory, its PID 1
// running on, left the kernel RUNNING with the reason "out of memory".
TEST(Isolation, AChildKilledForLackOfMemoryIsAConditionOfTheRunningKernelNotItsEnd) {
  AgentProcess agent(TwoCoreAgent("oom"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel(SleepKernel("k"));  // 32m of memory
  // A child that asks for more than the kernel has.
  agent.Call("POST", "/v1/kernels/k/exec",
             json{{"command", {"sh", "-c", "x=$(head -c 100000000 /dev/zero | tr '\\0' x); echo ${#x}"}}}.dump());
  json record;
  for (int i = 0; i < 100; ++i) {
    record = agent.CallJson("GET", "/v1/kernels/k", nullptr, 200);
    if (record["condition"].is_string()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(record["state"], "RUNNING") << record.dump();
  EXPECT_EQ(record["reason"], "") << record.dump();
  ASSERT_TRUE(record["condition"].is_string()) << record.dump();
  EXPECT_NE(record["condition"].get<std::string>().find("killed for lack of memory"), std::string::npos)
      << record.dump();
  agent.CallJson("DELETE", "/v1/kernels/k", nullptr, 200);
}

// The finding (Podman, which sets no OOMKilled and sends no oom event): a
// kernel whose main process was killed for lack of memory ended as "exited
// with code 137", its cgroup gone before its end was reported.
TEST(Isolation, AKernelWhoseMainProcessIsKilledForLackOfMemoryEndsOutOfMemory) {
  // No interval's sweep comes between the kernel's start and its end: only
  // the sweep its start asks for, which starts the watch of its cgroup.
  AgentProcess agent(TwoCoreAgent("oom-main", "stats-interval = \"1h\"\n"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  json k = SleepKernel("k");  // 32m of memory
  // A moment after its start, the main process asks for more.
  k["command"] = {"sh", "-c", "sleep 1; x=$(head -c 100000000 /dev/zero | tr '\\0' x); echo ${#x}"};
  agent.CreateKernel(k);
  json record;
  for (int i = 0; i < 300; ++i) {
    record = agent.CallJson("GET", "/v1/kernels/k", nullptr, 200);
    if (record["state"] == "TERMINATED") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(record["state"], "TERMINATED") << record.dump() << agent.log();
  EXPECT_EQ(record["reason"], "out of memory") << record.dump() << agent.log();
}

}  // namespace
}  // namespace slotd::testing
