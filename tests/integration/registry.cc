#include "integration/registry.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "common/base64.h"

extern char** environ;

namespace slotd::testing {

TestRegistry::TestRegistry(std::string user, std::string password)
    : user_(std::move(user)), password_(std::move(password)) {
  const int port = FreeLoopbackPort();
  host_ = "127.0.0.1:" + std::to_string(port);
  std::string auth;
  if (!user_.empty()) {
    CommandResult hashed = RunCommand({"htpasswd", "-Bbn", user_, password_});
    if (hashed.exit_code != 0) {
      ADD_FAILURE() << "htpasswd failed (scripts/setup installs apache2-utils): " << hashed.err;
      return;
    }
    WriteFile(dir_.path() + "/htpasswd", hashed.out);
    auth = "auth:\n  htpasswd:\n    realm: slotd-test\n    path: " + dir_.path() + "/htpasswd\n";
  }
  WriteFile(dir_.path() + "/config.yml", "version: 0.1\n"
                                         "log:\n  level: warn\n  accesslog:\n    disabled: true\n"
                                         "storage:\n  filesystem:\n    rootdirectory: " + dir_.path() + "/data\n"
                                         "  delete:\n    enabled: true\n"
                                         "http:\n  addr: " + host_ + "\n" + auth);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  const std::string log_path = dir_.path() + "/log";
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_addopen(&actions, 2, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  std::string bin = "docker-registry", serve = "serve", config = dir_.path() + "/config.yml";
  char* argv[] = {bin.data(), serve.data(), config.data(), nullptr};
  pid_t pid = -1;
  const int spawned = posix_spawnp(&pid, bin.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    ADD_FAILURE() << "cannot start docker-registry (scripts/setup installs it)";
    return;
  }
  for (int i = 0; i < 200; ++i) {
    RawClient probe(port);
    if (probe.connected()) {
      pid_ = pid;
      return;
    }
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

TestRegistry::~TestRegistry() { Stop(); }

std::string TestRegistry::log() const { return ReadFile(dir_.path() + "/log"); }

void TestRegistry::Pause() {
  if (pid_ > 0 && ::kill(pid_, SIGSTOP) == 0) paused_ = true;
}

void TestRegistry::Resume() {
  if (pid_ > 0 && ::kill(pid_, SIGCONT) == 0) paused_ = false;
}

void TestRegistry::Stop() {
  if (pid_ <= 0) return;
  if (paused_) Resume();
  ::kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

CommandResult TestRegistry::Docker(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {"docker", "--config", dir_.path() + "/client"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv);
}

std::string TestRegistry::PushNewImage(const std::string& name_tag, size_t bytes) {
  const std::string image = host_ + "/" + name_tag;
  const std::string blob = dir_.path() + "/blob";
  {
    std::mt19937_64 random(std::random_device{}());
    std::ofstream out(blob, std::ios::binary);
    for (size_t i = 0; i < bytes; i += 8) {
      const uint64_t word = random();
      out.write(reinterpret_cast<const char*>(&word), static_cast<std::streamsize>(std::min<size_t>(8, bytes - i)));
    }
  }
  const std::string builder = "slotd-registry-build-" + RunTag() + "-" + std::to_string(rand());
  auto must = [&](const std::vector<std::string>& args) {
    CommandResult result = Docker(args);
    if (result.exit_code != 0) ADD_FAILURE() << "docker " << args[0] << ": " << result.out << result.err;
    return result;
  };
  // The client's own login file, written rather than made by `docker login`:
  // Podman's login checks the registry over HTTPS whatever registries.conf
  // says; the push sends these credentials on either engine.
  if (!user_.empty()) {
    std::filesystem::create_directories(dir_.path() + "/client");
    WriteAuthFile(dir_.path() + "/client/config.json", user_, password_);
  }
  must({"create", "--name", builder, "--network", "none", kTestImage, "true"});
  must({"cp", blob, builder + ":/blob"});
  CommitImage(builder, image);
  must({"rm", "-f", builder});
  CommandResult pushed = must({"push", image});
  must({"rmi", image});
  // "latest: digest: sha256:... size: 740"
  const size_t at = pushed.out.rfind("digest: ");
  if (at == std::string::npos) return "";
  return pushed.out.substr(at + 8, pushed.out.find(' ', at + 8) - at - 8);
}

void TestRegistry::WriteAuthFile(const std::string& path, const std::string& user, const std::string& password) const {
  WriteFile(path, "{\"auths\": {\"" + host_ + "\": {\"auth\": \"" + Base64(user + ":" + password) + "\"}}}\n");
}

}  // namespace slotd::testing
