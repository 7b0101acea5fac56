#include "integration/etcd.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "common/http_client.h"

extern char** environ;

namespace slotd::testing {

TestEtcd::TestEtcd()
    : url_("http://127.0.0.1:" + std::to_string(FreeLoopbackPort())),
      peer_url_("http://127.0.0.1:" + std::to_string(FreeLoopbackPort())) {
  if (!Start()) ADD_FAILURE() << "etcd does not start (scripts/setup installs etcd-server):\n" << log();
}

TestEtcd::TestEtcd(const TestCertificates& certs)
    : certs_(&certs),
      url_("https://127.0.0.1:" + std::to_string(FreeLoopbackPort())),
      peer_url_("http://127.0.0.1:" + std::to_string(FreeLoopbackPort())) {
  if (!Start()) ADD_FAILURE() << "etcd does not start with TLS (scripts/setup installs etcd-server):\n" << log();
}

TlsClientOptions TestEtcd::client_tls() const {
  TlsClientOptions tls;
  if (certs_ == nullptr) return tls;
  tls.ca_file = certs_->Cert("ca");
  tls.cert_file = certs_->Cert("client");
  tls.key_file = certs_->Key("client");
  return tls;
}

TestEtcd::~TestEtcd() { Stop(); }

std::string TestEtcd::log() const { return ReadFile(dir_.path() + "/log"); }

bool TestEtcd::Start() {
  if (pid_ > 0) return true;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  const std::string log_path = dir_.path() + "/log";
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_addopen(&actions, 2, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  std::vector<std::string> argv = {"etcd",
                                   "--name=test",
                                   "--data-dir=" + dir_.path() + "/data",
                                   "--listen-client-urls=" + url_,
                                   "--advertise-client-urls=" + url_,
                                   "--listen-peer-urls=" + peer_url_,
                                   "--initial-advertise-peer-urls=" + peer_url_,
                                   "--initial-cluster=test=" + peer_url_,
                                   "--log-level=warn"};
  if (certs_ != nullptr)
    argv.insert(argv.end(), {"--cert-file=" + certs_->Cert("server"), "--key-file=" + certs_->Key("server"),
                             "--trusted-ca-file=" + certs_->Cert("ca"), "--client-cert-auth"});
  std::vector<char*> args;
  for (std::string& arg : argv) args.push_back(arg.data());
  args.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = posix_spawnp(&pid, "etcd", &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return false;
  HttpClient client = HttpClient::Tcp(url_);
  client.SetTls(client_tls());
  for (int i = 0; i < 200; ++i) {
    auto health = client.Request("GET", "/health", "", std::chrono::seconds(1));
    if (health.ok() && health->status == 200 && health->body.find("true") != std::string::npos) {
      pid_ = pid;
      return true;
    }
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return false;
}

bool TestEtcd::EnableAuth(const std::string& password, std::string& error) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"etcdctl", "--endpoints=" + url_, "user", "add", "root:" + password},
        std::vector<std::string>{"etcdctl", "--endpoints=" + url_, "user", "grant-role", "root", "root"},
        std::vector<std::string>{"etcdctl", "--endpoints=" + url_, "auth", "enable"}}) {
    CommandResult result = RunCommand(args);
    if (result.exit_code != 0) {
      error = "etcdctl " + args[2] + " " + args[3] + ": " + result.err;
      return false;
    }
  }
  return true;
}

void TestEtcd::Stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

}  // namespace slotd::testing
