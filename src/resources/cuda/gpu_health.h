// GpuHealthMonitor: watches the health of the CUDA plugin's GPUs and writes
// what it finds into the plugin's DeviceHealthBoard.
//  - an event thread waits on NVML's Xid critical errors of the owned GPUs;
//    an Xid of the critical list marks the devices it concerns (the GPU, or
//    its MIG instance when NVML names one) until the operator clears them;
//  - a poll thread reads, every kPollEvery, what events do not report:
//    volatile uncorrected ECC errors, pending retired pages, row remapping
//    failures, GPU_IS_LOST, and MIG instances that are gone (missing) or
//    new (logged: the agent uses the layout it found at start);
//  - a watchdog thread marks every device unknown when a poll's NVML call
//    overruns kCallDeadline (a wedged driver), and clears that when it answers.
// Threads that are stuck in NVML when the monitor is destroyed are left
// behind (detached) holding only what they share with it.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "resources/cuda/nvml.h"
#include "resources/device_health.h"

namespace slotd {

// The Xids that make a GPU unhealthy unless [resource.cuda] critical-xids
// says otherwise (documented in docs/config.md): 48 double-bit ECC error,
// 61 and 62 internal micro-controller breakpoint or halt, 63 and 64 ECC page
// retirement or row remapping event or failure, 74 NVLink error, 79 fallen
// off the bus, 92 high single-bit ECC rate, 94 and 95 contained and
// uncontained ECC error, 119 and 120 GSP timeout or error, 140 unrecovered
// ECC error.
const std::vector<int>& DefaultCriticalXids();

class GpuHealthMonitor {
 public:
  // One owned GPU and the device ids it stands for: itself, or its owned
  // MIG instances by GPU instance id.
  struct Gpu {
    std::string uuid;
    std::vector<std::string> devices;                       // every device id of this GPU
    std::map<unsigned, std::vector<std::string>> by_gpu_instance;  // MIG: GPU instance id -> device ids
    bool whole = false;  // listed whole (index or GPU UUID): a new MIG instance on it is reported
  };
  static constexpr std::chrono::seconds kPollEvery{2};
  static constexpr std::chrono::seconds kCallDeadline{5};

  // `clock` dates the conditions it sets on `board`; it must outlive the
  // monitor's threads (Clock::Real() does).
  GpuHealthMonitor(std::shared_ptr<NvmlApi> nvml, std::vector<Gpu> gpus, std::shared_ptr<DeviceHealthBoard> board,
                   std::set<uint64_t> critical_xids, Clock& clock = Clock::Real());
  // Stops the threads; those stuck in NVML are detached.
  ~GpuHealthMonitor();

  // Starts the three threads; a first poll runs at once.
  void Start();

 private:
  struct Shared;
  std::shared_ptr<Shared> shared_;
  std::vector<std::thread> threads_;
};

}  // namespace slotd
