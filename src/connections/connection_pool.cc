// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/connection_pool.h"

#include <atomic>
#include <climits>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpc/grpc.h"
#include "grpcpp/channel.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/byte_buffer.h"
#include "connections/pool_core.h"
#include "connections/pool_health_codec.h"

namespace tether {

// ---------------------------------------------------------------------------
// Options.

absl::Status Validate(const ConnectionPoolOptions& o) {
  if (o.target.empty() == o.addresses.empty()) {
    return absl::InvalidArgumentError(
        "connection pool needs exactly one of target and addresses");
  }
  std::set<std::string> seen;
  for (const std::string& a : o.addresses) {
    if (a.empty()) {
      return absl::InvalidArgumentError(
          "connection pool addresses must not contain an empty entry");
    }
    if (!seen.insert(a).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("connection pool addresses lists \"", a, "\" twice"));
    }
  }
  if (o.max_connections < 1 || o.max_connections > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("connection pool max_connections must be in [1, 1024], "
                     "got ",
                     o.max_connections));
  }
  if (o.idle_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "connection pool idle_timeout must be > 0 (or infinite), got ",
        absl::FormatDuration(o.idle_timeout)));
  }
  const absl::Duration max_ms = absl::Milliseconds(INT_MAX);
  if (o.keepalive_time != absl::InfiniteDuration() &&
      (o.keepalive_time < absl::Seconds(10) || o.keepalive_time > max_ms)) {
    return absl::InvalidArgumentError(
        absl::StrCat("connection pool keepalive_time must be in [10s, ",
                     absl::FormatDuration(max_ms), "] or infinite, got ",
                     absl::FormatDuration(o.keepalive_time)));
  }
  if (o.keepalive_timeout <= absl::ZeroDuration() ||
      o.keepalive_timeout > max_ms) {
    return absl::InvalidArgumentError(
        absl::StrCat("connection pool keepalive_timeout must be in (0, ",
                     absl::FormatDuration(max_ms), "], got ",
                     absl::FormatDuration(o.keepalive_timeout)));
  }
  return absl::OkStatus();
}

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

void PoolCore::Run(Deferred& d) {
  for (auto& call : d.calls) call();
  for (auto& link : d.to_close) link->Close();
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

PoolCore::Conn* PoolCore::OpenLocked(std::size_t group, Deferred& d) {
  const std::uint64_t id = next_id_++;
  Conn& c = conns_[id];
  c.id = id;
  c.group = group;
  c.link = driver_->Open(id, groups_[group]);
  ++total_opened_;
  if (observer_ != nullptr) {
    auto obs = observer_;
    std::string target = groups_[group];
    d.calls.push_back(
        [obs, id, target] { obs->OnConnectionOpened(id, target); });
  }
  MaybeRetireOrArmLocked(c, d);  // arms the idle timer: no picks yet
  return &c;
}

void PoolCore::EnsureGroupsLocked(Deferred& d) {
  const auto cap = static_cast<std::size_t>(options_.max_connections);
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    if (GroupCountLocked(g, /*live_only=*/true) == 0 &&
        GroupCountLocked(g, /*live_only=*/false) < cap) {
      OpenLocked(g, d);
    }
  }
}

void PoolCore::Start() {
  Deferred d;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!shut_down_) EnsureGroupsLocked(d);
  }
  Run(d);
}

absl::StatusOr<ConnectionPick> PoolCore::Pick(
    std::weak_ptr<DrainListener> listener) {
  Deferred d;
  absl::StatusOr<ConnectionPick> result;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) {
      result = absl::UnavailableError("connection pool shut down");
    } else {
      EnsureGroupsLocked(d);
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
  Run(d);
  return result;
}

void PoolCore::Release(std::uint64_t connection_id,
                       const std::weak_ptr<DrainListener>& listener) {
  Deferred d;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = conns_.find(connection_id);
    if (it == conns_.end()) return;
    Conn& c = it->second;
    auto h = c.holders.find(listener);
    if (h != c.holders.end()) {
      if (--h->second.picks == 0) c.holders.erase(h);
      --c.picks;
      MaybeRetireOrArmLocked(c, d);
    }
  }
  Run(d);
}

void PoolCore::ReportDrainEnd(std::uint64_t connection_id,
                              const absl::Status& status) {
  Deferred d;
  {
    std::lock_guard<std::mutex> lock(mu_);
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
      d.calls.push_back([obs, connection_id, status] {
        obs->OnConnectionSuspect(connection_id, status);
      });
    }
    const std::size_t group = c.group;
    MaybeRetireOrArmLocked(c, d);  // may erase c
    if (!shut_down_) {
      const auto cap = static_cast<std::size_t>(options_.max_connections);
      if (GroupCountLocked(group, true) == 0 &&
          GroupCountLocked(group, false) < cap) {
        OpenLocked(group, d);
      }
    }
  }
  Run(d);
}

void PoolCore::MarkDrainingLocked(Conn& c, std::string why, Deferred& d) {
  c.draining = true;
  const std::uint64_t id = c.id;
  if (observer_ != nullptr) {
    auto obs = observer_;
    d.calls.push_back([obs, id, why] { obs->OnConnectionDraining(id, why); });
  }
  // Tell each distinct listener once.
  for (auto& [listener, h] : c.holders) {
    if (h.told) continue;
    h.told = true;
    std::weak_ptr<DrainListener> weak = listener;
    d.calls.push_back([weak, id, why] {
      if (auto l = weak.lock()) l->OnConnectionDraining(id, why);
    });
  }
  // Make before break: the replacement exists before any listener runs, so a
  // burst of listeners that re-pick all land on it.
  const std::size_t group = c.group;
  MaybeRetireOrArmLocked(c, d);  // may erase c
  const auto cap = static_cast<std::size_t>(options_.max_connections);
  if (GroupCountLocked(group, true) == 0 &&
      GroupCountLocked(group, false) < cap) {
    OpenLocked(group, d);
  }
}

void PoolCore::MaybeRetireOrArmLocked(Conn& c, Deferred& d) {
  if (c.picks != 0) return;
  if (!c.Live()) {
    RetireLocked(c.id, d);
    return;
  }
  if (options_.idle_timeout == absl::InfiniteDuration()) return;
  if (c.idle_timer != 0) clock_->Cancel(c.idle_timer);
  // The timer's id is only known after RunAfter returns, so the callback
  // reads it from a shared cell.
  auto cell = std::make_shared<std::atomic<Clock::TimerId>>(0);
  std::weak_ptr<PoolCore> weak = weak_from_this();
  const std::uint64_t id = c.id;
  c.idle_timer = clock_->RunAfter(options_.idle_timeout, [weak, id, cell] {
    if (auto self = weak.lock()) self->OnIdleTimer(id, cell->load());
  });
  cell->store(c.idle_timer);
}

void PoolCore::OnIdleTimer(std::uint64_t id, Clock::TimerId timer) {
  Deferred d;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = conns_.find(id);
    if (it == conns_.end()) return;
    Conn& c = it->second;
    if (c.idle_timer != timer || timer == 0) return;
    c.idle_timer = 0;
    if (c.picks == 0) RetireLocked(id, d);
  }
  Run(d);
}

void PoolCore::RetireLocked(std::uint64_t id, Deferred& d) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = it->second;
  if (c.idle_timer != 0) clock_->Cancel(c.idle_timer);
  d.to_close.push_back(std::move(c.link));
  conns_.erase(it);
  if (observer_ != nullptr) {
    auto obs = observer_;
    d.calls.push_back([obs, id] { obs->OnConnectionRetired(id); });
  }
}

void PoolCore::OnLinkState(std::uint64_t connection_id, LinkState state) {
  Deferred d;
  {
    std::lock_guard<std::mutex> lock(mu_);
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
          d.calls.push_back(
              [obs, connection_id] { obs->OnConnectionReady(connection_id); });
        }
      }
    } else if (!c.draining && (c.was_ready || state == LinkState::kShutdown)) {
      MarkDrainingLocked(
          c,
          absl::StrCat("connection left ", LinkStateName(old), " for ",
                       LinkStateName(state),
                       c.was_ready ? " (GOAWAY or failure)" : ""),
          d);
    }
  }
  Run(d);
}

void PoolCore::OnLinkHealth(std::uint64_t connection_id, bool serving) {
  if (serving) return;
  Deferred d;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = conns_.find(connection_id);
    if (it == conns_.end() || it->second.draining) return;
    MarkDrainingLocked(it->second, "health check reports NOT_SERVING", d);
  }
  Run(d);
}

ConnectionPoolStats PoolCore::Stats() {
  std::lock_guard<std::mutex> lock(mu_);
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
  std::lock_guard<std::mutex> lock(mu_);
  return conns_.count(id) != 0;
}

void PoolCore::Shutdown() {
  Deferred d;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return;
    shut_down_ = true;
    std::vector<std::uint64_t> ids;
    for (const auto& entry : conns_) ids.push_back(entry.first);
    for (std::uint64_t id : ids) RetireLocked(id, d);
  }
  Run(d);
}

// ---------------------------------------------------------------------------
// The gRPC driver: one channel per connection, all watched on one
// CompletionQueue served by one thread.

namespace {

// Process-wide, so two pools never build channels with equal arguments.
std::atomic<std::uint64_t> g_pool_nonce{0};

// How often an armed state watch wakes up with nothing to report. Bounds how
// long the driver's shutdown waits for a channel still referenced elsewhere.
constexpr absl::Duration kWatchPeriod = absl::Seconds(1);

LinkState FromGrpc(grpc_connectivity_state s) {
  switch (s) {
    case GRPC_CHANNEL_IDLE:
      return LinkState::kIdle;
    case GRPC_CHANNEL_CONNECTING:
      return LinkState::kConnecting;
    case GRPC_CHANNEL_READY:
      return LinkState::kReady;
    case GRPC_CHANNEL_TRANSIENT_FAILURE:
      return LinkState::kTransientFailure;
    case GRPC_CHANNEL_SHUTDOWN:
      break;
  }
  return LinkState::kShutdown;
}

gpr_timespec DeadlineAfter(absl::Duration d) {
  return gpr_time_add(
      gpr_now(GPR_CLOCK_MONOTONIC),
      gpr_time_from_millis(absl::ToInt64Milliseconds(d), GPR_TIMESPAN));
}

}  // namespace

// Held by `std::shared_ptr`: the watcher thread holds a reference too, so
// that the pool may be destroyed from a callback running on that thread.
class GrpcConnectionDriver final
    : public ConnectionDriver,
      public std::enable_shared_from_this<GrpcConnectionDriver> {
 public:
  static std::shared_ptr<GrpcConnectionDriver> Create(
      const ConnectionPoolOptions& options) {
    std::shared_ptr<GrpcConnectionDriver> driver(
        new GrpcConnectionDriver(options));
    // Started under mu_, and Loop takes mu_ first: the thread can touch
    // nothing (thread_ included) before thread_ is assigned.
    std::lock_guard<std::mutex> lock(driver->mu_);
    driver->thread_ = std::thread([self = driver] { self->Loop(); });
    return driver;
  }

  ~GrpcConnectionDriver() override {
    // Only reached once the thread has left Loop (it holds a reference), and
    // after Shutdown, which joined or detached it.
    if (thread_.joinable()) thread_.detach();
  }

  void SetCore(std::weak_ptr<PoolCore> core) { core_ = std::move(core); }

  std::shared_ptr<Link> Open(std::uint64_t id,
                             const std::string& address) override;

  // Stops watching and stops the thread: waits for it, unless called on the
  // thread itself (a callback dropping the pool), which then ends on its own
  // once the queue is drained. Every link must already be closed (the core's
  // Shutdown does that, which also cancels the health watches).
  void Shutdown() {
    bool on_loop_thread;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (shutting_down_) return;
      shutting_down_ = true;
      MaybeShutdownQueueLocked();
      // loop_thread_ is set by the thread itself before it runs any
      // callback, so a callback dropping the pool always sees its own id.
      on_loop_thread = std::this_thread::get_id() == loop_thread_;
    }
    if (on_loop_thread) {
      thread_.detach();
    } else {
      thread_.join();
    }
  }

 private:
  class GrpcLink;
  enum class OpKind {
    kWatch,
    kHealthStart,
    kHealthWrite,
    kHealthRead,
    kHealthFinish
  };
  struct Op {
    std::shared_ptr<GrpcLink> link;
    OpKind kind;
  };

  explicit GrpcConnectionDriver(const ConnectionPoolOptions& options)
      : options_(options), nonce_(++g_pool_nonce) {
    credentials_ = options.credentials != nullptr
                       ? options.credentials
                       : grpc::InsecureChannelCredentials();
  }

  // Health calls post more ops (Read, Finish) until they finish, so the
  // queue is shut down only once shutting down and none is left.
  void MaybeShutdownQueueLocked() {
    if (shutting_down_ && active_health_ == 0 && !queue_shut_down_) {
      queue_shut_down_ = true;
      cq_.Shutdown();
    }
  }
  void Loop();
  void OnWatch(const std::shared_ptr<GrpcLink>& link, bool ok);
  void OnHealth(const std::shared_ptr<GrpcLink>& link, OpKind kind, bool ok);
  void StartHealthLocked(const std::shared_ptr<GrpcLink>& link);

  const ConnectionPoolOptions options_;
  const std::uint64_t nonce_;
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
  std::weak_ptr<PoolCore> core_;
  grpc::CompletionQueue cq_;
  // Assigned once in Create (under mu_); then used only by Shutdown and the
  // destructor.
  std::thread thread_;

  std::mutex mu_;  // guards the fields of every GrpcLink and those below
  std::thread::id loop_thread_;  // set by Loop before its first callback
  bool shutting_down_ = false;
  bool queue_shut_down_ = false;
  int active_health_ = 0;  // health calls not yet finished
};

class GrpcConnectionDriver::GrpcLink final
    : public Link,
      public std::enable_shared_from_this<GrpcLink> {
 public:
  GrpcLink(std::shared_ptr<GrpcConnectionDriver> driver, std::uint64_t id,
           std::shared_ptr<grpc::Channel> channel)
      : driver_(std::move(driver)), id_(id), channel_(std::move(channel)) {}

  std::shared_ptr<grpc::Channel> channel() override {
    std::lock_guard<std::mutex> lock(driver_->mu_);
    return channel_;
  }

  void Close() override {
    std::shared_ptr<grpc::Channel> drop;
    {
      std::lock_guard<std::mutex> lock(driver_->mu_);
      if (closed_) return;
      closed_ = true;
      drop = std::move(channel_);
      if (health_context_ != nullptr) health_context_->TryCancel();
    }
    // Dropping the last reference shuts the channel down, which completes
    // its pending state watch at once.
  }

 private:
  friend class GrpcConnectionDriver;

  // Owned: a link may be closed after the pool is gone (an idle timer that
  // fired during the pool's destruction), and Close takes driver_->mu_.
  const std::shared_ptr<GrpcConnectionDriver> driver_;
  const std::uint64_t id_;
  // All below guarded by driver_->mu_.
  std::shared_ptr<grpc::Channel> channel_;
  bool closed_ = false;
  grpc_connectivity_state last_state_ = GRPC_CHANNEL_IDLE;
  bool health_started_ = false;
  std::unique_ptr<grpc::ClientContext> health_context_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> health_call_;
  grpc::ByteBuffer health_read_;
  grpc::Status health_status_;
};

std::shared_ptr<Link> GrpcConnectionDriver::Open(std::uint64_t id,
                                                 const std::string& address) {
  grpc::ChannelArguments args = options_.channel_args;
  // Own subchannel per connection: a local pool plus an argument that
  // differs per connection, so no two channels share a transport.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetString("tether.connection_id", absl::StrCat(nonce_, ".", id));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS,
              options_.keepalive_time == absl::InfiniteDuration()
                  ? INT_MAX
                  : static_cast<int>(
                        absl::ToInt64Milliseconds(options_.keepalive_time)));
  args.SetInt(
      GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
      static_cast<int>(absl::ToInt64Milliseconds(options_.keepalive_timeout)));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS,
              options_.keepalive_permit_without_calls ? 1 : 0);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(address, credentials_, args);
  auto link = std::make_shared<GrpcLink>(shared_from_this(), id, channel);
  std::lock_guard<std::mutex> lock(mu_);
  if (shutting_down_) {
    link->closed_ = true;
    return link;
  }
  // Start connecting now (make before break), then watch from IDLE: if the
  // channel is already CONNECTING the watch fires at once and reports it.
  channel->GetState(/*try_to_connect=*/true);
  link->last_state_ = GRPC_CHANNEL_IDLE;
  channel->NotifyOnStateChange(GRPC_CHANNEL_IDLE, DeadlineAfter(kWatchPeriod),
                               &cq_, new Op{link, OpKind::kWatch});
  return link;
}

void GrpcConnectionDriver::Loop() {
  {
    // Waits for Create to finish assigning thread_ (it holds mu_).
    std::lock_guard<std::mutex> lock(mu_);
    loop_thread_ = std::this_thread::get_id();
  }
  void* tag = nullptr;
  bool ok = false;
  while (cq_.Next(&tag, &ok)) {
    std::unique_ptr<Op> op(static_cast<Op*>(tag));
    std::shared_ptr<GrpcLink> link;
    OpKind kind;
    {
      // Ops are written under mu_; reading them under it too makes the
      // hand-off through the queue visible to TSan even when gRPC itself is
      // not instrumented.
      std::lock_guard<std::mutex> lock(mu_);
      link = std::move(op->link);
      kind = op->kind;
    }
    if (kind == OpKind::kWatch) {
      OnWatch(link, ok);
    } else {
      OnHealth(link, kind, ok);
    }
  }
}

void GrpcConnectionDriver::OnWatch(const std::shared_ptr<GrpcLink>& link,
                                   bool ok) {
  std::vector<LinkState> reports;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (link->closed_ || shutting_down_ || link->channel_ == nullptr) return;
    const grpc_connectivity_state now = link->channel_->GetState(false);
    if (ok && now == link->last_state_ && now == GRPC_CHANNEL_READY) {
      // The state changed and came back before we looked: the old transport
      // is gone, so report the departure from READY as well.
      reports.push_back(LinkState::kIdle);
    }
    if (now != link->last_state_ || !reports.empty()) {
      reports.push_back(FromGrpc(now));
    }
    link->last_state_ = now;
    if (now == GRPC_CHANNEL_READY && options_.health_check &&
        !link->health_started_) {
      StartHealthLocked(link);
    }
    if (now != GRPC_CHANNEL_SHUTDOWN) {
      link->channel_->NotifyOnStateChange(now, DeadlineAfter(kWatchPeriod),
                                          &cq_, new Op{link, OpKind::kWatch});
    }
  }
  if (reports.empty()) return;
  if (auto core = core_.lock()) {
    for (LinkState s : reports) core->OnLinkState(link->id_, s);
  }
}

void GrpcConnectionDriver::StartHealthLocked(
    const std::shared_ptr<GrpcLink>& link) {
  link->health_started_ = true;
  ++active_health_;
  link->health_context_ = std::make_unique<grpc::ClientContext>();
  grpc::GenericStub stub(link->channel_);
  link->health_call_ = stub.PrepareCall(link->health_context_.get(),
                                        "/grpc.health.v1.Health/Watch", &cq_);
  link->health_call_->StartCall(new Op{link, OpKind::kHealthStart});
}

void GrpcConnectionDriver::OnHealth(const std::shared_ptr<GrpcLink>& link,
                                    OpKind kind, bool ok) {
  int reported = -1;  // -1 none, 1 serving, 0 not serving
  std::unique_ptr<grpc::ClientContext> drop_context;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> drop_call;
  {
    std::lock_guard<std::mutex> lock(mu_);
    grpc::GenericClientAsyncReaderWriter* call = link->health_call_.get();
    switch (kind) {
      case OpKind::kHealthStart:
        if (ok) {
          std::string request =
              EncodeHealthCheckRequest(options_.health_service);
          grpc::Slice slice(request);
          grpc::ByteBuffer buffer(&slice, 1);
          call->WriteLast(buffer, grpc::WriteOptions(),
                          new Op{link, OpKind::kHealthWrite});
          call->Read(&link->health_read_, new Op{link, OpKind::kHealthRead});
        } else {
          call->Finish(&link->health_status_,
                       new Op{link, OpKind::kHealthFinish});
        }
        break;
      case OpKind::kHealthWrite:
        // A failed write is followed by a failed read, which finishes.
        break;
      case OpKind::kHealthRead:
        if (ok) {
          grpc::Slice slice;
          std::string bytes;
          if (link->health_read_.DumpToSingleSlice(&slice).ok()) {
            bytes.assign(reinterpret_cast<const char*>(slice.begin()),
                         slice.size());
          }
          int status = DecodeHealthCheckResponseStatus(bytes);
          if (status == kHealthServing) reported = 1;
          if (status == kHealthNotServing) reported = 0;
          call->Read(&link->health_read_, new Op{link, OpKind::kHealthRead});
        } else {
          call->Finish(&link->health_status_,
                       new Op{link, OpKind::kHealthFinish});
        }
        break;
      case OpKind::kHealthFinish:
        // The watch ended (UNIMPLEMENTED counts as serving; anything else
        // means the call or the connection ended, which the state watch
        // covers). It is not restarted.
        drop_call = std::move(link->health_call_);
        drop_context = std::move(link->health_context_);
        --active_health_;
        MaybeShutdownQueueLocked();
        break;
      case OpKind::kWatch:
        break;
    }
  }
  if (reported < 0) return;
  if (auto core = core_.lock()) core->OnLinkHealth(link->id_, reported == 1);
}

}  // namespace internal

// ---------------------------------------------------------------------------
// ConnectionPool.

absl::StatusOr<std::shared_ptr<ConnectionPool>> ConnectionPool::Create(
    ConnectionPoolOptions options) {
  absl::Status s = Validate(options);
  if (!s.ok()) return s;
  std::shared_ptr<ConnectionPool> pool(new ConnectionPool());
  pool->driver_ = internal::GrpcConnectionDriver::Create(options);
  pool->core_ = internal::PoolCore::Create(options, pool->driver_.get());
  pool->driver_->SetCore(pool->core_);
  pool->core_->Start();
  return pool;
}

ConnectionPool::~ConnectionPool() {
  if (core_ != nullptr) core_->Shutdown();
  if (driver_ != nullptr) driver_->Shutdown();
}

absl::StatusOr<ConnectionPick> ConnectionPool::Pick(
    std::weak_ptr<DrainListener> listener) {
  return core_->Pick(std::move(listener));
}

void ConnectionPool::Release(std::uint64_t connection_id,
                             const std::weak_ptr<DrainListener>& listener) {
  core_->Release(connection_id, listener);
}

void ConnectionPool::ReportDrainEnd(std::uint64_t connection_id,
                                    const absl::Status& status) {
  core_->ReportDrainEnd(connection_id, status);
}

ConnectionPoolStats ConnectionPool::Stats() const { return core_->Stats(); }

}  // namespace tether
