// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "connections/pool_core.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tether {
namespace internal {

absl::string_view LinkStateName(LinkState s) {
  switch (s) {
    case LinkState::kIdle:
      return "IDLE";
    case LinkState::kConnecting:
      return "CONNECTING";
    case LinkState::kReady:
      return "READY";
    case LinkState::kTransientFailure:
      return "TRANSIENT_FAILURE";
    case LinkState::kShutdown:
      return "SHUTDOWN";
  }
  return "UNKNOWN";
}

// ---------------------------------------------------------------------------
// PoolCore.

namespace {

// Lower is better.
int PickRank(LinkState s) {
  switch (s) {
    case LinkState::kReady:
      return 0;
    case LinkState::kIdle:
    case LinkState::kConnecting:
      return 1;
    case LinkState::kTransientFailure:
      return 2;
    case LinkState::kShutdown:
      break;
  }
  return -1;  // never picked
}

}  // namespace

std::shared_ptr<PoolCore> PoolCore::Create(const ConnectionPoolOptions& options,
                                           ConnectionDriver* driver) {
  return std::shared_ptr<PoolCore>(new PoolCore(options, driver));
}

PoolCore::PoolCore(const ConnectionPoolOptions& options,
                   ConnectionDriver* driver)
    : options_(options),
      driver_(driver),
      clock_(options.clock),
      observer_(options.observer) {
  if (!options_.addresses.empty()) {
    groups_ = options_.addresses;
  } else {
    groups_.push_back(options_.target);
  }
  if (clock_ == nullptr) {
    // SystemClock() is never destroyed: hold it without owning it.
    clock_ = std::shared_ptr<Clock>(&SystemClock(), [](Clock*) {});
  }
}

std::size_t PoolCore::GroupCountLocked(std::size_t group,
                                       bool live_only) const {
  std::size_t n = 0;
  for (const auto& entry : conns_) {
    const Conn& c = entry.second;
    if (c.group == group && (!live_only || c.Live())) ++n;
  }
  return n;
}

PoolCore::Conn* PoolCore::OpenLocked(std::size_t group, Deferred& later) {
  const std::uint64_t id = next_id_++;
  Conn& c = conns_[id];
  c.id = id;
  c.group = group;
  c.link = driver_->Open(id, groups_[group]);
  ++total_opened_;
  if (observer_ != nullptr) {
    auto obs = observer_;
    std::string target = groups_[group];
    later.Add([obs, id, target] { obs->OnConnectionOpened(id, target); });
  }
  MaybeRetireOrArmLocked(c, later);  // arms the idle timer: no picks yet
  return &c;
}

void PoolCore::EnsureGroupsLocked(Deferred& later) {
  const auto cap = static_cast<std::size_t>(options_.max_connections);
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    if (GroupCountLocked(g, /*live_only=*/true) == 0 &&
        GroupCountLocked(g, /*live_only=*/false) < cap) {
      OpenLocked(g, later);
    }
  }
}

void PoolCore::Start() {
  Deferred later;  // runs after the lock is released
  {
    MutexLock lock(&mu_);
    if (!shut_down_) EnsureGroupsLocked(later);
  }
}

absl::StatusOr<ConnectionPick> PoolCore::Pick(
    std::weak_ptr<DrainListener> listener) {
  Deferred later;  // runs after the lock is released
  absl::StatusOr<ConnectionPick> result;
  {
    MutexLock lock(&mu_);
    if (shut_down_) {
      result = absl::UnavailableError("connection pool shut down");
    } else {
      EnsureGroupsLocked(later);
      Conn* best = nullptr;
      int best_rank = 0;
      for (auto& entry : conns_) {
        Conn& c = entry.second;
        const int rank = PickRank(c.state);
        if (!c.Live() || rank < 0) continue;
        if (best == nullptr || rank < best_rank ||
            (rank == best_rank && c.picks < best->picks)) {
          best = &c;
          best_rank = rank;
        }
      }
      if (best == nullptr) {
        result = absl::UnavailableError(absl::StrCat(
            "no usable connection: all are draining or suspect and the pool "
            "is at max_connections (",
            options_.max_connections, ")"));
      } else {
        if (best->idle_timer != 0) {
          clock_->Cancel(best->idle_timer);
          best->idle_timer = 0;
        }
        ++best->holders[std::move(listener)].picks;
        ++best->picks;
        ConnectionPick pick;
        pick.connection_id = best->id;
        pick.channel = best->link->channel();
        result = std::move(pick);
      }
    }
  }
  return result;
}

void PoolCore::Release(std::uint64_t connection_id,
                       const std::weak_ptr<DrainListener>& listener) {
  Deferred later;  // runs after the lock is released
  {
    MutexLock lock(&mu_);
    auto it = conns_.find(connection_id);
    if (it == conns_.end()) return;
    Conn& c = it->second;
    auto h = c.holders.find(listener);
    if (h != c.holders.end()) {
      if (--h->second.picks == 0) c.holders.erase(h);
      --c.picks;
      MaybeRetireOrArmLocked(c, later);
    }
  }
}

void PoolCore::ReportDrainEnd(std::uint64_t connection_id,
                              const absl::Status& status) {
  Deferred later;  // runs after the lock is released
  {
    MutexLock lock(&mu_);
    auto it = conns_.find(connection_id);
    if (it == conns_.end()) return;
    Conn& c = it->second;
    // Only a connection that still looks READY and usable is suspect; one we
    // have seen leave READY is already draining, one never READY simply
    // failed to connect.
    if (c.state != LinkState::kReady || !c.Live()) return;
    c.suspect = true;
    if (observer_ != nullptr) {
      auto obs = observer_;
      later.Add([obs, connection_id, status] {
        obs->OnConnectionSuspect(connection_id, status);
      });
    }
    const std::size_t group = c.group;
    MaybeRetireOrArmLocked(c, later);  // may erase c
    ReplaceIfNeededLocked(group, later);
  }
}

void PoolCore::MarkDrainingLocked(Conn& c, std::string why, Deferred& later) {
  c.draining = true;
  const std::uint64_t id = c.id;
  if (observer_ != nullptr) {
    auto obs = observer_;
    later.Add([obs, id, why] { obs->OnConnectionDraining(id, why); });
  }
  // Tell each distinct listener once.
  for (auto& [listener, h] : c.holders) {
    if (h.told) continue;
    h.told = true;
    std::weak_ptr<DrainListener> weak = listener;
    later.Add([weak, id, why] {
      if (auto l = weak.lock()) l->OnConnectionDraining(id, why);
    });
  }
  // Make before break: the replacement exists before any listener runs, so a
  // burst of listeners that re-pick all land on it.
  const std::size_t group = c.group;
  MaybeRetireOrArmLocked(c, later);  // may erase c
  ReplaceIfNeededLocked(group, later);
}

void PoolCore::ReplaceIfNeededLocked(std::size_t group, Deferred& later) {
  if (shut_down_) return;
  const auto cap = static_cast<std::size_t>(options_.max_connections);
  if (GroupCountLocked(group, /*live_only=*/true) == 0 &&
      GroupCountLocked(group, /*live_only=*/false) < cap) {
    OpenLocked(group, later);
  }
}

void PoolCore::MaybeRetireOrArmLocked(Conn& c, Deferred& later) {
  if (c.picks != 0) return;
  if (!c.Live()) {
    RetireLocked(c.id, later);
    return;
  }
  if (options_.idle_timeout == absl::InfiniteDuration()) return;
  if (c.idle_timer != 0) clock_->Cancel(c.idle_timer);
  // The timer's id is only known after RunAfter returns, so the callback
  // reads it from a cell written under mu_ (and read under it).
  auto cell = std::make_shared<Clock::TimerId>(0);
  std::weak_ptr<PoolCore> weak = weak_from_this();
  const std::uint64_t id = c.id;
  c.idle_timer = clock_->RunAfter(options_.idle_timeout, [weak, id, cell] {
    if (auto self = weak.lock()) self->OnIdleTimer(id, cell);
  });
  *cell = c.idle_timer;
}

void PoolCore::OnIdleTimer(std::uint64_t id,
                           const std::shared_ptr<Clock::TimerId>& cell) {
  Deferred later;  // runs after the lock is released
  {
    MutexLock lock(&mu_);
    const Clock::TimerId timer = *cell;
    auto it = conns_.find(id);
    if (it == conns_.end()) return;
    Conn& c = it->second;
    if (c.idle_timer != timer || timer == 0) return;
    c.idle_timer = 0;
    if (c.picks == 0) RetireLocked(id, later);
  }
}

void PoolCore::RetireLocked(std::uint64_t id, Deferred& later) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = it->second;
  if (c.idle_timer != 0) clock_->Cancel(c.idle_timer);
  later.Add([link = std::move(c.link)] { link->Close(); });
  conns_.erase(it);
  if (observer_ != nullptr) {
    auto obs = observer_;
    later.Add([obs, id] { obs->OnConnectionRetired(id); });
  }
}

void PoolCore::OnLinkState(std::uint64_t connection_id, LinkState state) {
  Deferred later;  // runs after the lock is released
  {
    MutexLock lock(&mu_);
    auto it = conns_.find(connection_id);
    if (it == conns_.end()) return;
    Conn& c = it->second;
    const LinkState old = c.state;
    c.state = state;
    if (state == LinkState::kReady) {
      if (!c.was_ready) {
        c.was_ready = true;
        if (observer_ != nullptr) {
          auto obs = observer_;
          later.Add(
              [obs, connection_id] { obs->OnConnectionReady(connection_id); });
        }
      }
    } else if (!c.draining && (c.was_ready || state == LinkState::kShutdown)) {
      MarkDrainingLocked(
          c,
          absl::StrCat("connection left ", LinkStateName(old), " for ",
                       LinkStateName(state),
                       c.was_ready ? " (GOAWAY or failure)" : ""),
          later);
    }
  }
}

void PoolCore::OnLinkHealth(std::uint64_t connection_id, bool serving) {
  if (serving) return;
  Deferred later;  // runs after the lock is released
  {
    MutexLock lock(&mu_);
    auto it = conns_.find(connection_id);
    if (it == conns_.end() || it->second.draining) return;
    MarkDrainingLocked(it->second, "health check reports NOT_SERVING", later);
  }
}

ConnectionPoolStats PoolCore::Stats() {
  MutexLock lock(&mu_);
  ConnectionPoolStats s;
  s.total_opened = total_opened_;
  for (const auto& entry : conns_) {
    const Conn& c = entry.second;
    ++s.open;
    s.picks += c.picks;
    if (c.draining) {
      ++s.draining;
    } else if (c.suspect) {
      ++s.suspect;
    } else if (c.state == LinkState::kReady) {
      ++s.ready;
    }
  }
  return s;
}

bool PoolCore::IsOpen(std::uint64_t id) {
  MutexLock lock(&mu_);
  return conns_.count(id) != 0;
}

bool PoolCore::IsConnected(std::uint64_t connection_id) {
  MutexLock lock(&mu_);
  auto it = conns_.find(connection_id);
  return it != conns_.end() && it->second.state == LinkState::kReady;
}

void PoolCore::Shutdown() {
  Deferred later;  // runs after the lock is released
  {
    MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    std::vector<std::uint64_t> ids;
    for (const auto& entry : conns_) ids.push_back(entry.first);
    for (std::uint64_t id : ids) RetireLocked(id, later);
  }
}

}  // namespace internal
}  // namespace tether
