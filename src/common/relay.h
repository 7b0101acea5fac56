// Relay: carries an interactive session's bytes between a local end and a
// remote connection, both ways, until the remote end closes: the agent
// between a client and the engine's exec, slotctl between the terminal and
// the agent.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>

namespace slotd {

// How a relay behaves beyond its defaults.
struct RelayOptions {
  // The longest one write to a socket may wait for its reader; past it the
  // relay ends (kWriteTimedOut). Zero: no bound (a local terminal).
  std::chrono::milliseconds write_timeout{0};
  // The end of `input` ends the relay (kInputEnded) instead of being passed
  // on as a shutdown of `remote`'s sending half.
  bool input_end_ends = false;
  // Runs at least every 100 ms, between copies.
  std::function<void()> on_tick;
};

// Why a relay ended.
enum class RelayEnd {
  kRemoteEnded,   // `remote` closed: the session is over
  kInputEnded,    // `input` closed or failed (with input_end_ends)
  kOutputGone,    // a write to `output` or `remote` failed: its reader is gone
  kWriteTimedOut, // a write waited past write_timeout
  kStopped,       // `stop` became true
};

// Copies what `input` gives to `remote`, and what `remote` gives to
// `output`, until one of the ends in RelayEnd. `input` and `output` may be
// one socket. Writes to sockets never block past `stop` or the write
// timeout (they are sent without waiting, then polled); writes to other
// descriptors (a terminal, a pipe) block. At most 64 KiB is held at a time.
RelayEnd Relay(int input, int output, int remote, const std::atomic<bool>& stop, const RelayOptions& options = {});

// Writes all of `bytes` to `fd`; false when the other side is gone, a socket
// write waits longer than `timeout` (zero: no bound) or `stop` (when given)
// becomes true. Blocks on descriptors that are not sockets.
bool WriteAll(int fd, const char* bytes, size_t size, std::chrono::milliseconds timeout = {},
              const std::atomic<bool>* stop = nullptr);

}  // namespace slotd
