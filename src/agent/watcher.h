// Watcher: the two background threads that keep the agent's picture true.
//  - the event reader follows the engine's event stream (owner-filtered),
//    reconnecting after any break, and asks for a relist after each (re)connect
//    so nothing that happened during a gap is missed;
//  - the relister runs Agent::Relist periodically and whenever asked;
//  - the prober pings the engine every kProbeEvery, with that as its
//    deadline, and tells the agent whether it answered (its health).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "agent/agent.h"

namespace slotd {

class Watcher {
 public:
  // `agent` and `engine` must outlive the watcher.
  Watcher(Agent& agent, ContainerEngine& engine, std::chrono::milliseconds relist_interval);
  ~Watcher();  // stops and joins both threads

  void Start();
  void Stop();
  // Asks the relister to run as soon as it can.
  void RequestRelist();

 private:
  void ReadEvents();
  void RelistLoop();
  void ProbeLoop();

  static constexpr std::chrono::seconds kProbeEvery{2};

  Agent& agent_;
  ContainerEngine& engine_;
  const std::chrono::milliseconds relist_interval_;

  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable cv_;
  bool relist_requested_ = false;  // guarded by mutex_
  std::thread events_thread_;
  std::thread relist_thread_;
  std::thread probe_thread_;
};

}  // namespace slotd
