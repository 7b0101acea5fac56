#include "cli/pull_progress.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/json_reader.h"
#include "common/units.h"
#include "model/event_type.h"

namespace slotctl {
namespace {

using nlohmann::json;

// Plain progress lines come at most this often.
constexpr std::chrono::seconds kLineEvery{1};
// The widest a bar is drawn.
constexpr int kBarWidth = 30;
// A line of the event stream longer than this is no event of ours.
constexpr size_t kMaxLine = 1u << 20;
// How long the watch waits for a pull's last event once the call is answered.
constexpr std::chrono::seconds kLastEventWait{2};

}  // namespace

std::string ReadableSize(uint64_t bytes) {
  char text[32];
  if (bytes < (1u << 10)) return std::to_string(bytes) + " B";
  const double value = static_cast<double>(bytes);
  if (bytes < (1u << 20)) std::snprintf(text, sizeof text, "%.1f KiB", value / (1u << 10));
  else if (bytes < (1ull << 30)) std::snprintf(text, sizeof text, "%.1f MiB", value / (1u << 20));
  else std::snprintf(text, sizeof text, "%.2f GiB", value / (1ull << 30));
  return text;
}

std::string FormatPullProgress(const std::string& image, const PullEvent& event, bool terminal) {
  // An engine that sends no sizes (Podman) is shown by its layers alone.
  const bool sized = event.bytes_total > 0;
  const std::string bytes =
      sized ? ", " + ReadableSize(event.bytes_done) + " of " + ReadableSize(event.bytes_total) : "";
  const std::string layers = std::to_string(event.layers_done) + "/" + std::to_string(event.layers) + " layers";
  if (event.state == "done")
    return "pulled " + image + ": " + layers + (sized ? ", " + ReadableSize(event.bytes_total) : "");
  if (event.state == "failed") return "pulling " + image + " failed after " + layers + bytes;
  if (event.layers == 0) return "pulling " + image + ": asking its registry";
  if (!terminal) return "pulling " + image + ": " + layers + bytes;
  const double fraction =
      sized ? std::min(1.0, static_cast<double>(event.bytes_done) / static_cast<double>(event.bytes_total))
            : static_cast<double>(event.layers_done) / static_cast<double>(event.layers);
  const int filled = static_cast<int>(fraction * kBarWidth);
  return "pulling " + image + " [" + std::string(filled, '#') + std::string(kBarWidth - filled, '-') + "] " +
         std::to_string(static_cast<int>(fraction * 100)) + "%" + (sized ? " " + bytes.substr(2) : "") + ", " +
         layers;
}

PullProgressWatch::PullProgressWatch(const AgentClient& agent, std::string image, bool enabled)
    : image_(std::move(image)), terminal_(::isatty(STDERR_FILENO) == 1) {
  if (!enabled) return;
  follower_ = std::thread([this, &agent] {
    auto on_connected = [this] {
      slotd::MutexLock lock(mutex_);
      connected_ = true;
      changed_cv_.notify_all();
    };
    agent.Stream("/v1/events", [this](std::string_view chunk) { return Take(chunk), true; }, &stop_, on_connected);
    slotd::MutexLock lock(mutex_);  // failed or ended: nobody waits for it any more
    connected_ = true;
    pull_open_ = false;
    changed_cv_.notify_all();
  });
  slotd::MutexLock lock(mutex_);
  changed_cv_.wait_for(lock.native(), std::chrono::seconds(2), [this]() REQUIRES(mutex_) { return connected_; });
}

PullProgressWatch::~PullProgressWatch() {
  {
    slotd::MutexLock lock(mutex_);
    changed_cv_.wait_for(lock.native(), kLastEventWait, [this]() REQUIRES(mutex_) { return !pull_open_; });
  }
  stop_ = true;
  if (follower_.joinable()) follower_.join();
  if (drawn_) std::cerr << "\n";
}

void PullProgressWatch::Take(std::string_view chunk) {
  pending_.append(chunk);
  size_t start = 0;
  for (size_t nl; (nl = pending_.find('\n', start)) != std::string::npos; start = nl + 1) {
    const std::string_view line(pending_.data() + start, nl - start);
    if (line.rfind("data: ", 0) != 0) continue;
    std::optional<json> parsed = slotd::ParseJsonWithin(line.substr(6));
    if (!parsed) continue;
    const slotd::JsonReader reader(std::move(*parsed), "the event");
    const slotd::JsonField event = reader.Root();
    if (event.Optional("type").String() != slotd::EventTypeName(slotd::EventType::kImagePull) ||
        event.Optional("image").String() != image_)
      continue;
    const auto layers = [&event](const char* key) { return static_cast<int>(event.Optional(key).Count(INT32_MAX)); };
    const PullEvent progress{event.Optional("state").String(), layers("layers"), layers("layers_done"),
                             event.Optional("bytes_done").Count(), event.Optional("bytes_total").Count()};
    if (reader.problem().empty()) Show(progress);  // an event it cannot read is not shown wrong
  }
  pending_.erase(0, start);
  if (pending_.size() > kMaxLine) pending_.clear();
}

void PullProgressWatch::Show(const PullEvent& event) {
  const bool last = event.state != "pulling";
  {
    slotd::MutexLock lock(mutex_);
    pull_open_ = !last;
    changed_cv_.notify_all();
  }
  const std::string text = FormatPullProgress(image_, event, terminal_);
  if (terminal_) {
    std::cerr << "\r\033[K" << text << (last ? "\n" : "") << std::flush;
    drawn_ = !last;
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (!last && now - last_line_ < kLineEvery) return;
  last_line_ = now;
  std::cerr << text << "\n" << std::flush;
}

}  // namespace slotctl
