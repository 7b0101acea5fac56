// PullProgressWatch: while slotctl asks an agent for something that may pull
// an image (run, pull), follows the agent's image_pull events for that image
// and shows them on stderr: a bar redrawn in place on a terminal, plain
// progress lines (at most one a second) otherwise.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "cli/slotctl_client.h"
#include "common/mutex.h"

namespace slotctl {

// Bytes for people: "512 B", "3.4 MiB", "1.25 GiB".
std::string ReadableSize(uint64_t bytes);

// One image_pull event, as the progress shows it.
struct PullEvent {
  std::string state;  // pulling | done | failed
  int layers = 0;
  int layers_done = 0;
  uint64_t bytes_done = 0;
  uint64_t bytes_total = 0;
};

// The progress line of `event` for `image`: on a terminal a bar ("[#####-----]
// 52%"), otherwise words only.
std::string FormatPullProgress(const std::string& image, const PullEvent& event, bool terminal);

class PullProgressWatch {
 public:
  // Starts following `agent`'s events on a thread of its own and waits (up
  // to two seconds) until the agent has accepted the stream, so that no
  // event of a call made next is missed. Shows nothing when `enabled` is
  // false. `agent` must outlive the watch.
  PullProgressWatch(const AgentClient& agent, std::string image, bool enabled);
  // Waits (up to two seconds) for the last event of a pull it has seen begin,
  // since the agent's answer may come before that event does; then stops
  // following and ends a bar drawn in place with its line.
  ~PullProgressWatch();

  PullProgressWatch(const PullProgressWatch&) = delete;
  PullProgressWatch& operator=(const PullProgressWatch&) = delete;

 private:
  // Reads one piece of the event stream; shows what concerns the image.
  void Take(std::string_view chunk);
  void Show(const PullEvent& event);

  const std::string image_;
  const bool terminal_;  // stderr is a terminal: redraw in place
  std::atomic<bool> stop_{false};
  slotd::Mutex mutex_;
  std::condition_variable changed_cv_;  // connected_ or pull_open_ changed
  bool connected_ GUARDED_BY(mutex_) = false;
  bool pull_open_ GUARDED_BY(mutex_) = false;  // a pull was seen begin and not end, and the stream goes on
  std::string pending_;     // the stream read, not yet a whole line; the follower thread's alone
  bool drawn_ = false;      // a bar is on the terminal's last line; the follower thread's alone
  std::chrono::steady_clock::time_point last_line_;  // the last plain line; the follower thread's alone
  std::thread follower_;
};

}  // namespace slotctl
