// KernelHolds: which call holds each kernel now, the one record of it beside
// the states a call owns by being in them (KernelTable::OwnedByACall), and
// KernelHold, the token a call keeps while it holds one. The table owns the
// record and makes and ends the holds; this keeps the entries.
//
// Not thread-safe: guarded by the kernel table's lock, as the table is.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <string>

namespace slotd {

class KernelTable;

// A call's hold of one kernel (KernelTable::Hold, BeginRestart,
// BeginPolicyRestart): while held, the kernel is OwnedByACall. Given back
// by the transition that ends its act, by KernelTable::Release, or by the
// destructor, which takes the table's lock and undoes what the hold took
// (a restart's claim): never destroy a held one with that lock held.
// Movable, not copyable.
class KernelHold {
 public:
  KernelHold() = default;
  KernelHold(KernelHold&& other) noexcept;
  KernelHold& operator=(KernelHold&& other) noexcept;
  KernelHold(const KernelHold&) = delete;
  KernelHold& operator=(const KernelHold&) = delete;
  ~KernelHold();

  // Whether it still holds its kernel.
  bool held() const { return ticket_ != 0; }
  const std::string& kernel_id() const { return kernel_id_; }

 private:
  friend class KernelTable;
  KernelHold(KernelTable& table, std::string kernel_id, uint64_t ticket)
      : table_(&table), kernel_id_(std::move(kernel_id)), ticket_(ticket) {}
  // Whether this is the hold on its kernel in `table`, whose record is `holds`.
  bool CurrentIn(const KernelTable& table, const class KernelHolds& holds) const;

  KernelTable* table_ = nullptr;
  std::string kernel_id_;
  uint64_t ticket_ = 0;  // 0: not held
};

class KernelHolds {
 public:
  // What a call that holds a kernel does.
  enum class Act {
    kRestart,        // RestartKernel's restart
    kPolicyRestart,  // its restart policy's restart
    kGiveWarm,       // a WARM kernel being given to a create
    kRemoveWarm,     // a warm pool's kernel being removed
    kEnd,            // a stop the agent caused, for the kernel's restart policy to decide on (its why: the end's reason)
  };
  // A hold: what for, and the ticket that gives it back.
  struct Entry {
    Act act;
    std::string why;
    uint64_t ticket;
  };

  // Records a hold of `kernel_id` for `act`, replacing none (the caller has
  // checked that there is none); returns its ticket (never 0).
  uint64_t Add(const std::string& kernel_id, Act act, std::string why);
  // The hold on `kernel_id`, or nullptr.
  const Entry* Of(const std::string& kernel_id) const;
  // Whether `ticket` is the hold on `kernel_id` now.
  bool Current(const std::string& kernel_id, uint64_t ticket) const;
  // Drops the hold on `kernel_id`, if any, and wakes those waiting for it.
  void Drop(const std::string& kernel_id);
  // Notified, under the table's lock, each time a hold is dropped.
  std::condition_variable& Released() const { return released_; }
  // What `act` is doing, as a refusal says it ("restarting", ...).
  static std::string Doing(const Entry& hold);

 private:
  std::map<std::string, Entry> entries_;  // kernel id -> the call that holds it
  uint64_t next_ticket_ = 1;
  mutable std::condition_variable released_;
};

}  // namespace slotd
