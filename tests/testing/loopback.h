// A TCP connection to this machine's loopback, for tests and benchmarks
// that speak to a listener byte by byte.
#pragma once

namespace slotd::testing {

// A connected, blocking TCP socket to 127.0.0.1:`port` (close-on-exec);
// -1 when the connection is refused or no socket can be made.
int ConnectToLoopback(int port);

}  // namespace slotd::testing
