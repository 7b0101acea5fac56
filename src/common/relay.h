// Relay: carries an interactive session's bytes between a local end and a
// remote connection, both ways, until the remote end closes: the agent
// between a client and the engine's exec, slotctl between the terminal and
// the agent.
#pragma once

#include <atomic>
#include <functional>

namespace slotd {

// Copies what `input` gives to `remote`, and what `remote` gives to
// `output`, until `remote` ends (its end is the session's end), a write
// fails (the other side is gone) or `stop` becomes true. The end of `input`
// is passed on as a shutdown of `remote`'s sending half, so that the remote
// side sees end-of-input and can finish. `input` and `output` may be one
// socket. `on_tick` runs at least every 100 ms, between copies. Blocking
// descriptors; at most 64 KiB is held at a time.
void Relay(int input, int output, int remote, const std::atomic<bool>& stop,
           const std::function<void()>& on_tick = nullptr);

// Writes all of `bytes` to `fd` (blocking); false when the other side is gone.
bool WriteAll(int fd, const char* bytes, size_t size);

}  // namespace slotd
