#include "agent/kernel_holds.h"

#include <utility>

#include "agent/kernel_table.h"
#include "common/mutex.h"

namespace slotd {

KernelHold::KernelHold(KernelHold&& other) noexcept
    : table_(other.table_), kernel_id_(std::move(other.kernel_id_)), ticket_(std::exchange(other.ticket_, 0)) {}

KernelHold& KernelHold::operator=(KernelHold&& other) noexcept {
  if (this != &other) {
    KernelHold old(std::move(*this));  // gives back what this held, once `other` is taken
    table_ = other.table_;
    kernel_id_ = std::move(other.kernel_id_);
    ticket_ = std::exchange(other.ticket_, 0);
  }
  return *this;
}

KernelHold::~KernelHold() {
  if (!table_ || ticket_ == 0) return;
  MutexLock lock(table_->mutex_);
  table_->Release(*this);
}

bool KernelHold::CurrentIn(const KernelTable& table, const KernelHolds& holds) const {
  return table_ == &table && holds.Current(kernel_id_, ticket_);
}

uint64_t KernelHolds::Add(const std::string& kernel_id, Act act, std::string why) {
  const uint64_t ticket = next_ticket_++;
  entries_[kernel_id] = Entry{act, std::move(why), ticket};
  return ticket;
}

const KernelHolds::Entry* KernelHolds::Of(const std::string& kernel_id) const {
  auto it = entries_.find(kernel_id);
  return it == entries_.end() ? nullptr : &it->second;
}

bool KernelHolds::Current(const std::string& kernel_id, uint64_t ticket) const {
  const Entry* entry = Of(kernel_id);
  return entry && ticket != 0 && entry->ticket == ticket;
}

void KernelHolds::Drop(const std::string& kernel_id) {
  if (entries_.erase(kernel_id) > 0) released_.notify_all();
}

std::string KernelHolds::Doing(const Entry& hold) {
  switch (hold.act) {
    case Act::kRestart:
    case Act::kPolicyRestart: return "restarting";
    case Act::kGiveWarm: return "being given to a create";
    case Act::kRemoveWarm: return "being removed from its warm pool";
    case Act::kEnd: return "being stopped: " + hold.why;
  }
  return "held";
}

}  // namespace slotd
