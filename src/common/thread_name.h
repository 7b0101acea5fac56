// Thread names, as /proc/<pid>/task/<tid>/comm, top -H and gdb show them:
// every thread the agent makes names itself, so that a count of its
// threads says which is which.
#pragma once

#include <cstddef>
#include <string_view>

#include <boost/asio/thread_pool.hpp>

namespace slotd {

// Names the calling thread `name`, cut to the 15 bytes the kernel keeps.
void NameThisThread(std::string_view name);

// Names each of the `threads` threads of `pool` (as many as it was made
// with) `name`; returns once all are named. Call it before anything else is
// posted to the pool: each thread takes one naming task and holds it until
// every other has taken one.
void NamePoolThreads(boost::asio::thread_pool& pool, size_t threads, std::string_view name);

}  // namespace slotd
