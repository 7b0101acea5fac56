// KernelExec: commands run in a RUNNING kernel, one-shot and interactive,
// their inspection, hang-up and resize, and the kernel's logs. Each exec is
// noted on its kernel (Kernel::last_exec_ms, open_execs), which keeps it
// from being idle. It holds no state of its own: the kernels are the
// store's, the execs the engine's.
//
// Thread-safety: every method may be called from any thread; the store's
// lock is taken to read or note a kernel, never across an engine call.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/kernel_store.h"
#include "common/clock.h"
#include "common/status.h"
#include "engine/container_engine.h"

namespace slotd {

class KernelExec {
 public:
  // `store`, `engine` and `clock` must outlive it.
  KernelExec(KernelStore& store, ContainerEngine& engine, const Clock& clock);

  // Runs `command` in the RUNNING kernel and waits for it; `timeout`, `stop`
  // and `exec_id` as for ContainerEngine::Exec.
  Result<ExecResult> Exec(const std::string& kernel_id, const std::vector<std::string>& command,
                          std::chrono::seconds timeout, const std::atomic<bool>* stop, std::string* exec_id)
      EXCLUDES(store_.mutex);
  // Starts `command` in the RUNNING kernel with a terminal of `rows` x
  // `cols`; the caller relays the session, closes it and calls
  // InteractiveExecEnded.
  Result<ExecSession> ExecInteractive(const std::string& kernel_id, const std::vector<std::string>& command, int rows,
                                      int cols) EXCLUDES(store_.mutex);
  void InteractiveExecEnded(const std::string& kernel_id) EXCLUDES(store_.mutex);
  // What the engine says of `kernel_id`'s exec `exec_id`; kNotFound when it
  // is not an exec of this kernel's container, kInvalidArgument when
  // `exec_id` is not an exec id at all.
  Result<ExecInfo> InspectExec(const std::string& kernel_id, const std::string& exec_id) EXCLUDES(store_.mutex);
  // Ends the exec if it still runs, as a terminal hanging up would: SIGHUP
  // to its process (held by a pidfd), then SIGKILL when it has not ended
  // within `grace`. OK when it has ended or never ran.
  Status HangUpExec(const std::string& kernel_id, const std::string& exec_id, std::chrono::milliseconds grace)
      EXCLUDES(store_.mutex);
  // Sets the terminal size of the exec; errors as InspectExec's.
  Status ResizeExec(const std::string& kernel_id, const std::string& exec_id, int rows, int cols)
      EXCLUDES(store_.mutex);
  // Streams the kernel's output (ContainerEngine::StreamLogs); kNotFound for
  // an unknown kernel; a kernel without a container has no output.
  Status StreamLogs(const std::string& kernel_id, int tail, bool follow, const std::function<void()>& on_started,
                    const std::function<bool(std::string_view)>& on_output, const std::atomic<bool>& stop)
      EXCLUDES(store_.mutex);

 private:
  // The container of `kernel_id` when it is RUNNING; else kNotFound or
  // kFailedPrecondition saying why an exec cannot run.
  Result<std::string> RunningContainer(const std::string& kernel_id) const EXCLUDES(store_.mutex);
  // Records an exec of `kernel_id` now: `opened` +1 when an interactive exec
  // starts, -1 when it ends, 0 for a one-shot exec.
  void NoteExec(const std::string& kernel_id, int opened) EXCLUDES(store_.mutex);

  KernelStore& store_;
  ContainerEngine& engine_;
  const Clock& clock_;
};

}  // namespace slotd
