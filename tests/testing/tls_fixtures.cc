#include "testing/tls_fixtures.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

extern char** environ;

namespace slotd::testing {
namespace {

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Starts `argv` with its stdout and stderr appended to `log`; its pid, or -1.
pid_t Spawn(const std::vector<std::string>& argv, const std::string& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<std::string> copy = argv;
  std::vector<char*> args;
  for (std::string& arg : copy) args.push_back(arg.data());
  args.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

}  // namespace

TestCertificates::TestCertificates() {
  if (!MakeCa("ca") || !Issue("server", "ca", "IP:127.0.0.1,DNS:localhost") || !Issue("client", "ca", "DNS:client"))
    ADD_FAILURE() << "cannot make the test certificates: " << error_;
}

bool TestCertificates::Openssl(const std::vector<std::string>& args, std::string* out) {
  const std::string log = dir_.root() + "/openssl.out";
  std::remove(log.c_str());
  std::vector<std::string> argv = {"openssl"};
  argv.insert(argv.end(), args.begin(), args.end());
  const pid_t pid = Spawn(argv, log);
  int status = -1;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    error_ = "openssl " + args[0] + " failed (scripts/setup installs openssl): " + ReadWhole(log);
    return false;
  }
  if (out != nullptr) *out = ReadWhole(log);
  return true;
}

bool TestCertificates::MakeCa(const std::string& name) {
  return Openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "30",
                  "-subj", "/CN=" + name, "-keyout", Key(name), "-out", Cert(name)});
}

bool TestCertificates::Issue(const std::string& name, const std::string& ca, const std::string& san) {
  const std::string request = dir_.root() + "/" + name + ".csr";
  const std::string extensions = dir_.root() + "/" + name + ".ext";
  std::ofstream(extensions) << "subjectAltName=" << san << "\n";
  return Openssl({"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=" + name,
                  "-keyout", Key(name), "-out", request}) &&
         Openssl({"x509", "-req", "-in", request, "-CA", Cert(ca), "-CAkey", Key(ca), "-CAcreateserial", "-days", "30",
                  "-extfile", extensions, "-out", Cert(name)});
}

std::string TestCertificates::Fingerprint(const std::string& name) {
  std::string out;
  if (!Openssl({"x509", "-noout", "-fingerprint", "-sha256", "-in", Cert(name)}, &out)) return "";
  const size_t equals = out.find('=');
  if (equals == std::string::npos) return "";
  std::string fingerprint = out.substr(equals + 1);
  while (!fingerprint.empty() && (fingerprint.back() == '\n' || fingerprint.back() == '\r')) fingerprint.pop_back();
  return fingerprint;
}

OpensslServer::OpensslServer(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"openssl", "s_server", "-www", "-accept", "127.0.0.1:0"};
  argv.insert(argv.end(), args.begin(), args.end());
  pid_ = Spawn(argv, dir_.root() + "/log");
  // It prints "ACCEPT 127.0.0.1:<port>" once it listens.
  for (int i = 0; i < 200 && pid_ > 0; ++i) {
    const std::string printed = log();
    const size_t accept = printed.find("ACCEPT 127.0.0.1:");
    if (accept != std::string::npos && printed.find('\n', accept) != std::string::npos) {
      port_ = std::atoi(printed.c_str() + accept + 17);
      return;
    }
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ADD_FAILURE() << "openssl s_server does not listen:\n" << log();
}

OpensslServer::~OpensslServer() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
}

std::string OpensslServer::log() const { return ReadWhole(dir_.root() + "/log"); }

}  // namespace slotd::testing
