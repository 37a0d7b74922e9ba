// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "connections/pool_core.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tether/internal/stream_random.h"
#include "time/system_clock.h"

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

// gRPC's subchannel backoff uses these too (not settable by channel args),
// so a connection's own reconnects and the pool's opens share one schedule.
constexpr double kProbeMultiplier = 1.6;
constexpr double kProbeJitter = 0.2;
// Bounds the exponent; 1.6^40 is far past any max_backoff / initial ratio.
constexpr int kMaxProbeExponent = 40;
// How long a connection that only restores the standby count waits after a
// drain (see DeferRefillLocked). The streams leaving a connection start
// their moves within a few milliseconds (64 streams: about 10 ms at p99 on
// 2 cores); a connect begun at the same moment competes with them for the
// client's cores (TCP and HTTP/2 handshakes, TLS): with one standby, moves
// measured from the notice take 1.0-1.1x raw gRPC starting the same calls
// with the refill deferred, 1.3-2.0x without (docs/performance.md).
constexpr absl::Duration kStandbyRefillDelay = absl::Milliseconds(20);
// The herd that spreads its reopens over a whole
// `reopen_after_progress_jitter` (see ReopenShare). A smaller herd spreads
// over its part of the window, at the same pace: one stream reopens at
// once, 64 within half the window. 128 streams in the default 5 ms is one
// every 39 us, about what one raw gRPC call start costs a two-core client
// (35-90 us, docs/performance.md): the spread adds about one call start to
// a herd that the client's cores would pace anyway.
constexpr double kReopenHerd = 128;
// kDetect: an endpoint balances each call once this many escape connections
// (see Conn::escape_at) were refused calls within one probation, or one was
// while streams ran on through the endpoint's older connections. One alone
// is not enough: a new connection through an L4 balancer may reach the very
// server that is going away; two in a row is the pattern of a proxy.
constexpr int kEscapesRefusedForPerCall = 2;
// Fast retries a stream gets per suspect_end_window after calls refused on
// a per-call endpoint. Round robin sends about half of the calls retried
// together to the refusing server again, so a few rounds are normal; more
// within the window mean the service behind the proxy is down.
constexpr int kFastRetriesPerWindow = 3;

// The last Release made on this thread. A stream releases its pick and then
// reports the attempt's end on the same thread (one after the other, after
// its own lock), so a report that follows a Release of the same connection
// on this thread is attributed to that Release's listener. A report with no
// such Release counts as coming from a stream of its own.
struct LastRelease {
  const void* core = nullptr;
  std::uint64_t connection_id = 0;
  std::weak_ptr<ConnectionSource::DrainListener> listener;
};
thread_local LastRelease t_last_release;

// The listener of an entry of a listener set or map.
const std::weak_ptr<ConnectionSource::DrainListener>& ListenerOf(
    const std::weak_ptr<ConnectionSource::DrainListener>& l) {
  return l;
}
template <class T>
const std::weak_ptr<ConnectionSource::DrainListener>& ListenerOf(
    const std::pair<const std::weak_ptr<ConnectionSource::DrainListener>, T>&
        entry) {
  return entry.first;
}

bool SameOwner(const std::weak_ptr<ConnectionSource::DrainListener>& a,
               const std::weak_ptr<ConnectionSource::DrainListener>& b) {
  return !a.owner_before(b) && !b.owner_before(a);
}

}  // namespace

namespace {
// Set on the helper threads of TellDraining.
thread_local bool t_drain_helper = false;
}  // namespace

bool OnDrainHelperThread() { return t_drain_helper; }

void TellDraining(std::vector<std::weak_ptr<ConnectionSource::DrainListener>>
                      listeners,
                  std::uint64_t connection_id, const std::string& why) {
  const std::size_t n = listeners.size();
  const std::size_t threads = DrainFanOut(n);
  // The strong references taken here are dropped by the calling thread,
  // after every helper has finished: a listener (a stream) may hold the
  // last reference to the pool, whose destruction joins the pool's watcher
  // thread, which may be the one waiting here.
  std::vector<std::shared_ptr<ConnectionSource::DrainListener>> held(n);
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (;;) {
      const std::size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= n) return;
      held[i] = listeners[i].lock();
      if (held[i]) held[i]->OnConnectionDraining(connection_id, why);
    }
  };
  std::vector<std::thread> helpers;
  helpers.reserve(threads - 1);
  for (std::size_t t = 1; t < threads; ++t) {
    try {
      helpers.emplace_back([&work] {
        t_drain_helper = true;
        work();
      });
    } catch (const std::system_error&) {
      break;  // no thread to spare: the caller tells the rest itself
    }
  }
  work();
  for (std::thread& t : helpers) t.join();
  held.clear();  // here, on the calling thread
}

std::size_t DrainFanOut(std::size_t listeners) {
  if (listeners < kDrainFanOutMinListeners) return 1;
  // Starting a call mostly waits (locks, the channel's queue, the
  // scheduler), so more threads than cores still help; one per
  // kDrainFanOutMinListeners listeners, at most kDrainFanOutMaxThreads.
  return std::min(kDrainFanOutMaxThreads,
                  std::max<std::size_t>(2, listeners / kDrainFanOutMinListeners));
}

std::shared_ptr<PoolCore> PoolCore::Create(const ConnectionPoolOptions& options,
                                           ConnectionDriver* driver,
                                           std::uint64_t seed) {
  return std::shared_ptr<PoolCore>(new PoolCore(options, driver, seed));
}

PoolCore::PoolCore(const ConnectionPoolOptions& options,
                   ConnectionDriver* driver, std::uint64_t seed)
    : options_(options),
      driver_(driver),
      clock_(options.clock),
      observer_(options.observer) {
  MutexLock lock(&mu_);
  rng_.seed(SeedOrEntropy(seed));
  if (clock_ == nullptr) {
    // SystemClock() is never destroyed: hold it without owning it.
    clock_ = internal::SharedSystemClock();
  }
}

std::size_t PoolCore::GroupCountLocked(std::uint64_t group,
                                       bool live_only) const {
  std::size_t n = 0;
  for (const auto& entry : conns_) {
    const Conn& c = entry.second;
    if (c.group == group && (!live_only || c.Live())) ++n;
  }
  return n;
}

absl::Duration PoolCore::ProbeDelayLocked(int opens) {
  // The first open since stable may be followed by a second at once: one
  // connection lost soon after it opened (a rollout reaching a fresh
  // connection) is still replaced before break. Only repeats wait.
  if (opens == 0) return absl::ZeroDuration();
  const double factor =
      std::pow(kProbeMultiplier, std::min(opens - 1, kMaxProbeExponent));
  absl::Duration d = options_.probe_initial_backoff * factor;
  if (d > options_.probe_max_backoff) d = options_.probe_max_backoff;
  // One draw per open, uniform in [1 - jitter, 1 + jitter).
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  return d * (1.0 - kProbeJitter + 2.0 * kProbeJitter * u);
}

void PoolCore::NotifyLocked(Deferred& later,
                            std::function<void(ConnectionObserver&)> event) {
  if (observer_ == nullptr) return;
  events_->Post([obs = observer_, event = std::move(event)] { event(*obs); });
  later.Add([events = events_] { events->Run(); });
}

PoolCore::Conn* PoolCore::OpenLocked(std::uint64_t group, Deferred& later) {
  Group& g = groups_[group];
  if (g.probe_timer != 0) {
    clock_->Cancel(g.probe_timer);
    g.probe_timer = 0;
  }
  g.next_open = clock_->Now() + ProbeDelayLocked(g.opens_since_stable);
  g.opens_since_stable = std::min(g.opens_since_stable + 1, kMaxProbeExponent);
  const std::uint64_t id = next_id_++;
  Conn& c = conns_[id];
  c.id = id;
  c.group = group;
  c.link = driver_->Open(id, g.endpoint);
  // Opened while its endpoint is under suspicion: an escape.
  if (g.suspected_until > clock_->Now()) c.escape_at = clock_->Now();
  ++total_opened_;
  NotifyLocked(later, [id, target = g.endpoint.address](ConnectionObserver& o) {
    o.OnConnectionOpened(id, target);
  });
  MaybeRetireOrArmLocked(c, later);  // arms the idle timer: no picks yet
  return &c;
}

void PoolCore::EnsureGroupsLocked(Deferred& later) {
  for (auto& entry : groups_) ReplaceIfNeededLocked(entry.first, later);
}

std::size_t PoolCore::GroupPicksLocked(std::uint64_t group) const {
  std::size_t n = 0;
  for (const auto& entry : conns_) {
    if (entry.second.group == group) n += entry.second.picks;
  }
  return n;
}

bool PoolCore::GrowsWithPicks() const {
  return options_.standby_connections > 0 ||
         options_.max_streams_per_connection > 0;
}

std::size_t PoolCore::WantedLiveLocked(std::uint64_t group) const {
  if (!GrowsWithPicks()) return 1;
  const std::size_t picks = GroupPicksLocked(group);
  if (picks == 0) return 1;
  return std::max(1 + static_cast<std::size_t>(options_.standby_connections),
                  NeededForPicks(picks));
}

std::size_t PoolCore::NeededForPicks(std::size_t picks) const {
  if (options_.max_streams_per_connection <= 0) return 1;
  // Every pick of the group, on draining connections too (those streams are
  // moving and need room on the live ones), and room for the next.
  const auto per =
      static_cast<std::size_t>(options_.max_streams_per_connection);
  return picks / per + 1;
}

bool PoolCore::KeptAsStandbyLocked(const Conn& c) const {
  // Only while the group has streams; without, idle rules apply as usual.
  return GrowsWithPicks() && c.Live() &&
         GroupPicksLocked(c.group) != 0 &&
         GroupCountLocked(c.group, /*live_only=*/true) <=
             WantedLiveLocked(c.group);
}

void PoolCore::ReplaceIfNeededLocked(std::uint64_t group, Deferred& later) {
  if (shut_down_) return;
  const auto cap = static_cast<std::size_t>(options_.max_connections);
  auto found = groups_.find(group);
  // Leaving or missing endpoints get no new connection (the flap rule).
  if (found == groups_.end() || !found->second.member ||
      found->second.missed > 0) {
    return;
  }
  Group& g = found->second;
  absl::Time due;
  for (;;) {
    if (GroupCountLocked(group, /*live_only=*/true) >=
            WantedLiveLocked(group) ||
        GroupCountLocked(group, /*live_only=*/false) >= cap) {
      return;
    }
    due = g.next_open;
    if (g.refill_at > due && OnlySparesMissingLocked(group)) {
      due = g.refill_at;
    }
    if (clock_->Now() < due) break;
    OpenLocked(group, later);  // then more, for missing standbys
  }
  const absl::Time now = clock_->Now();
  if (g.probe_timer != 0) {
    if (g.probe_due <= due) return;  // already waiting, long enough
    clock_->Cancel(g.probe_timer);   // the spares are needed sooner now
  }
  auto cell = std::make_shared<Clock::TimerId>(0);
  std::weak_ptr<PoolCore> weak = weak_from_this();
  g.probe_timer = clock_->RunAfter(due - now, [weak, group, cell] {
    if (auto self = weak.lock()) self->OnProbeTimer(group, cell);
  });
  g.probe_due = due;
  *cell = g.probe_timer;
}

void PoolCore::DeferRefillLocked(std::uint64_t group) {
  auto found = groups_.find(group);
  if (found == groups_.end()) return;
  found->second.refill_at = clock_->Now() + kStandbyRefillDelay;
}

bool PoolCore::OnlySparesMissingLocked(std::uint64_t group) const {
  std::size_t usable = 0;
  for (const auto& entry : conns_) {
    if (entry.second.group == group && UsableLocked(entry.second)) ++usable;
  }
  return usable >= NeededForPicks(GroupPicksLocked(group));
}

void PoolCore::OnProbeTimer(std::uint64_t group,
                            const std::shared_ptr<Clock::TimerId>& cell) {
  Deferred later;  // runs after the lock is released
  {
    MutexLock lock(&mu_);
    auto found = groups_.find(group);
    if (found == groups_.end()) return;
    Group& g = found->second;
    if (*cell == 0 || g.probe_timer != *cell) return;
    g.probe_timer = 0;
    ReplaceIfNeededLocked(group, later);  // re-arms if woken early
  }
}

void PoolCore::Start() {
  std::vector<Endpoint> first;
  for (const std::string& a : options_.addresses) first.push_back({a, ""});
  if (first.empty() && !options_.target.empty()) {
    first.push_back({options_.target, ""});
  }
  if (!first.empty()) SetEndpoints(first, Removal::kAtOnce);
}

bool PoolCore::AvoidedLocked(const Conn& c) const {
  const Group& g = groups_.at(c.group);
  return !g.member || g.missed > 0;
}

void PoolCore::RefreshLocked(Deferred& later) {
  if (refresh_ && !shut_down_) later.Add(refresh_);
}

void PoolCore::SetEndpoints(const std::vector<Endpoint>& endpoints,
                            Removal removal) {
  Deferred later;  // runs after the lock is released
  {
    MutexLock lock(&mu_);
    if (shut_down_) return;
    // By key; a target that is no endpoint address (the `target` option)
    // is its own key.
    std::map<std::string, const Endpoint*> wanted;
    for (const Endpoint& e : endpoints) {
      absl::StatusOr<std::string> key = EndpointKey(e.address);
      wanted.emplace(key.ok() ? *std::move(key) : e.address, &e);
    }
    std::vector<std::uint64_t> leave;
    for (auto& [gid, g] : groups_) {
      auto w = wanted.find(g.key);
      if (w != wanted.end()) {
        g.missed = 0;
        if (!g.member) {
          g.endpoint = *w->second;
          g.member = true;  // back (its draining connections stay so)
          NotifyLocked(later, [a = g.endpoint.address](ConnectionObserver& o) {
            o.OnEndpointAdded(a);
          });
        }
        wanted.erase(w);  // known: not added again
        continue;
      }
      if (!g.member) continue;
      bool ready = false;
      for (const auto& entry : conns_) {
        const Conn& c = entry.second;
        if (c.group == gid && !c.draining && c.state == LinkState::kReady) {
          ready = true;
        }
      }
      if (removal == Removal::kAtOnce || g.missed > 0 || !ready) {
        leave.push_back(gid);
      } else {
        g.missed = 1;
        NotifyLocked(later, [a = g.endpoint.address](ConnectionObserver& o) {
          o.OnEndpointMissing(a);
        });
      }
    }
    for (std::uint64_t gid : leave) {
      RemoveGroupLocked(
          gid,
          removal == Removal::kAtOnce
              ? "endpoint left the endpoint set"
              : "endpoint missing from two answers in a row (or from one, "
                "with no READY connection)",
          later);
    }
    // Forget endpoints that left, have no connection left, and whose probe
    // schedule has run out (`probe_max_backoff` past its next open): one
    // that comes back later starts afresh. Until then one that comes back
    // keeps its schedule, so a flapping set opens no faster than the probe
    // backoff.
    const absl::Time now = clock_->Now();
    for (auto it = groups_.begin(); it != groups_.end();) {
      const Group& g = it->second;
      if (!g.member && now >= g.next_open + options_.probe_max_backoff &&
          GroupCountLocked(it->first, /*live_only=*/false) == 0) {
        it = groups_.erase(it);
      } else {
        ++it;
      }
    }
    // New ones, in the order given.
    for (const Endpoint& e : endpoints) {
      absl::StatusOr<std::string> key = EndpointKey(e.address);
      const std::string k = key.ok() ? *std::move(key) : e.address;
      if (wanted.erase(k) == 0) continue;  // known, or a duplicate
      const std::uint64_t gid = next_group_++;
      Group& g = groups_[gid];
      g.endpoint = e;
      g.key = k;
      g.per_call = options_.balancing == EndpointBalancing::kPerCall;
      NotifyLocked(later, [a = e.address](ConnectionObserver& o) {
        o.OnEndpointAdded(a);
      });
    }
    EnsureGroupsLocked(later);
    SweepAvailabilityLocked(later);
  }
}

void PoolCore::RemoveGroupLocked(std::uint64_t gid, const std::string& why,
                                 Deferred& later) {
  Group& g = groups_.at(gid);
  g.member = false;
  g.missed = 0;
  if (g.probe_timer != 0) {
    clock_->Cancel(g.probe_timer);
    g.probe_timer = 0;
  }
  NotifyLocked(later, [a = g.endpoint.address, why](ConnectionObserver& o) {
    o.OnEndpointRemoved(a, why);
  });
  std::vector<std::uint64_t> ids;
  for (const auto& entry : conns_) {
    if (entry.second.group == gid) ids.push_back(entry.first);
  }
  for (std::uint64_t id : ids) {
    auto it = conns_.find(id);
    if (it == conns_.end()) continue;
    if (it->second.draining) continue;
    // Drains like a GOAWAY: listeners move (make before break), and a
    // connection without picks is retired at once.
    MarkDrainingLocked(it->second, why, later);
  }
}

void PoolCore::OnEndpointsError(const absl::Status& status) {
  Deferred later;  // runs after the lock is released
  {
    MutexLock lock(&mu_);
    if (shut_down_) return;
    ++endpoint_errors_;
    NotifyLocked(later, [status](ConnectionObserver& o) {
      o.OnEndpointsError(status);
    });
  }
}

std::vector<EndpointStats> PoolCore::Endpoints() {
  MutexLock lock(&mu_);
  std::vector<EndpointStats> out;
  for (const auto& [gid, g] : groups_) {
    const std::size_t connections = GroupCountLocked(gid, false);
    if (!g.member && connections == 0) continue;  // gone
    EndpointStats e;
    e.address = g.endpoint.address;
    e.streams = GroupPicksLocked(gid);
    e.connections = connections;
    e.missing = g.member && g.missed > 0;
    e.leaving = !g.member;
    e.per_call = g.per_call;
    out.push_back(std::move(e));
  }
  return out;
}

absl::StatusOr<ConnectionPick> PoolCore::Pick(
    std::weak_ptr<DrainListener> listener) {
  Deferred later;  // runs after the lock is released
  absl::StatusOr<ConnectionPick> result;
  {
    MutexLock lock(&mu_);
    auto retry = retries_.find(listener);
    if (retry != retries_.end()) retry->second.pending = false;  // no wait
    if (shut_down_) {
      result = absl::UnavailableError("connection pool shut down");
    } else {
      ResumeUnreadyLocked(later);
      EnsureGroupsLocked(later);
      Conn* best = nullptr;
      int best_rank = 0;
      // Where this stream's last attempt just ended (only the latest end:
      // a stream shed everywhere must not make the pool open more and more).
      Conn* left = nullptr;
      if (options_.reopen_elsewhere_after_end) {
        absl::Time latest = absl::InfinitePast();
        for (auto& entry : conns_) {
          Conn& c = entry.second;
          const absl::Time at = EndedThereAtLocked(c, listener);
          if (at > latest) {
            latest = at;
            left = &c;
          }
        }
      }
      // The spread rule: tier (endpoints that are missing from the last
      // answer, under suspicion, or that this stream just left come last),
      // rank, then the endpoint's picks, then the connection's own; ties to
      // the oldest (conns_ is in id order).
      const absl::Time now = clock_->Now();
      // Picks on draining connections are leaving: they do not count.
      std::map<std::uint64_t, std::size_t> endpoint_picks;
      for (const auto& entry : conns_) {
        if (entry.second.draining) continue;
        endpoint_picks[entry.second.group] += entry.second.picks;
      }
      int best_tier = 0;
      bool best_full = false;
      std::size_t best_endpoint_picks = 0;
      for (auto& entry : conns_) {
        Conn& c = entry.second;
        const int rank = PickRank(c.state);
        if (!c.Live() || rank < 0 || &c == left) continue;
        // Tier 1: avoided, its endpoint under suspicion, or the endpoint
        // this stream just left. (Inline, not a lambda: the thread-safety
        // analysis does not see mu_ held inside one.)
        const int t = AvoidedLocked(c) ||
                              groups_.at(c.group).suspected_until > now ||
                              (left != nullptr && c.group == left->group)
                          ? 1
                          : 0;
        // A connection at `max_streams_per_connection` comes after one
        // with room, even one still connecting (gRPC holds the call until
        // it is connected; on the full one it would wait for a stream to
        // end).
        const bool full = options_.max_streams_per_connection > 0 &&
                          c.picks >= static_cast<std::size_t>(
                                         options_.max_streams_per_connection);
        const std::size_t ep = endpoint_picks[c.group];
        if (best == nullptr || t < best_tier ||
            (t == best_tier &&
             (full < best_full ||
              (full == best_full &&
               (rank < best_rank ||
                (rank == best_rank &&
                 (ep < best_endpoint_picks ||
                  (ep == best_endpoint_picks &&
                   c.picks < best->picks)))))))) {
          best = &c;
          best_tier = t;
          best_full = full;
          best_rank = rank;
          best_endpoint_picks = ep;
        }
      }
      if (left != nullptr && left->Live() && !AvoidedLocked(*left) &&
          (best == nullptr || best_rank >= 2 ||
           (best_tier == 1 && best->group != left->group))) {
        // Nothing usable but the connection this stream just left (or an
        // endpoint put aside): open another if the group may (a new
        // connection may reach another backend; not behind a proxy that
        // balances each call, where it reaches the same ones), else go
        // back there.
        const std::uint64_t group = left->group;
        if (!groups_.at(group).per_call &&
            GroupCountLocked(group, /*live_only=*/false) <
                static_cast<std::size_t>(options_.max_connections) &&
            now >= groups_.at(group).next_open) {
          best = OpenLocked(group, later);
          best->escape_at = now;
        } else {
          best = left;
        }
      }
      if (best == nullptr) {
        // Last resort: a suspect connection that still looks READY. Only
        // evidence put it aside, and a pick there beats no pick at all.
        for (auto& entry : conns_) {
          Conn& c = entry.second;
          if (!c.suspect || c.draining || c.state != LinkState::kReady) {
            continue;
          }
          if (best == nullptr || c.picks < best->picks) best = &c;
        }
      }
      if (best == nullptr && groups_.empty()) {
        result = absl::UnavailableError(
            "no usable connection: the pool has no endpoint yet (its "
            "endpoint source has not answered)");
      } else if (best == nullptr) {
        absl::Time due = absl::InfiniteFuture();
        std::string address;
        for (const auto& [gid, g] : groups_) {
          if (g.probe_timer != 0 && g.probe_due < due) {
            due = g.probe_due;
            address = g.endpoint.address;
          }
        }
        if (due != absl::InfiniteFuture()) {
          result = absl::UnavailableError(absl::StrCat(
              "no usable connection: the next connection to ", address,
              " opens in ", absl::FormatDuration(due - now),
              " (probe backoff: its last connections never became usable)"));
        } else {
          result = absl::UnavailableError(absl::StrCat(
              "no usable connection: all are draining or suspect and the "
              "pool is at max_connections (",
              options_.max_connections, ")"));
        }
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
        // The group has picks now: open its standby connections and those
        // `max_streams_per_connection` asks for (if any are configured and
        // missing). After the pick, so that this pick never waits for them.
        if (GrowsWithPicks()) {
          ReplaceIfNeededLocked(best->group, later);
        }
      }
    }
  }
  return result;
}

void PoolCore::Release(std::uint64_t connection_id,
                       const std::weak_ptr<DrainListener>& listener) {
  t_last_release.core = this;
  t_last_release.connection_id = connection_id;
  t_last_release.listener = listener;
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
      const std::uint64_t group = c.group;
      MaybeRetireOrArmLocked(c, later);  // may erase c
      if (GroupPicksLocked(group) == 0 ||
          options_.max_streams_per_connection > 0) {
        // Fewer streams in the group: the spares it no longer needs become
        // ordinary idle connections again (their idle timer decides).
        for (auto& entry : conns_) {
          Conn& other = entry.second;
          if (other.group == group && other.picks == 0 && other.Live() &&
              other.idle_timer == 0) {
            MaybeRetireOrArmLocked(other, later);
          }
        }
      }
    }
  }
}

void PoolCore::ReportDrainEnd(std::uint64_t connection_id,
                              const absl::Status& status) {
  EndReport report;
  report.status = status;
  report.before_first_message = true;  // the old, strong meaning
  ReportUnannouncedEnd(connection_id, report);
}

void PoolCore::ReportUnannouncedEnd(std::uint64_t connection_id,
                                    const EndReport& report) {
  // Whose end this is, if the stream released its pick just before.
  std::weak_ptr<DrainListener> stream;
  bool known = false;
  if (t_last_release.core == this &&
      t_last_release.connection_id == connection_id) {
    stream = std::move(t_last_release.listener);
    known = true;
  }
  t_last_release = LastRelease();
  Deferred later;  // runs after the lock is released
  {
    MutexLock lock(&mu_);
    auto it = conns_.find(connection_id);
    if (it == conns_.end()) return;
    Conn& c = it->second;
    // Only a connection that still looks READY can be suspect; one we have
    // seen leave READY is already draining, one never READY simply failed
    // to connect.
    if (c.state != LinkState::kReady || c.draining) return;
    if (!report.stalled) {
      // Behind a proxy that balances each call, one call's end says nothing
      // about the connection (a stall still may: the connection can hang).
      if (groups_.at(c.group).per_call ||
          (report.before_first_message && LearnPerCallLocked(c, later))) {
        if (report.before_first_message && known) {
          // Its wait for a usable connection ends at once (see
          // NotifyWhenAvailable), unless it had that often within the
          // window already: then the service behind the proxy may be down,
          // and the stream's backoff paces it.
          Retry& r = retries_[stream];
          r.group = c.group;
          const absl::Time now = clock_->Now();
          if (now - r.window_start >= options_.suspect_end_window) {
            r.window_start = now;
            r.fast = 0;
          }
          r.pending = r.fast < kFastRetriesPerWindow;
          PruneLocked(retries_, prune_retries_at_);
        }
        return;
      }
    }
    if (!WeighLocked(c, report, stream, known)) return;
    if (c.suspect) {
      ArmProbationLocked(c);  // new evidence: probation starts over
      return;
    }
    MarkSuspectLocked(c, report.status, later);
    SweepAvailabilityLocked(later);
  }
}

absl::Time PoolCore::EndedThereAtLocked(
    const Conn& c, const std::weak_ptr<DrainListener>& stream) const {
  absl::Time at = absl::InfinitePast();
  if (c.ends.empty() || SameOwner(stream, std::weak_ptr<DrainListener>())) {
    return at;  // nothing recorded, or a pick with no owner
  }
  const absl::Time now = clock_->Now();
  for (const EndMark& m : c.ends) {
    if (m.known && now - m.at < options_.suspect_end_window &&
        SameOwner(m.stream, stream)) {
      at = std::max(at, m.at);
    }
  }
  return at;
}

bool PoolCore::WeighLocked(Conn& c, const EndReport& report,
                           const std::weak_ptr<DrainListener>& stream,
                           bool known) {
  if (report.before_first_message || report.stalled) return true;
  // Weak evidence: count the different streams that ended within the
  // window, this one included.
  const absl::Time now = clock_->Now();
  while (!c.ends.empty() &&
         now - c.ends.front().at >= options_.suspect_end_window) {
    c.ends.pop_front();
  }
  if (known) {
    for (auto it = c.ends.begin(); it != c.ends.end(); ++it) {
      if (it->known && SameOwner(it->stream, stream)) {
        c.ends.erase(it);  // keep only its latest end
        break;
      }
    }
  }
  c.ends.push_back(EndMark{now, stream, known});
  const auto needed = static_cast<std::size_t>(options_.suspect_after_ends);
  if (c.ends.size() > needed) c.ends.pop_front();  // all distinct: enough
  return c.ends.size() >= needed;
}

void PoolCore::MarkSuspectLocked(Conn& c, const absl::Status& status,
                                 Deferred& later) {
  c.suspect = true;
  c.ends.clear();
  NoteUsabilityLocked(c);
  const std::uint64_t id = c.id;
  NotifyLocked(later, [id, status](ConnectionObserver& o) {
    o.OnConnectionSuspect(id, status);
  });
  ArmProbationLocked(c);
  // The evidence is about the endpoint (a server going away), not only this
  // connection: new picks put the endpoint's other connections, and any
  // opened to it, after other endpoints' for the probation.
  groups_.at(c.group).suspected_until =
      options_.suspect_probation == absl::InfiniteDuration()
          ? absl::InfiniteFuture()
          : clock_->Now() + options_.suspect_probation;
  RefreshLocked(later);
  const std::uint64_t group = c.group;
  MaybeRetireOrArmLocked(c, later);  // may erase c
  DeferRefillLocked(group);
  ReplaceIfNeededLocked(group, later);
}

bool PoolCore::LearnPerCallLocked(Conn& c, Deferred& later) {
  if (options_.balancing != EndpointBalancing::kDetect || c.escape_refused ||
      c.escape_at == absl::InfinitePast()) {
    return false;
  }
  const absl::Time now = clock_->Now();
  // Within one probation of the escape (InfiniteDuration: always).
  if (now - c.escape_at >= options_.suspect_probation) return false;
  c.escape_refused = true;
  Group& g = groups_.at(c.group);
  if (now - g.escapes_refused_since >= options_.suspect_probation) {
    g.escapes_refused = 0;  // an earlier episode
  }
  if (g.escapes_refused == 0) g.escapes_refused_since = now;
  ++g.escapes_refused;
  // Streams still running on an older connection of the endpoint outlived
  // the evidence this connection escaped from: a server going away ends
  // every stream of its connection, a proxy only those it sent there.
  std::size_t outlived = 0;
  for (const auto& entry : conns_) {
    const Conn& old = entry.second;
    if (old.group == c.group && old.id < c.id && !old.draining &&
        old.state == LinkState::kReady) {
      outlived += old.picks;
    }
  }
  if (outlived == 0 && g.escapes_refused < kEscapesRefusedForPerCall) {
    return false;
  }
  // The endpoint sends each call wherever it balances it.
  g.per_call = true;
  g.suspected_until = absl::InfinitePast();
  const std::string why =
      outlived != 0
          ? absl::StrCat("a call was refused on a connection opened to get "
                         "away from refusals or ends, while ",
                         outlived,
                         " streams ran on through the endpoint's older "
                         "connections")
          : absl::StrCat("calls were refused on ", g.escapes_refused,
                         " connections opened to get away from refusals or "
                         "ends");
  NotifyLocked(later, [a = g.endpoint.address, why](ConnectionObserver& o) {
    o.OnEndpointBalancesCalls(a, why);
  });
  std::vector<std::uint64_t> suspects;
  for (const auto& entry : conns_) {
    const Conn& other = entry.second;
    if (other.group == c.group && other.suspect && !other.draining) {
      suspects.push_back(other.id);
    }
  }
  for (std::uint64_t id : suspects) RestoreLocked(conns_.at(id), later);
  SweepAvailabilityLocked(later);
  return true;
}

void PoolCore::ArmProbationLocked(Conn& c) {
  if (c.probation_timer != 0) clock_->Cancel(c.probation_timer);
  c.probation_timer = 0;
  if (options_.suspect_probation == absl::InfiniteDuration()) return;
  auto cell = std::make_shared<Clock::TimerId>(0);
  std::weak_ptr<PoolCore> weak = weak_from_this();
  const std::uint64_t id = c.id;
  c.probation_timer =
      clock_->RunAfter(options_.suspect_probation, [weak, id, cell] {
        if (auto self = weak.lock()) self->OnProbationTimer(id, cell);
      });
  *cell = c.probation_timer;
}

void PoolCore::OnProbationTimer(std::uint64_t id,
                                const std::shared_ptr<Clock::TimerId>& cell) {
  Deferred later;  // runs after the lock is released
  {
    MutexLock lock(&mu_);
    auto it = conns_.find(id);
    if (it == conns_.end()) return;
    Conn& c = it->second;
    if (*cell == 0 || c.probation_timer != *cell) return;
    c.probation_timer = 0;
    if (!c.suspect || c.draining || c.state != LinkState::kReady) return;
    groups_.at(c.group).suspected_until = absl::InfinitePast();
    RestoreLocked(c, later);
    SweepAvailabilityLocked(later);
  }
}

void PoolCore::RestoreLocked(Conn& c, Deferred& later) {
  if (c.probation_timer != 0) clock_->Cancel(c.probation_timer);
  c.probation_timer = 0;
  c.suspect = false;
  c.ends.clear();
  ++restored_;
  NoteUsabilityLocked(c);
  const std::uint64_t id = c.id;
  NotifyLocked(later, [id](ConnectionObserver& o) {
    o.OnConnectionRestored(id);
  });
  MaybeRetireOrArmLocked(c, later);  // arms the idle timer if unpicked
}

void PoolCore::NotifyWhenAvailable(std::weak_ptr<DrainListener> listener) {
  std::shared_ptr<DrainListener> now;
  Deferred later;  // run after the lock is released
  {
    MutexLock lock(&mu_);
    if (shut_down_) return;
    auto refused = retries_.find(listener);
    if (refused != retries_.end() && refused->second.pending) {
      Retry& r = refused->second;
      r.pending = false;
      // Refused behind a proxy that balances each call: while its
      // connections are as usable as before, the next call may reach
      // another server. The stream retries after its `recovery_jitter`.
      for (const auto& entry : conns_) {
        if (entry.second.group == r.group && UsableLocked(entry.second)) {
          ++r.fast;
          now = listener.lock();
          break;
        }
      }
      // Told now, once: a wait it registered before (still in waiters_)
      // ends with this notice too, not with a second one at the next sweep.
      if (now != nullptr) waiters_.erase(listener);
    }
    if (now == nullptr) {
      ResumeUnreadyLocked(later);
      waiters_.insert(std::move(listener));
      PruneLocked(waiters_, prune_waiters_at_);
    }
  }
  later.Run();
  if (now != nullptr) now->OnConnectionAvailable();
}

template <class Set>
void PoolCore::PruneLocked(Set& set, std::size_t& at) {
  if (set.size() < at) return;
  for (auto it = set.begin(); it != set.end();) {
    it = ListenerOf(*it).expired() ? set.erase(it) : std::next(it);
  }
  at = std::max<std::size_t>(64, 2 * set.size());
}

bool PoolCore::UsableLocked(const Conn& c) const {
  return c.state == LinkState::kReady && c.Live() &&
         (!options_.health_check || c.serving);
}

void PoolCore::NoteUsabilityLocked(Conn& c, bool leaving) {
  const bool usable = !leaving && UsableLocked(c);
  if (usable) {
    if (c.usable_since == absl::InfiniteFuture()) {
      c.usable_since = clock_->Now();
    }
    return;
  }
  if (c.usable_since == absl::InfiniteFuture()) return;
  if (clock_->Now() - c.usable_since >= options_.probe_max_backoff) {
    groups_.at(c.group).opens_since_stable = 0;  // it was a healthy one
  }
  c.usable_since = absl::InfiniteFuture();
}

void PoolCore::SweepAvailabilityLocked(Deferred& later) {
  std::set<std::uint64_t> now_available;
  for (const auto& entry : conns_) {
    if (UsableLocked(entry.second)) now_available.insert(entry.second.group);
  }
  bool back = false;
  for (auto& [gid, g] : groups_) {
    const bool available = now_available.count(gid) != 0;
    if (available && !g.available) back = true;
    g.available = available;
  }
  if (!back || shut_down_) return;
  Waiters waiters;
  waiters.swap(waiters_);
  prune_waiters_at_ = 64;
  if (options_.breaker != nullptr) {
    auto breaker = options_.breaker;
    later.Add([breaker] { breaker->OnDependencyAvailable(); });
  }
  if (!waiters.empty()) {
    later.Add([waiters = std::move(waiters)] {
      for (const auto& weak : waiters) {
        if (auto l = weak.lock()) l->OnConnectionAvailable();
      }
    });
  }
}

void PoolCore::ResumeUnreadyLocked(Deferred& later) {
  std::vector<std::uint64_t> unready;
  for (const auto& [id, c] : conns_) {
    if (c.unready && !c.draining) unready.push_back(id);
  }
  if (unready.empty()) return;
  RefreshLocked(later);
  for (std::uint64_t id : unready) {
    auto it = conns_.find(id);  // draining one may retire another
    if (it == conns_.end()) continue;
    it->second.unready = false;
    MarkDrainingLocked(it->second, "health check reports NOT_SERVING", later);
  }
}

void PoolCore::MarkDrainingLocked(Conn& c, std::string why, Deferred& later) {
  c.draining = true;
  NoteUsabilityLocked(c);
  const std::uint64_t id = c.id;
  if (c.probation_timer != 0) {
    clock_->Cancel(c.probation_timer);
    c.probation_timer = 0;
  }
  NotifyLocked(later, [id, why](ConnectionObserver& o) {
    o.OnConnectionDraining(id, why);
  });
  // Tell each distinct listener once; many at a time (see TellDraining).
  std::vector<std::weak_ptr<DrainListener>> tell;
  tell.reserve(c.holders.size());
  for (auto& [listener, h] : c.holders) {
    if (h.told) continue;
    h.told = true;
    tell.push_back(listener);
  }
  if (!tell.empty()) {
    later.Add([tell = std::move(tell), id, why]() mutable {
      TellDraining(std::move(tell), id, why);
    });
  }
  // Make before break: the replacement exists before any listener runs, so a
  // burst of listeners that re-pick all land on it.
  const std::uint64_t group = c.group;
  MaybeRetireOrArmLocked(c, later);  // may erase c
  DeferRefillLocked(group);
  ReplaceIfNeededLocked(group, later);
  // The flap rule: a missing endpoint whose connection drains is gone.
  auto found = groups_.find(group);
  if (found != groups_.end() && found->second.member &&
      found->second.missed > 0) {
    RemoveGroupLocked(group,
                      "endpoint missing from the last answer, and its "
                      "connection is draining",
                      later);
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
    // A spare its group still needs stays (its timer is armed again when
    // the group's last pick is released).
    if (c.picks == 0 && !KeptAsStandbyLocked(c)) RetireLocked(id, later);
    SweepAvailabilityLocked(later);
  }
}

void PoolCore::RetireLocked(std::uint64_t id, Deferred& later) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = it->second;
  NoteUsabilityLocked(c, /*leaving=*/true);
  if (c.idle_timer != 0) clock_->Cancel(c.idle_timer);
  if (c.probation_timer != 0) clock_->Cancel(c.probation_timer);
  later.Add([link = std::move(c.link)] { link->Close(); });
  conns_.erase(it);
  NotifyLocked(later, [id](ConnectionObserver& o) {
    o.OnConnectionRetired(id);
  });
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
        NotifyLocked(later, [connection_id](ConnectionObserver& o) {
          o.OnConnectionReady(connection_id);
        });
      }
      NoteUsabilityLocked(c);
    } else if (!c.draining && (c.was_ready || state == LinkState::kShutdown)) {
      RefreshLocked(later);  // a GOAWAY often means the endpoint moves
      MarkDrainingLocked(
          c,
          absl::StrCat("connection left ", LinkStateName(old), " for ",
                       LinkStateName(state),
                       c.was_ready ? " (GOAWAY or failure)" : ""),
          later);
    } else {
      if (state == LinkState::kTransientFailure && old != state) {
        RefreshLocked(later);  // failed to connect: the address may be gone
      }
      NoteUsabilityLocked(c);
    }
    SweepAvailabilityLocked(later);
  }
}

void PoolCore::OnLinkHealth(std::uint64_t connection_id, bool serving) {
  Deferred later;  // runs after the lock is released
  {
    MutexLock lock(&mu_);
    auto it = conns_.find(connection_id);
    if (it == conns_.end()) return;
    Conn& c = it->second;
    c.serving = serving;
    if (serving) {
      c.unready = false;
      NoteUsabilityLocked(c);
    } else if (!c.draining && c.picks == 0 && waiters_.empty()) {
      // Nobody needs a connection: replacing this one would open
      // connection after connection to a server that says NOT_SERVING,
      // for nothing. Its health watch says when it serves again.
      c.unready = true;
      NoteUsabilityLocked(c);
    } else if (!c.draining) {
      RefreshLocked(later);
      MarkDrainingLocked(c, "health check reports NOT_SERVING", later);
    }
    SweepAvailabilityLocked(later);
  }
}

ConnectionPoolStats PoolCore::Stats() {
  MutexLock lock(&mu_);
  ConnectionPoolStats s;
  s.total_opened = total_opened_;
  s.restored = restored_;
  s.endpoint_errors = endpoint_errors_;
  for (const auto& entry : groups_) {
    if (entry.second.member) ++s.endpoints;
  }
  for (const auto& entry : conns_) {
    const Conn& c = entry.second;
    ++s.open;
    s.picks += c.picks;
    if (c.draining) {
      ++s.draining;
    } else if (c.suspect) {
      ++s.suspect;
    } else if (c.state == LinkState::kReady && !c.unready) {
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

absl::optional<double> PoolCore::SpreadShare(std::uint64_t connection_id) {
  MutexLock lock(&mu_);
  auto it = conns_.find(connection_id);
  if (it == conns_.end()) return absl::nullopt;
  Conn& c = it->second;
  if (!c.spread) {
    c.spread.emplace(std::uniform_real_distribution<double>(0.0, 1.0)(rng_));
  }
  return c.spread->Next();
}

absl::optional<double> PoolCore::ReopenShare(std::uint64_t connection_id) {
  MutexLock lock(&mu_);
  auto it = conns_.find(connection_id);
  if (it == conns_.end()) return absl::nullopt;
  Conn& c = it->second;
  // Ends closer together than `suspect_end_window` are one herd (a server
  // cutting its streams, a lost connection), sized at its first ask: every
  // stream asks before it releases the connection, so the first sees them
  // all, and the later ones' releases do not shrink it.
  const absl::Time now = clock_->Now();
  if (now - c.last_reopen_ask >= options_.suspect_end_window) {
    c.herd = std::max<std::size_t>(c.picks, 1);
    c.reopens_asked = 0;
  }
  c.last_reopen_ask = now;
  const double herd = std::min(static_cast<double>(c.herd), kReopenHerd);
  // A stream alone reopens at once. Of a herd, none starts at the window's
  // start (the order's first point): the streams that end first reopen
  // latest, so that the others' ends reach the pool (and mark the
  // connection suspect) before a reopen could pick it again.
  const std::uint32_t k = c.reopens_asked++ + (c.herd > 1 ? 1 : 0);
  return SpreadOrder::Point(0.0, k) * herd / kReopenHerd;
}

void PoolCore::Shutdown() {
  Deferred later;  // runs after the lock is released
  {
    MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    for (auto& [gid, g] : groups_) {
      if (g.probe_timer != 0) clock_->Cancel(g.probe_timer);
      g.probe_timer = 0;
    }
    waiters_.clear();
    retries_.clear();
    std::vector<std::uint64_t> ids;
    for (const auto& entry : conns_) ids.push_back(entry.first);
    for (std::uint64_t id : ids) RetireLocked(id, later);
  }
}

}  // namespace internal
}  // namespace tether
