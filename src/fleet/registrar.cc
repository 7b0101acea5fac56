#include "fleet/registrar.h"

#include <fstream>

#include <spdlog/spdlog.h>

#include "common/atomic_file.h"
#include "common/thread_name.h"

namespace slotd {

namespace {

using std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;

constexpr milliseconds kFirstRetry{500};
constexpr milliseconds kLongestRetry{10'000};

// The lease id recorded in `path`; 0 when there is none.
int64_t ReadLeaseFile(const std::string& path) {
  if (path.empty()) return 0;
  std::ifstream in(path);
  int64_t lease = 0;
  return in >> lease ? lease : 0;
}

void WriteLeaseFile(const std::string& path, int64_t lease) {
  if (path.empty()) return;
  if (Status s = WriteFileAtomically(path, std::to_string(lease) + "\n"); !s.ok())
    spdlog::warn("{}; a restart within the lease's time may find its id taken", s.message());
}

// Who holds a key, for messages: "node gpu2 at 10.0.0.2:6001".
std::string HolderOf(const EtcdKeyValue& kv) {
  auto doc = AgentDocument::FromJson(kv.value);
  if (!doc.ok()) return "an agent whose document cannot be read (" + doc.status().message() + ")";
  return "node " + doc->node + " at " + doc->address;
}

// The refusal for `key` held as `holder`.
std::string HeldMessage(const std::string& key, const EtcdKeyValue& holder) {
  const std::string id = key.substr(key.rfind('/') + 1);
  return "agent id " + id + " is already registered in etcd by " + HolderOf(holder) + " (key " + key +
         "); give this agent another [agent] id, or stop that agent";
}

milliseconds NextBackoff(milliseconds current) {
  return current.count() == 0 ? kFirstRetry : std::min(current * 2, kLongestRetry);
}

}  // namespace

Status CheckAgentIdFree(const EtcdClient& etcd, const std::string& key, const std::string& lease_file) {
  auto listing = etcd.GetPrefix(key);
  if (!listing.ok() && listing.status().code() == Status::Code::kFailedPrecondition)
    return listing.status();  // etcd answered: its refusal (authentication) is the operator's to fix
  if (!listing.ok()) {
    spdlog::warn("etcd: cannot check that {} is free ({}); starting, and registering once etcd answers", key,
                 listing.status().message());
    return Status::Ok();
  }
  for (const EtcdKeyValue& kv : listing->kvs)
    if (kv.key == key && (kv.lease == 0 || kv.lease != ReadLeaseFile(lease_file)))
      return Status::FailedPrecondition(HeldMessage(key, kv));
  return Status::Ok();
}

const char* RegistrationPhaseName(Registration::Phase phase) {
  switch (phase) {
    case Registration::Phase::kRegistering: return "registering";
    case Registration::Phase::kRegistered: return "registered";
    case Registration::Phase::kUnreachable: return "unreachable";
    case Registration::Phase::kConflict: return "conflict";
  }
  return "registering";
}

Registrar::Registrar(const EtcdClient& etcd, Options options, std::function<AgentDocument()> document, Clock& clock)
    : etcd_(etcd), options_(std::move(options)), document_(std::move(document)), clock_(clock) {
  MutexLock lock(mutex_);
  state_.key = options_.key;
  state_.since = clock_.UnixSeconds();
}

Registrar::~Registrar() { Stop(false); }

Registration Registrar::State() const {
  MutexLock lock(mutex_);
  return state_;
}

void Registrar::SetPhase(Registration::Phase phase, std::string detail) {
  if (state_.phase != phase) state_.since = clock_.UnixSeconds();
  if (state_.phase != phase || state_.detail != detail) {
    if (phase == Registration::Phase::kRegistered)
      spdlog::info("etcd: registered as {} (lease {:x}, ttl {}s)", options_.key, state_.lease, options_.lease_ttl.count());
    else
      spdlog::warn("etcd: {}: {}", RegistrationPhaseName(phase), detail);
  }
  state_.phase = phase;
  state_.detail = std::move(detail);
}

Registrar::Attempt Registrar::TryRegister() {
  auto lease = etcd_.GrantLease(options_.lease_ttl);
  if (!lease.ok()) {
    MutexLock lock(mutex_);
    SetPhase(Registration::Phase::kUnreachable, lease.status().message());
    return Attempt::kUnreachable;
  }
  const AgentDocument doc = document_();
  const std::string value = doc.ToJson().dump();
  auto created = etcd_.CreateIfAbsent(options_.key, value, *lease);
  // The key held by this agent's previous run (killed before its lease ran
  // out): that run is over, its lease goes, and the key is taken again.
  const int64_t previous = ReadLeaseFile(options_.lease_file);
  if (created.ok() && !created->created && created->holder && previous != 0 && created->holder->lease == previous) {
    spdlog::info("etcd: {} is held by this agent's previous run (lease {:x}); taking it back", options_.key, previous);
    if (Status s = etcd_.RevokeLease(previous); s.ok()) created = etcd_.CreateIfAbsent(options_.key, value, *lease);
  }
  if (!created.ok() || !created->created) {
    // Best effort: the lease would run out anyway.
    if (Status revoked = etcd_.RevokeLease(*lease); !revoked.ok())
      spdlog::debug("etcd: revoking the unused lease {:x}: {}", *lease, revoked.message());
  }
  MutexLock lock(mutex_);
  if (!created.ok()) {
    SetPhase(Registration::Phase::kUnreachable, created.status().message());
    return Attempt::kUnreachable;
  }
  if (!created->created) {
    SetPhase(Registration::Phase::kConflict, HeldMessage(options_.key, *created->holder));
    return Attempt::kConflict;
  }
  state_.lease = *lease;
  ++state_.writes;
  written_ = doc;
  rewrite_ = false;
  last_write_ = Steady::now();
  next_keep_alive_ = Steady::now() + options_.lease_ttl / 3;
  backoff_ = milliseconds(0);
  SetPhase(Registration::Phase::kRegistered, "");
  WriteLeaseFile(options_.lease_file, *lease);
  return Attempt::kRegistered;
}

Status Registrar::RegisterOnce() {
  if (TryRegister() != Attempt::kConflict) return Status::Ok();
  MutexLock lock(mutex_);
  return Status::FailedPrecondition(state_.detail);
}

milliseconds Registrar::Tick() {
  int64_t lease;
  bool keep_alive_due, unreachable;
  {
    MutexLock lock(mutex_);
    lease = state_.lease;
    keep_alive_due = Steady::now() >= next_keep_alive_;
    unreachable = state_.phase == Registration::Phase::kUnreachable;
  }
  if (lease == 0) {  // not registered: try again, later and later while it fails
    const Attempt attempt = TryRegister();
    MutexLock lock(mutex_);
    if (attempt == Attempt::kRegistered) return options_.write_interval;
    backoff_ = attempt == Attempt::kConflict ? std::max(NextBackoff(backoff_), milliseconds(2'000)) : NextBackoff(backoff_);
    return backoff_;
  }
  if (keep_alive_due || unreachable) {
    auto ttl = etcd_.KeepAlive(lease);
    MutexLock lock(mutex_);
    if (!ttl.ok()) {
      SetPhase(Registration::Phase::kUnreachable, ttl.status().message());
      backoff_ = std::min(NextBackoff(backoff_), std::chrono::duration_cast<milliseconds>(options_.lease_ttl) / 3);
      return backoff_;
    }
    ++state_.keep_alives;
    backoff_ = milliseconds(0);
    if (*ttl == 0) {  // the lease ran out while etcd was away: register again, checking the id again
      spdlog::warn("etcd: the lease of {} ran out; registering again", options_.key);
      state_.lease = 0;
      SetPhase(Registration::Phase::kRegistering, "the lease ran out");
      return milliseconds(0);
    }
    next_keep_alive_ = Steady::now() + options_.lease_ttl / 3;
    if (state_.phase != Registration::Phase::kRegistered) {
      rewrite_ = true;  // what changed while etcd was away
      SetPhase(Registration::Phase::kRegistered, "");
    }
  }
  {
    MutexLock lock(mutex_);
    if (Steady::now() - last_write_ < options_.write_interval)
      return std::chrono::duration_cast<milliseconds>(options_.write_interval - (Steady::now() - last_write_));
  }
  const AgentDocument doc = document_();
  {
    MutexLock lock(mutex_);
    if (doc == written_ && !rewrite_) return options_.write_interval;
  }
  auto held = etcd_.PutIfHeld(options_.key, doc.ToJson().dump(), lease);
  MutexLock lock(mutex_);
  if (!held.ok()) {
    SetPhase(Registration::Phase::kUnreachable, held.status().message());
    backoff_ = NextBackoff(backoff_);
    return backoff_;
  }
  if (!*held) {  // the key went (deleted by hand, or its lease ran out): register again
    spdlog::warn("etcd: {} is no longer this agent's; registering again", options_.key);
    state_.lease = 0;
    SetPhase(Registration::Phase::kRegistering, "the key was lost");
    return milliseconds(0);
  }
  ++state_.writes;
  written_ = doc;
  rewrite_ = false;
  last_write_ = Steady::now();
  return options_.write_interval;
}

void Registrar::Run() {
  NameThisThread("registrar");
  for (;;) {
    const milliseconds wait = Tick();
    MutexLock lock(mutex_);
    const auto until = Steady::now() + wait;
    while (!stopping_ && Steady::now() < until) wake_.wait_until(lock.native(), until);
    if (stopping_) return;
  }
}

void Registrar::Start() {
  MutexLock lock(mutex_);
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] { Run(); });
}

void Registrar::Stop(bool deregister) {
  {
    MutexLock lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (!deregister) return;
  int64_t lease;
  {
    MutexLock lock(mutex_);
    lease = state_.lease;
    state_.lease = 0;
  }
  if (lease == 0) return;
  if (Status s = etcd_.RevokeLease(lease); !s.ok())
    return spdlog::warn("etcd: cannot remove {} ({}); it expires with its lease", options_.key, s.message());
  spdlog::info("etcd: removed {}", options_.key);
  if (!options_.lease_file.empty()) std::remove(options_.lease_file.c_str());
}

}  // namespace slotd
