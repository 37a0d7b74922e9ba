// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// The decision logic of `tether::ConnectionPool`, with gRPC behind a seam.
//
// `PoolCore` decides which connection a pick gets, when to open one, when a
// connection is draining or suspect, when to retire it, and whom to tell. It
// never touches gRPC: it opens connections through a `ConnectionDriver` and
// learns their state from `PoolCore::OnLinkState` / `OnLinkHealth`. The
// production driver (grpc_connection_driver.h) wraps one `grpc::Channel` per
// connection; unit tests pass a fake driver and call the `On*` methods
// themselves.
#ifndef TETHER_SRC_CONNECTIONS_POOL_CORE_H_
#define TETHER_SRC_CONNECTIONS_POOL_CORE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "connections/serial_calls.h"
#include "policies/spread_order.h"
#include "tether/clock.h"
#include "tether/connection_pool.h"
#include "tether/endpoints.h"
#include "tether/internal/deferred.h"
#include "tether/internal/mutex.h"
#include "tether/internal/visibility.h"
#include "tether/transport.h"

TETHER_BEGIN_HIDDEN
namespace tether {
namespace internal {

// A connection's transport state, as gRPC's connectivity states.
enum class LinkState {
  kIdle,
  kConnecting,
  kReady,
  kTransientFailure,
  kShutdown
};

absl::string_view LinkStateName(LinkState s);

// One open connection, as the driver hands it to the core.
//
// Thread safety: `Close` may be called from any thread, once; it must not call
// back into the core synchronously.
class Link {
 public:
  virtual ~Link() = default;
  // The channel picks run on; may be null for fakes.
  virtual std::shared_ptr<grpc::Channel> channel() = 0;
  // Stops watching the connection and lets its channel go. No `On*` report
  // for this connection is acted on after this (the core ignores late ones).
  virtual void Close() = 0;
};

// Opens connections. The core calls `Open` with its own lock held, so `Open`
// must not call back into the core synchronously; it reports later state
// changes through `PoolCore::OnLinkState` from another thread (or, in tests,
// from the test body).
class ConnectionDriver {
 public:
  virtual ~ConnectionDriver() = default;
  // Opens connection `id` to `endpoint` (its address, with its authority
  // when set); its initial state is `kIdle` unless a report says otherwise.
  // Never returns null.
  virtual std::shared_ptr<Link> Open(std::uint64_t id,
                                     const Endpoint& endpoint) = 0;
};

// Tells `listeners` that connection `connection_id` is draining, each once,
// and returns when all were told. Each listener starts its stream's next
// attempt inline, so with many of them the calls are spread over up to
// `DrainFanOut(n)` threads (the caller's included, helpers started for this
// call only): the streams leaving a connection start their new calls in
// parallel, with bounded concurrency (no thundering herd: at most that many
// starts at a time; spreading them further in time is each stream's
// `migration_jitter`). Called with no lock held.
void TellDraining(std::vector<std::weak_ptr<ConnectionSource::DrainListener>>
                      listeners,
                  std::uint64_t connection_id, const std::string& why);
// True on a helper thread of `TellDraining`. The caller waits for its
// helpers, so a listener that drops the last reference to the pool there
// must not wait for the pool's watcher thread (the usual caller): the
// driver then detaches it instead of joining, as on the watcher itself.
bool OnDrainHelperThread();
// Below this many listeners one thread tells them all (starting threads
// would cost more than it saves).
constexpr std::size_t kDrainFanOutMinListeners = 8;
// At most this many threads tell listeners at once.
constexpr std::size_t kDrainFanOutMaxThreads = 8;
// Threads used for `listeners` listeners: 1 below
// `kDrainFanOutMinListeners`, else one per `kDrainFanOutMinListeners`
// listeners, in [2, kDrainFanOutMaxThreads].
std::size_t DrainFanOut(std::size_t listeners);

// The pool's logic. See `tether::ConnectionPool` for the contract; this class
// implements it for any driver.
//
// Thread safety: every method may be called concurrently from any thread.
// Listeners, the observer and `Link::Close` are called with no core lock
// held (collected in a `Deferred` under the lock, run after it), so they may
// call back into the core. The driver's `Open` and the clock's `RunAfter` /
// `Cancel` are called under the lock: their contracts forbid calling back
// synchronously.
//
// Ownership: the core holds its links, the clock and the observer; timers
// hold it weakly. Callers keep it alive (by `std::shared_ptr`) for the
// length of each call, so a callback may drop the owner's reference.
class PoolCore final : public ConnectionSource,
                       public std::enable_shared_from_this<PoolCore> {
 public:
  // `options` must be valid. `driver` must outlive the core's `Shutdown()`.
  // `seed` seeds the probe jitter (0: from entropy; a simulation passes its
  // own so that a run repeats).
  static std::shared_ptr<PoolCore> Create(const ConnectionPoolOptions& options,
                                          ConnectionDriver* driver,
                                          std::uint64_t seed = 0);

  // Takes the options' first endpoint set (the target as one endpoint, or
  // each address) and opens a connection to each. Separate from `Create` so
  // that the driver can be wired to the core first. A pool fed by an
  // `EndpointSource` starts with no endpoint: picks fail until its first
  // answer.
  void Start();

  // How endpoints missing from a new set leave the pool's set.
  enum class Removal {
    // At once (`ConnectionPool::SetEndpoints`: the caller's discovery is
    // authoritative).
    kAtOnce,
    // The flap rule (answers of an `EndpointSource`): an endpoint missing
    // from one answer is only "missing": new picks avoid it and no
    // connection is opened to it, but its streams stay. It leaves when the
    // next answer lacks it too, or at once when it has no usable connection
    // (one of its connections drains, or none is READY).
    kConfirmed,
  };
  // Makes `endpoints` (valid, see `ValidateEndpoints`) the endpoint set.
  // New endpoints get a connection at once; an endpoint that leaves is
  // draining: each of its connections is marked draining (its streams move,
  // make before break, as on a GOAWAY) and no connection is opened to it
  // again.
  void SetEndpoints(const std::vector<Endpoint>& endpoints, Removal removal);
  // An endpoint source failed: the set stays; the observer hears it.
  void OnEndpointsError(const absl::Status& status);
  // Called with no lock held whenever the set may be stale (a connection
  // drained, failed to connect, or was reported for an unannounced end).
  // Set before `Start`.
  void SetRefreshHook(std::function<void()> refresh) {
    refresh_ = std::move(refresh);
  }
  // Per endpoint in the set (and leaving ones still holding connections).
  std::vector<EndpointStats> Endpoints();

  absl::StatusOr<ConnectionPick> Pick(
      std::weak_ptr<DrainListener> listener) override;
  void Release(std::uint64_t connection_id,
               const std::weak_ptr<DrainListener>& listener) override;
  void ReportDrainEnd(std::uint64_t connection_id,
                      const absl::Status& status) override;
  void ReportUnannouncedEnd(std::uint64_t connection_id,
                            const EndReport& report) override;
  void NotifyWhenAvailable(std::weak_ptr<DrainListener> listener) override;

  // The driver's reports. Unknown or retired ids are ignored.
  void OnLinkState(std::uint64_t connection_id, LinkState state);
  // A health watch said SERVING (true) or NOT_SERVING (false).
  void OnLinkHealth(std::uint64_t connection_id, bool serving);

  ConnectionPoolStats Stats();

  // Closes every connection and cancels timers; later picks fail with
  // UNAVAILABLE "pool shut down". Listeners are not told. Idempotent.
  void Shutdown();

  // True iff connection `connection_id` is open and its state is READY
  // (draining and suspect connections included: this is about transport).
  bool IsConnected(std::uint64_t connection_id) override;
  // The next point of the connection's `SpreadOrder` (its offset drawn at
  // the first ask); none for an id that is not open.
  absl::optional<double> SpreadShare(std::uint64_t connection_id) override;
  // The next point of the connection's reopen order (`SpreadOrder` from
  // 0; a herd of one stream answers 0, a bigger one starts at the order's
  // second point), scaled to its herd over `kReopenHerd` (at most 1); none
  // for an id that is not open. The herd: the streams the connection
  // carried at the first ask of a run of asks less than
  // `suspect_end_window` apart (the streams that lose it together).
  absl::optional<double> ReopenShare(std::uint64_t connection_id) override;

  // Whether connection `id` is open, for tests.
  bool IsOpen(std::uint64_t id);

 private:
  // One entry per distinct listener holding picks on a connection (a stream
  // holds up to two during a migration). Keyed by owner, so that finding a
  // listener and telling each one once stay cheap with thousands of streams.
  struct Holder {
    std::size_t picks = 0;
    bool told = false;
  };
  using Holders = std::map<std::weak_ptr<DrainListener>, Holder,
                           std::owner_less<std::weak_ptr<DrainListener>>>;
  // One unannounced end after a first message (weak evidence), and the
  // stream it came from when known (else it counts as a stream of its own).
  struct EndMark {
    absl::Time at;
    std::weak_ptr<DrainListener> stream;
    bool known = false;
  };
  struct Conn {
    std::uint64_t id = 0;
    std::uint64_t group = 0;
    std::shared_ptr<Link> link;
    LinkState state = LinkState::kIdle;
    bool was_ready = false;
    bool draining = false;
    bool suspect = false;
    bool serving = false;  // a health watch said SERVING (health_check only)
    // It turned NOT_SERVING while nothing needed a connection: kept rather
    // than replaced, since its health watch says when it serves again. The
    // next pick or wait drains it, and replacement resumes.
    bool unready = false;
    Holders holders;
    std::size_t picks = 0;  // picks held, over all holders
    Clock::TimerId idle_timer = 0;
    Clock::TimerId probation_timer = 0;  // while suspect
    // Since when the connection has been usable; InfiniteFuture when not.
    absl::Time usable_since = absl::InfiniteFuture();
    std::deque<EndMark> ends;  // recent weak evidence, oldest first
    // When it was opened to get away from evidence against its group's
    // other connections (while the group is under suspicion, or for a
    // stream leaving the connection it just lost); InfinitePast otherwise.
    absl::Time escape_at = absl::InfinitePast();
    // A call was refused on it while it counted as an escape (once).
    bool escape_refused = false;
    // Where its leaving streams start their moves; from the first ask.
    absl::optional<SpreadOrder> spread;
    // The current run of reopen asks (see ReopenShare): the streams it
    // carried at the run's first ask, the asks since, and the latest.
    std::size_t herd = 0;
    std::uint32_t reopens_asked = 0;
    absl::Time last_reopen_ask = absl::InfinitePast();
    bool Live() const { return !draining && !suspect; }
  };
  // One endpoint (the target, one address, or one address of the set), with
  // its probe schedule. Kept while it has connections after leaving the set.
  struct Group {
    Endpoint endpoint;
    std::string key;  // EndpointKey, or the address as given
    // In the endpoint set. False: leaving (or gone, once it has no
    // connection; kept for its probe schedule until that runs out).
    bool member = true;
    // Answers in a row that lacked it (the flap rule; see Removal).
    int missed = 0;
    // A connection to it turned suspect: picks put it after other
    // endpoints until then (see MarkSuspectLocked).
    absl::Time suspected_until = absl::InfinitePast();
    // Opens since a connection of the group last stayed usable for
    // `probe_max_backoff`; sets the next delay.
    int opens_since_stable = 0;
    // No open before this.
    absl::Time next_open = absl::InfinitePast();
    // No open that only restores the standby count before this (see
    // DeferRefillLocked).
    absl::Time refill_at = absl::InfinitePast();
    Clock::TimerId probe_timer = 0;
    absl::Time probe_due = absl::InfinitePast();  // when probe_timer fires
    // Whether the group had a usable connection at the last sweep.
    bool available = false;
    // It balances each call (EndpointBalancing::kPerCall, set or learned):
    // streams' ends are no evidence about its connections.
    bool per_call = false;
    // Escape connections refused a call (kDetect), and since when.
    int escapes_refused = 0;
    absl::Time escapes_refused_since = absl::InfinitePast();
  };
  using Waiters = std::set<std::weak_ptr<DrainListener>,
                           std::owner_less<std::weak_ptr<DrainListener>>>;
  PoolCore(const ConnectionPoolOptions& options, ConnectionDriver* driver,
           std::uint64_t seed);

  // Each `...Locked` method adds what must happen after the lock (observer
  // and listener calls, link closes) to `later`.
  Conn* OpenLocked(std::uint64_t group, Deferred& later)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // When `stream`'s attempt last ended on `c` within `suspect_end_window`
  // (weak evidence; see `reopen_elsewhere_after_end`); InfinitePast if not.
  absl::Time EndedThereAtLocked(
      const Conn& c, const std::weak_ptr<DrainListener>& stream) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EnsureGroupsLocked(Deferred& later) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Opens a replacement when `group` has no live connection left and is
  // under the cap: now if its probe schedule allows, else from a timer.
  void ReplaceIfNeededLocked(std::uint64_t group, Deferred& later)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A connection of `group` stops taking picks (drain, suspect) while the
  // group may still have a usable one: the opens that only restore its
  // standby count wait `kStandbyRefillDelay`, so that their connects (on the
  // client's own cores) do not slow the streams moving to the usable
  // connections now. An open the streams need is never deferred.
  void DeferRefillLocked(std::uint64_t group)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the group's missing connections are spares only: it has a
  // usable connection, and (with `max_streams_per_connection`) room for its
  // picks on its usable ones.
  bool OnlySparesMissingLocked(std::uint64_t group) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnProbeTimer(std::uint64_t group,
                    const std::shared_ptr<Clock::TimerId>& cell);
  // The jittered delay after the group's open number `opens` (0-based)
  // since it was last stable: none after the first.
  absl::Duration ProbeDelayLocked(int opens) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkDrainingLocked(Conn& c, std::string why, Deferred& later)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Someone needs a connection: the connections kept while NOT_SERVING
  // (`Conn::unready`) drain now, so that they are replaced.
  void ResumeUnreadyLocked(Deferred& later) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes group `g` out of the set: drains its connections, stops probing.
  void RemoveGroupLocked(std::uint64_t g, const std::string& why,
                         Deferred& later) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether picks and replacements avoid `c`'s endpoint (missing from the
  // last answer, or leaving).
  bool AvoidedLocked(const Conn& c) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues the refresh hook (rate-limited by the source).
  void RefreshLocked(Deferred& later) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkSuspectLocked(Conn& c, const absl::Status& status, Deferred& later)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ArmProbationLocked(Conn& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Suspect `c` takes picks again (probation served, or the evidence
  // turned out to say nothing about it).
  void RestoreLocked(Conn& c, Deferred& later)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // kDetect: weighs a call refused on `c` (ended before its first message).
  // True when it shows that `c`'s endpoint balances each call (escapes did
  // not help); the endpoint is then per call and its suspects restored.
  bool LearnPerCallLocked(Conn& c, Deferred& later)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops expired listeners from `set` (a listener set or map) once it
  // holds `at` of them, and sets the next threshold.
  template <class Set>
  void PruneLocked(Set& set, std::size_t& at)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnProbationTimer(std::uint64_t id,
                        const std::shared_ptr<Clock::TimerId>& cell);
  // Weighs one report; true when it makes (or keeps) `c` suspect.
  bool WeighLocked(Conn& c, const EndReport& report,
                   const std::weak_ptr<DrainListener>& stream, bool known)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool UsableLocked(const Conn& c) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records whether `c` is usable now (`leaving`: it is about to go); a
  // connection that stops being usable after `probe_max_backoff` of being
  // usable restarts its group's probe schedule.
  void NoteUsabilityLocked(Conn& c, bool leaving = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Finds groups that went from no usable connection to one, and queues the
  // waiters' `OnConnectionAvailable` and the breaker's call in `later`.
  void SweepAvailabilityLocked(Deferred& later)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RetireLocked(std::uint64_t id, Deferred& later)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Retires `c` (which may erase it) or arms its idle timer, once unpicked.
  void MaybeRetireOrArmLocked(Conn& c, Deferred& later)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `cell` holds the timer's id (written once RunAfter returned, under mu_);
  // a timer that is no longer the connection's idle timer does nothing.
  void OnIdleTimer(std::uint64_t id,
                   const std::shared_ptr<Clock::TimerId>& cell);
  std::size_t GroupCountLocked(std::uint64_t group, bool live_only) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Picks held over the group's connections.
  std::size_t GroupPicksLocked(std::uint64_t group) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a group's wanted connections grow with its picks
  // (`standby_connections` or `max_streams_per_connection`).
  bool GrowsWithPicks() const;
  // How many live connections the group should have: 1; while it has
  // picks, 1 + `standby_connections`, or enough for its picks and one more
  // at `max_streams_per_connection` each, whichever is more.
  std::size_t WantedLiveLocked(std::uint64_t group) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How many usable connections `picks` picks of one group need: 1, or
  // with `max_streams_per_connection` enough for all of them and the next.
  std::size_t NeededForPicks(std::size_t picks) const;
  // Queues an observer event (in decision order) and its delivery once the
  // lock is released. No-op without an observer.
  void NotifyLocked(Deferred& later,
                    std::function<void(ConnectionObserver&)> event)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether idle `c` must stay open as one of its group's spares.
  bool KeptAsStandbyLocked(const Conn& c) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ConnectionPoolOptions options_;
  ConnectionDriver* const driver_;
  std::shared_ptr<Clock> clock_;
  std::shared_ptr<ConnectionObserver> observer_;
  // The observer's events, in the order they were decided (see SerialCalls).
  const std::shared_ptr<SerialCalls> events_ = std::make_shared<SerialCalls>();

  Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  // The endpoints, by group id (1, 2, ..., never reused).
  std::map<std::uint64_t, Group> groups_ ABSL_GUARDED_BY(mu_);
  std::uint64_t next_group_ ABSL_GUARDED_BY(mu_) = 1;
  std::uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::uint64_t endpoint_errors_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void()> refresh_;  // set before Start, then only read
  std::uint64_t total_opened_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t restored_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::uint64_t, Conn> conns_ ABSL_GUARDED_BY(mu_);
  // Registered by NotifyWhenAvailable; told once at the next transition.
  Waiters waiters_ ABSL_GUARDED_BY(mu_);
  std::size_t prune_waiters_at_ ABSL_GUARDED_BY(mu_) = 64;
  // Streams whose call was refused on a per-call endpoint. A pending one's
  // next NotifyWhenAvailable is answered at once while its group has a
  // usable connection (a fast retry); a Pick clears `pending`. A stream
  // gets a few fast retries per `suspect_end_window`.
  struct Retry {
    std::uint64_t group = 0;
    bool pending = false;
    absl::Time window_start = absl::InfinitePast();
    int fast = 0;  // fast retries since window_start
  };
  std::map<std::weak_ptr<DrainListener>, Retry,
           std::owner_less<std::weak_ptr<DrainListener>>>
      retries_ ABSL_GUARDED_BY(mu_);
  std::size_t prune_retries_at_ ABSL_GUARDED_BY(mu_) = 64;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);  // probe jitter
};

}  // namespace internal
}  // namespace tether
TETHER_END_HIDDEN

#endif  // TETHER_SRC_CONNECTIONS_POOL_CORE_H_
