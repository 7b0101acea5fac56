#include "agent/kernel_exec.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstring>

namespace slotd {

KernelExec::KernelExec(KernelStore& store, ContainerEngine& engine, const Clock& clock)
    : store_(store), engine_(engine), clock_(clock) {}

Result<std::string> KernelExec::RunningContainer(const std::string& kernel_id) const {
  auto kernel = store_.Get(kernel_id);
  if (!kernel.ok()) return kernel.status();
  if (kernel->state() != KernelState::kRunning)
    return Status::FailedPrecondition("kernel " + kernel_id + " is " + KernelStateName(kernel->state()) +
                                      ", not RUNNING; exec needs a running kernel");
  return kernel->container_id;
}

Result<ExecResult> KernelExec::Exec(const std::string& kernel_id, const std::vector<std::string>& command,
                               std::chrono::seconds timeout, const std::atomic<bool>* stop, std::string* exec_id) {
  Result<std::string> container = RunningContainer(kernel_id);
  if (!container.ok()) return container.status();
  NoteExec(kernel_id, 0);
  Result<ExecResult> ran = engine_.Exec(*container, command, timeout, stop, exec_id);
  NoteExec(kernel_id, 0);
  return ran;
}

void KernelExec::NoteExec(const std::string& kernel_id, int opened) {
  MutexLock lock(store_.mutex);
  if (Kernel* k = store_.table.Change(kernel_id)) {
    k->last_exec_ms = clock_.UnixMillis();
    k->open_execs = std::max(0, k->open_execs + opened);
    k->idle_since_ms.reset();
  }
}

void KernelExec::InteractiveExecEnded(const std::string& kernel_id) { NoteExec(kernel_id, -1); }

Result<ExecSession> KernelExec::ExecInteractive(const std::string& kernel_id, const std::vector<std::string>& command,
                                           int rows, int cols) {
  Result<std::string> container = RunningContainer(kernel_id);
  if (!container.ok()) return container.status();
  Result<ExecSession> session = engine_.ExecInteractive(*container, command, rows, cols);
  if (session.ok()) NoteExec(kernel_id, 1);  // InteractiveExecEnded takes it back
  return session;
}

Result<ExecInfo> KernelExec::InspectExec(const std::string& kernel_id, const std::string& exec_id) {
  auto kernel = store_.Get(kernel_id);
  if (!kernel.ok()) return kernel.status();
  // An exec id is letters, digits, "-" and "_" (the engine's are hex): never a
  // path of its own, so it cannot reach another engine route.
  const bool well_formed = !exec_id.empty() && exec_id.size() <= 128 &&
                           std::all_of(exec_id.begin(), exec_id.end(), [](char c) {
                             return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
                           });
  if (!well_formed)
    return Status::InvalidArgument("exec id \"" + exec_id.substr(0, 128) +
                                   "\" is not one: exec ids are up to 128 letters, digits, \"-\" and \"_\", as the "
                                   "X-Slotd-Exec-Id header of the upgrade answer gave it");
  const Status unknown = Status::NotFound("kernel " + kernel_id + " has no exec " + exec_id);
  Result<ExecInfo> info = engine_.InspectExec(exec_id);
  if (!info.ok()) return info.status().code() == Status::Code::kNotFound ? unknown : info.status();
  // Another container's exec (another agent's, anyone's) is none of this kernel's.
  if (kernel->container_id.empty() || info->container_id != kernel->container_id) return unknown;
  return info;
}

Status KernelExec::HangUpExec(const std::string& kernel_id, const std::string& exec_id, std::chrono::milliseconds grace) {
  Result<ExecInfo> info = InspectExec(kernel_id, exec_id);
  if (!info.ok()) return info.status();
  if (!info->running || info->pid <= 0) return Status::Ok();
  const std::string what =
      "ending exec " + exec_id + " of kernel " + kernel_id + " (pid " + std::to_string(info->pid) + ")";
  // A pidfd holds on to the process itself: once the exec is seen running
  // as this pid after the open, no reuse of the number can misdirect a signal.
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, info->pid, 0));
  if (pidfd < 0) {
    if (errno == ESRCH) return Status::Ok();
    return Status::Internal(what + ": pidfd_open: " + std::strerror(errno));
  }
  auto send_signal = [&](int sig) {
    return ::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0) == 0 || errno == ESRCH;
  };
  Status ended = Status::Ok();
  Result<ExecInfo> again = InspectExec(kernel_id, exec_id);
  if (again.ok() && again->running && again->pid == info->pid) {
    if (!send_signal(SIGHUP)) {
      ended = Status::PermissionDenied(what + ": SIGHUP: " + std::strerror(errno) + "; the agent must run as root");
    } else {
      pollfd exited{pidfd, POLLIN, 0};  // readable once the process has ended
      if (::poll(&exited, 1, static_cast<int>(grace.count())) == 0 && !send_signal(SIGKILL))
        ended = Status::PermissionDenied(what + ": SIGKILL: " + std::strerror(errno));
    }
  }
  ::close(pidfd);
  return ended;
}

Status KernelExec::ResizeExec(const std::string& kernel_id, const std::string& exec_id, int rows, int cols) {
  Result<ExecInfo> info = InspectExec(kernel_id, exec_id);
  if (!info.ok()) return info.status();
  return engine_.ResizeExec(exec_id, rows, cols);
}

Status KernelExec::StreamLogs(const std::string& kernel_id, int tail, bool follow, const std::function<void()>& on_started,
                         const std::function<bool(std::string_view)>& on_output, const std::atomic<bool>& stop) {
  auto kernel = store_.Get(kernel_id);
  if (!kernel.ok()) return kernel.status();
  if (kernel->container_id.empty()) return Status::Ok();
  return engine_.StreamLogs(kernel->container_id, tail, follow, on_started, on_output, stop);
}

}  // namespace slotd
