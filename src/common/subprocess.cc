#include "common/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "common/unique_fd.h"

extern char** environ;

namespace slotd {

namespace {

// The last few lines of `output`, for a message.
std::string Tail(const std::string& output) {
  std::string text = output;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (text.size() > 600) text = "..." + text.substr(text.size() - 600);
  return text.empty() ? "no output" : text;
}

}  // namespace

Result<std::string> RunProgram(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  if (argv.empty()) return Status::InvalidArgument("RunProgram: no program given");
  const std::string& name = argv[0];
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return Status::Unavailable("cannot run " + name + ": pipe: " + ErrnoText(errno));
  UniqueFd read_end(pipe_fds[0]), write_end(pipe_fds[1]);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), 1);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), 2);
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);  // none of the agent's sockets or files
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = ::posix_spawnp(&pid, name.c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return Status::Unavailable("cannot run " + name + ": " + ErrnoText(spawned));
  write_end.Reset();

  std::string output;
  bool timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd waiting{read_end.get(), POLLIN, 0};
    const int ready = ::poll(&waiting, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;  // the deadline is checked above
    char buffer[4096];
    const ssize_t n = ::read(read_end.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // every copy of the write end is closed: the program is done
    const size_t room = kMaxProgramOutput - std::min(kMaxProgramOutput, output.size());
    output.append(buffer, std::min(room, static_cast<size_t>(n)));
  }
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out)
    return Status::Unavailable(name + " did not finish within " + std::to_string(timeout.count()) + " ms and was killed");
  if (WIFSIGNALED(status))
    return Status::Unavailable(name + " was killed by signal " + std::to_string(WTERMSIG(status)) + ": " + Tail(output));
  if (WEXITSTATUS(status) != 0)
    return Status::Unavailable(name + " exited with status " + std::to_string(WEXITSTATUS(status)) + ": " + Tail(output));
  return output;
}

}  // namespace slotd
