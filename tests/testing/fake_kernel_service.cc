#include "testing/fake_kernel_service.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

namespace slotd {

namespace {

std::string Joined(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& word : words) out += (out.empty() ? "" : " ") + word;
  return out;
}

}  // namespace

FakeKernelService::FakeKernelService() {
  config_.agent.id = "fake";
  config_.agent.node = "fakenode";
}

FakeKernelService::~FakeKernelService() {
  MutexLock lock(mutex_);
  if (terminal_peer_ >= 0) ::close(terminal_peer_);
}

void FakeKernelService::Put(const Kernel& kernel) {
  MutexLock lock(mutex_);
  kernels_.insert_or_assign(kernel.id(), kernel);
}

void FakeKernelService::FailNext(const std::string& method, Status status) {
  MutexLock lock(mutex_);
  failures_[method].push_back(std::move(status));
}

void FakeKernelService::SetExecResult(ExecResult result) {
  MutexLock lock(mutex_);
  exec_result_ = std::move(result);
}

void FakeKernelService::SetLogs(std::vector<std::string> chunks) {
  MutexLock lock(mutex_);
  logs_ = std::move(chunks);
}

void FakeKernelService::SetImages(std::vector<NodeImage> images) {
  MutexLock lock(mutex_);
  images_ = std::move(images);
}

void FakeKernelService::SetExecInfo(ExecInfo info) {
  MutexLock lock(mutex_);
  exec_info_ = std::move(info);
}

int FakeKernelService::TakeTerminalPeer() {
  MutexLock lock(mutex_);
  return std::exchange(terminal_peer_, -1);
}

std::vector<std::string> FakeKernelService::Calls() const {
  MutexLock lock(mutex_);
  return calls_;
}

std::vector<std::string> FakeKernelService::LastExecCommand() const {
  MutexLock lock(mutex_);
  return last_exec_command_;
}

void FakeKernelService::Record(const std::string& method, const std::string& args) const {
  calls_.push_back(args.empty() ? method : method + " " + args);
}

Status FakeKernelService::Enter(const std::string& method, const std::string& args) const {
  Record(method, args);
  auto queued = failures_.find(method);
  if (queued == failures_.end() || queued->second.empty()) return Status::Ok();
  Status failure = std::move(queued->second.front());
  queued->second.pop_front();
  return failure;
}

Result<Kernel> FakeKernelService::Find(const std::string& kernel_id) const {
  auto found = kernels_.find(kernel_id);
  if (found == kernels_.end()) return Status::NotFound("kernel " + kernel_id + " not found");
  return found->second;
}

Result<KernelService::CreateOutcome> FakeKernelService::CreateKernel(const CreateRequest& request) {
  MutexLock lock(mutex_);
  if (Status s = Enter("CreateKernel", request.kernel_id); !s.ok()) return s;
  if (auto found = kernels_.find(request.kernel_id); found != kernels_.end())
    return CreateOutcome{found->second, false};
  Kernel kernel;
  kernel.request = request;
  kernel.agent_id = config_.agent.id;
  kernel.container_id = "c-" + request.kernel_id;
  kernels_.insert_or_assign(request.kernel_id, kernel);
  return CreateOutcome{kernel, true};
}

std::vector<std::shared_ptr<const std::string>> FakeKernelService::ListKernelRecords(bool with_warm) const {
  MutexLock lock(mutex_);
  Record("ListKernelRecords", with_warm ? "with-warm" : "");
  std::vector<std::shared_ptr<const std::string>> records;
  for (const auto& [id, kernel] : kernels_)
    if (with_warm || kernel.warm_pool.empty()) records.push_back(std::make_shared<const std::string>(kernel.ToJson().dump()));
  return records;
}

Result<std::shared_ptr<const std::string>> FakeKernelService::KernelRecord(const std::string& kernel_id) const {
  MutexLock lock(mutex_);
  if (Status s = Enter("KernelRecord", kernel_id); !s.ok()) return s;
  Result<Kernel> kernel = Find(kernel_id);
  if (!kernel.ok()) return kernel.status();
  return std::make_shared<const std::string>(kernel->ToJson().dump());
}

std::vector<Kernel> FakeKernelService::ListKernels() const {
  MutexLock lock(mutex_);
  Record("ListKernels", "");
  std::vector<Kernel> kernels;
  for (const auto& [id, kernel] : kernels_) kernels.push_back(kernel);
  return kernels;
}

Result<Kernel> FakeKernelService::GetKernel(const std::string& kernel_id) const {
  MutexLock lock(mutex_);
  if (Status s = Enter("GetKernel", kernel_id); !s.ok()) return s;
  return Find(kernel_id);
}

Result<Kernel> FakeKernelService::DeleteKernel(const std::string& kernel_id) {
  MutexLock lock(mutex_);
  if (Status s = Enter("DeleteKernel", kernel_id); !s.ok()) return s;
  Result<Kernel> kernel = Find(kernel_id);
  if (kernel.ok()) kernels_.erase(kernel_id);
  return kernel;
}

Result<Kernel> FakeKernelService::RestartKernel(const std::string& kernel_id) {
  MutexLock lock(mutex_);
  if (Status s = Enter("RestartKernel", kernel_id); !s.ok()) return s;
  return Find(kernel_id);
}

Result<ExecResult> FakeKernelService::Exec(const std::string& kernel_id, const std::vector<std::string>& command,
                                           std::chrono::seconds timeout, const std::atomic<bool>* /*stop*/,
                                           std::string* exec_id) {
  MutexLock lock(mutex_);
  if (Status s = Enter("Exec", kernel_id + " " + std::to_string(timeout.count()) + "s " + Joined(command)); !s.ok())
    return s;
  if (Result<Kernel> kernel = Find(kernel_id); !kernel.ok()) return kernel.status();
  last_exec_command_ = command;
  if (exec_id != nullptr) *exec_id = "exec-1";
  return exec_result_;
}

Result<ExecSession> FakeKernelService::ExecInteractive(const std::string& kernel_id,
                                                       const std::vector<std::string>& command, int rows, int cols) {
  MutexLock lock(mutex_);
  if (Status s = Enter("ExecInteractive",
                       kernel_id + " " + std::to_string(rows) + "x" + std::to_string(cols) + " " + Joined(command));
      !s.ok())
    return s;
  if (Result<Kernel> kernel = Find(kernel_id); !kernel.ok()) return kernel.status();
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    return Status::Internal(std::string("socketpair: ") + std::strerror(errno));
  if (terminal_peer_ >= 0) ::close(terminal_peer_);
  terminal_peer_ = fds[1];
  last_exec_command_ = command;
  return ExecSession{"exec-tty", fds[0], ""};
}

void FakeKernelService::InteractiveExecEnded(const std::string& kernel_id) {
  MutexLock lock(mutex_);
  Record("InteractiveExecEnded", kernel_id);
}

Result<ExecInfo> FakeKernelService::InspectExec(const std::string& kernel_id, const std::string& exec_id) {
  MutexLock lock(mutex_);
  if (Status s = Enter("InspectExec", kernel_id + " " + exec_id); !s.ok()) return s;
  if (Result<Kernel> kernel = Find(kernel_id); !kernel.ok()) return kernel.status();
  return exec_info_;
}

Status FakeKernelService::HangUpExec(const std::string& kernel_id, const std::string& exec_id,
                                     std::chrono::milliseconds /*grace*/) {
  MutexLock lock(mutex_);
  return Enter("HangUpExec", kernel_id + " " + exec_id);
}

Status FakeKernelService::ResizeExec(const std::string& kernel_id, const std::string& exec_id, int rows, int cols) {
  MutexLock lock(mutex_);
  if (Status s =
          Enter("ResizeExec", kernel_id + " " + exec_id + " " + std::to_string(rows) + "x" + std::to_string(cols));
      !s.ok())
    return s;
  return Find(kernel_id).status();
}

Status FakeKernelService::StreamLogs(const std::string& kernel_id, int tail, bool follow,
                                     const std::function<void()>& on_started,
                                     const std::function<bool(std::string_view)>& on_output,
                                     const std::atomic<bool>& stop) {
  std::vector<std::string> chunks;
  {
    MutexLock lock(mutex_);
    if (Status s = Enter("StreamLogs", kernel_id + " tail=" + std::to_string(tail) + (follow ? " follow" : ""));
        !s.ok())
      return s;
    if (Result<Kernel> kernel = Find(kernel_id); !kernel.ok()) return kernel.status();
    chunks = logs_;
  }
  on_started();
  for (const std::string& chunk : chunks)
    if (!on_output(chunk)) return Status::Ok();
  // A followed stream goes on until its client leaves.
  while (follow && !stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return Status::Ok();
}

Result<std::vector<KernelService::NodeImage>> FakeKernelService::ListImages() {
  MutexLock lock(mutex_);
  if (Status s = Enter("ListImages", ""); !s.ok()) return s;
  return images_;
}

Result<ImageInfo> FakeKernelService::PullImage(const std::string& image) {
  MutexLock lock(mutex_);
  if (Status s = Enter("PullImage", image); !s.ok()) return s;
  ImageInfo info;
  info.id = "sha256:" + std::string(64, 'a');
  info.tags = {image};
  return info;
}

KernelService::Drain FakeKernelService::Draining() const {
  MutexLock lock(mutex_);
  return drain_;
}

Result<KernelService::Drain> FakeKernelService::SetDraining(bool drain,
                                                            std::optional<std::chrono::milliseconds> within) {
  MutexLock lock(mutex_);
  if (Status s = Enter("SetDraining", std::string(drain ? "drain" : "undrain") +
                                          (within ? " within=" + std::to_string(within->count()) + "ms" : ""));
      !s.ok())
    return s;
  drain_.draining = drain;
  drain_.since = drain ? 1'700'000'000 : 0;
  drain_.deadline = drain && within ? std::optional<int64_t>(1'700'000'000 + within->count() / 1000) : std::nullopt;
  return drain_;
}

Result<KernelService::DeviceChange> FakeKernelService::DrainDevice(const std::string& name, bool drain) {
  MutexLock lock(mutex_);
  if (Status s = Enter("DrainDevice", name + (drain ? " drain" : " undrain")); !s.ok()) return s;
  return DeviceChange{"mock", {name}};
}

Result<KernelService::DeviceChange> FakeKernelService::ClearDevice(const std::string& name) {
  MutexLock lock(mutex_);
  if (Status s = Enter("ClearDevice", name); !s.ok()) return s;
  return DeviceChange{"mock", {name}};
}

nlohmann::json FakeKernelService::DescribeResources() const {
  return {{"cpu", {{"capacity", "2"}, {"used", "0"}, {"free", "2"}}}};
}

}  // namespace slotd
