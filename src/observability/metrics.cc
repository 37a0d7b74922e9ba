// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/metrics.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"

namespace tether {
namespace {

using internal::MutexLock;

constexpr absl::string_view kMethod = "grpc.method";
constexpr absl::string_view kTarget = "grpc.target";
constexpr absl::string_view kKind = "tether.kind";

std::vector<double> LatencyBuckets() {
  // A66's latency buckets, then longer ones for stream attempts.
  return {0,     0.00001, 0.00005, 0.0001, 0.0003, 0.0006, 0.0008, 0.001, 0.002,
          0.003, 0.004,   0.005,   0.006,  0.008,  0.01,   0.013,  0.016, 0.02,
          0.025, 0.03,    0.04,    0.05,   0.065,  0.08,   0.1,    0.13,  0.16,
          0.2,   0.25,    0.3,     0.4,    0.5,    0.65,   0.8,    1,     2,
          5,     10,      20,      50,     100,    300,    600,    1800,  3600};
}

std::vector<MetricDescriptor> BuildDescriptors() {
  using K = MetricKind;
  using M = MetricId;
  std::vector<MetricDescriptor> d = {
      {M::kAttemptStarted,
       K::kCounter,
       "tether.client.attempt.started",
       "{attempt}",
       "Stream attempts started (A66 attempt.started)",
       {kMethod, kTarget, "tether.reason"},
       {}},
      {M::kAttemptDuration,
       K::kHistogram,
       "tether.client.attempt.duration",
       "s",
       "Stream attempt durations, start to end (A66 attempt.duration)",
       {kMethod, kTarget, "grpc.status", "tether.end"},
       LatencyBuckets()},
      {M::kAttemptTimeToFirstMessage,
       K::kHistogram,
       "tether.client.attempt.time_to_first_message",
       "s",
       "From an attempt's start to its first message",
       {kMethod, kTarget},
       LatencyBuckets()},
      {M::kStreamsOpen,
       K::kUpDownCounter,
       "tether.client.streams.open",
       "{stream}",
       "Streams open (first attempt started, not yet released)",
       {kMethod, kTarget},
       {}},
      {M::kMigrations,
       K::kCounter,
       "tether.client.migrations",
       "{attempt}",
       "Attempts started because the connection or server was draining",
       {kMethod, kTarget},
       {}},
      {M::kDuplicatesDropped,
       K::kCounter,
       "tether.client.duplicates_dropped",
       "{message}",
       "Messages dropped as duplicates after a resume",
       {kMethod, kTarget},
       {}},
      {M::kGaps,
       K::kCounter,
       "tether.client.gaps",
       "{gap}",
       "Messages that skipped sequence numbers",
       {kMethod, kTarget},
       {}},
      {M::kStalls,
       K::kCounter,
       "tether.client.stalls",
       "{attempt}",
       "Attempts lost to stall_timeout",
       {kMethod, kTarget},
       {}},
      {M::kResyncs,
       K::kCounter,
       "tether.client.resyncs",
       "{resync}",
       "Streams that resynchronized because a resume was impossible",
       {kMethod, kTarget},
       {}},
      {M::kStreamsGaveUp,
       K::kCounter,
       "tether.client.streams.gave_up",
       "{stream}",
       "Streams ended because their reopen budget was spent",
       {kMethod, kTarget},
       {}},
      {M::kBreakerState,
       K::kUpDownCounter,
       "tether.client.breaker.state",
       "1",
       "1 for the breaker's current state, 0 for the others",
       {"tether.breaker", "tether.state"},
       {}},
      {M::kBreakerTransitions,
       K::kCounter,
       "tether.client.breaker.transitions",
       "{transition}",
       "Breaker state changes",
       {"tether.breaker", "tether.from", "tether.to"},
       {}},
      {M::kBreakerCalls,
       K::kCounter,
       "tether.client.breaker.calls",
       "{call}",
       "Calls seen by a breaker, by outcome (not_permitted: rejected)",
       {"tether.breaker", "tether.outcome"},
       {}},
      {M::kConnections,
       K::kUpDownCounter,
       "tether.client.connections",
       "{connection}",
       "Pool connections open, by state",
       {kTarget, "tether.state"},
       {}},
      {M::kConnectionsOpened,
       K::kCounter,
       "tether.client.connections.opened",
       "{connection}",
       "Pool connections ever opened",
       {kTarget},
       {}},
      {M::kEndpoints,
       K::kUpDownCounter,
       "tether.client.endpoints",
       "{endpoint}",
       "Endpoints in the pools' endpoint sets",
       {},
       {}},
      {M::kEndpointErrors,
       K::kCounter,
       "tether.client.endpoint.errors",
       "{error}",
       "Endpoint source errors (the last good set was kept)",
       {},
       {}},
      {M::kMessagesDelivered,
       K::kCounter,
       "tether.client.messages.delivered",
       "{message}",
       "Messages handed to the application (duplicates dropped not counted)",
       {kMethod, kTarget, kKind},
       {}},
      {M::kOutboxDepth,
       K::kUpDownCounter,
       "tether.client.outbox.depth",
       "{write}",
       "Bidi writes waiting in outboxes (unacknowledged, or not yet written)",
       {kMethod, kTarget},
       {}},
      {M::kWritesRefused,
       K::kCounter,
       "tether.client.writes.refused",
       "{write}",
       "Bidi writes refused with RESOURCE_EXHAUSTED (outbox full)",
       {kMethod, kTarget},
       {}},
      {M::kStreamDuration,
       K::kHistogram,
       "tether.client.stream.duration",
       "s",
       "Stream durations, first attempt to end (A66 call.duration)",
       {kMethod, kTarget, kKind, "grpc.status", "tether.end"},
       LatencyBuckets()},
      {M::kRetryBudgetWaits,
       K::kCounter,
       "tether.client.retry_budget.waits",
       "{attempt}",
       "Reopens held back by an empty retry budget",
       {kMethod, kTarget},
       {}},
  };
  return d;
}

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

absl::string_view EndLabel(EndClass c, bool by_client) {
  if (by_client) return "cancelled";
  return EndClassName(c);
}

std::vector<std::string> Owned(absl::Span<const absl::string_view> labels) {
  return std::vector<std::string>(labels.begin(), labels.end());
}

}  // namespace

const std::vector<MetricDescriptor>& AllMetrics() {
  static const auto* all =
      new std::vector<MetricDescriptor>(BuildDescriptors());
  return *all;
}

const MetricDescriptor& Describe(MetricId id) {
  return AllMetrics()[static_cast<std::size_t>(id)];
}

// --- InMemoryMetricsSink ---------------------------------------------------

void InMemoryMetricsSink::Add(MetricId metric,
                              absl::Span<const absl::string_view> labels,
                              double delta) {
  MutexLock lock(&mu_);
  Series& s = series_[Key(metric, Owned(labels))];
  s.value += delta;
  ++s.count;
}

void InMemoryMetricsSink::Record(MetricId metric,
                                 absl::Span<const absl::string_view> labels,
                                 double value) {
  Add(metric, labels, value);
}

double InMemoryMetricsSink::Value(
    MetricId metric, const std::vector<std::string>& labels) const {
  MutexLock lock(&mu_);
  auto it = series_.find(Key(metric, labels));
  return it == series_.end() ? 0 : it->second.value;
}

double InMemoryMetricsSink::Total(MetricId metric) const {
  MutexLock lock(&mu_);
  double total = 0;
  for (const auto& [key, s] : series_) {
    if (key.first == metric) total += s.value;
  }
  return total;
}

std::uint64_t InMemoryMetricsSink::Count(
    MetricId metric, const std::vector<std::string>& labels) const {
  MutexLock lock(&mu_);
  auto it = series_.find(Key(metric, labels));
  return it == series_.end() ? 0 : it->second.count;
}

std::uint64_t InMemoryMetricsSink::TotalCount(MetricId metric) const {
  MutexLock lock(&mu_);
  std::uint64_t total = 0;
  for (const auto& [key, s] : series_) {
    if (key.first == metric) total += s.count;
  }
  return total;
}

// --- MetricsStreamObserver -------------------------------------------------

MetricsStreamObserver::MetricsStreamObserver(std::shared_ptr<MetricsSink> sink,
                                             std::string method,
                                             std::string target,
                                             std::shared_ptr<Clock> clock,
                                             StreamKind kind)
    : sink_(std::move(sink)),
      method_(std::move(method)),
      target_(std::move(target)),
      clock_holder_(std::move(clock)),
      clock_(clock_holder_ ? clock_holder_.get() : &SystemClock()),
      kind_(kind) {}

MetricsStreamObserver::~MetricsStreamObserver() {
  // A stream destroyed before its end: the app cancelled it.
  RecordEnd(absl::CancelledError("destroyed"), StreamEnd::kCancelled);
  bool counted;
  {
    MutexLock lock(&mu_);
    counted = counted_open_;
  }
  if (counted && sink_) {
    const absl::string_view l[] = {method_, target_};
    sink_->Add(MetricId::kStreamsOpen, l, -1);
  }
}

void MetricsStreamObserver::OnMessageDelivered() {
  if (!sink_) return;
  const absl::string_view l[] = {method_, target_, StreamKindName(kind_)};
  sink_->Add(MetricId::kMessagesDelivered, l, 1);
}

void MetricsStreamObserver::OnStreamEnded(const absl::Status& status,
                                          StreamEnd how) {
  RecordEnd(status, how);
}

void MetricsStreamObserver::RecordEnd(const absl::Status& status,
                                      StreamEnd how) {
  std::int64_t outbox = 0;
  absl::optional<absl::Duration> lasted;
  {
    MutexLock lock(&mu_);
    if (ended_) return;
    ended_ = true;
    outbox = outbox_;
    outbox_ = 0;
    // A stream that never started an attempt has no duration.
    if (counted_open_) lasted = clock_->Now() - opened_at_;
  }
  if (!sink_) return;
  const absl::string_view l[] = {method_, target_};
  if (outbox != 0) {
    sink_->Add(MetricId::kOutboxDepth, l, -static_cast<double>(outbox));
  }
  if (!lasted) return;
  const std::string code = absl::StatusCodeToString(status.code());
  const absl::string_view ld[] = {method_, target_, StreamKindName(kind_), code,
                                  StreamEndName(how)};
  sink_->Record(MetricId::kStreamDuration, ld, Seconds(*lasted));
}

void MetricsStreamObserver::OnOutboxChanged(std::int64_t delta) {
  {
    MutexLock lock(&mu_);
    // After the end the gauge no longer holds this stream's writes.
    if (ended_) return;
    outbox_ += delta;
  }
  if (!sink_) return;
  const absl::string_view l[] = {method_, target_};
  sink_->Add(MetricId::kOutboxDepth, l, static_cast<double>(delta));
}

void MetricsStreamObserver::OnWriteRefused() {
  if (!sink_) return;
  const absl::string_view l[] = {method_, target_};
  sink_->Add(MetricId::kWritesRefused, l, 1);
}

void MetricsStreamObserver::OnAttemptStarted(const AttemptInfo& info) {
  if (!sink_) return;
  bool first_open = false;
  {
    MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    started_[info.attempt] = now;
    if (!counted_open_) {
      first_open = counted_open_ = true;
      opened_at_ = now;
    }
  }
  const absl::string_view l[] = {method_, target_};
  if (first_open) sink_->Add(MetricId::kStreamsOpen, l, 1);
  const absl::string_view ls[] = {method_, target_,
                                  AttemptReasonName(info.reason)};
  sink_->Add(MetricId::kAttemptStarted, ls, 1);
  if (info.reason == AttemptReason::kMigration ||
      info.reason == AttemptReason::kDrainNotice) {
    sink_->Add(MetricId::kMigrations, l, 1);
  }
}

void MetricsStreamObserver::OnFirstMessage(const AttemptInfo& /*info*/,
                                           absl::Duration since_start) {
  if (!sink_) return;
  const absl::string_view l[] = {method_, target_};
  sink_->Record(MetricId::kAttemptTimeToFirstMessage, l, Seconds(since_start));
}

void MetricsStreamObserver::OnAttemptEnded(const AttemptInfo& info,
                                           const absl::Status& status,
                                           EndClass classified,
                                           bool by_client) {
  if (!sink_) return;
  absl::optional<absl::Time> started;
  {
    MutexLock lock(&mu_);
    auto it = started_.find(info.attempt);
    if (it != started_.end()) {
      started = it->second;
      started_.erase(it);
    }
  }
  if (!started) return;
  const std::string code = absl::StatusCodeToString(status.code());
  const absl::string_view l[] = {method_, target_, code,
                                 EndLabel(classified, by_client)};
  sink_->Record(MetricId::kAttemptDuration, l,
                Seconds(clock_->Now() - *started));
}

void MetricsStreamObserver::OnDuplicateDropped(std::uint64_t /*seq*/,
                                               std::uint64_t /*last*/) {
  if (!sink_) return;
  const absl::string_view l[] = {method_, target_};
  sink_->Add(MetricId::kDuplicatesDropped, l, 1);
}

void MetricsStreamObserver::OnGap(std::uint64_t /*expected*/,
                                  std::uint64_t /*got*/) {
  if (!sink_) return;
  const absl::string_view l[] = {method_, target_};
  sink_->Add(MetricId::kGaps, l, 1);
}

void MetricsStreamObserver::OnRetryBudgetWait(absl::Duration /*added*/) {
  if (!sink_) return;
  const absl::string_view l[] = {method_, target_};
  sink_->Add(MetricId::kRetryBudgetWaits, l, 1);
}

void MetricsStreamObserver::OnGaveUp(const absl::Status& /*status*/) {
  if (!sink_) return;
  const absl::string_view l[] = {method_, target_};
  sink_->Add(MetricId::kStreamsGaveUp, l, 1);
}

void MetricsStreamObserver::OnStalled(const AttemptInfo& /*info*/,
                                      absl::Duration /*silent_for*/) {
  if (!sink_) return;
  const absl::string_view l[] = {method_, target_};
  sink_->Add(MetricId::kStalls, l, 1);
}

void MetricsStreamObserver::OnResync(const absl::Status& /*why*/,
                                     std::uint64_t /*resume_after*/) {
  if (!sink_) return;
  const absl::string_view l[] = {method_, target_};
  sink_->Add(MetricId::kResyncs, l, 1);
}

std::shared_ptr<MetricsStreamObserver> MakeMetricsObserver(
    std::shared_ptr<MetricsSink> sink, std::string method, std::string target,
    std::shared_ptr<Clock> clock, StreamKind kind) {
  return std::make_shared<MetricsStreamObserver>(
      std::move(sink), std::move(method), std::move(target), std::move(clock),
      kind);
}

// --- MetricsConnectionObserver ---------------------------------------------

MetricsConnectionObserver::MetricsConnectionObserver(
    std::shared_ptr<MetricsSink> sink)
    : sink_(std::move(sink)) {}

MetricsConnectionObserver::~MetricsConnectionObserver() {
  // Connections the pool never retired (it outlives its observer only if the
  // app replaced it): take them out of the gauge.
  std::map<std::uint64_t, Conn> left;
  {
    MutexLock lock(&mu_);
    left.swap(conns_);
  }
  if (!sink_) return;
  for (const auto& [id, c] : left) {
    const absl::string_view l[] = {c.target, c.state};
    sink_->Add(MetricId::kConnections, l, -1);
  }
}

void MetricsConnectionObserver::OnConnectionOpened(std::uint64_t id,
                                                   absl::string_view target) {
  {
    MutexLock lock(&mu_);
    if (conns_.count(id) != 0) return;
    conns_[id] = Conn{std::string(target), "connecting"};
  }
  if (!sink_) return;
  const absl::string_view lt[] = {target};
  sink_->Add(MetricId::kConnectionsOpened, lt, 1);
  const absl::string_view l[] = {target, "connecting"};
  sink_->Add(MetricId::kConnections, l, 1);
}

void MetricsConnectionObserver::OnConnectionReady(std::uint64_t id) {
  Move(id, "ready", false);
}
void MetricsConnectionObserver::OnConnectionDraining(std::uint64_t id,
                                                     absl::string_view) {
  Move(id, "draining", false);
}
void MetricsConnectionObserver::OnConnectionSuspect(std::uint64_t id,
                                                    const absl::Status&) {
  Move(id, "suspect", false);
}
void MetricsConnectionObserver::OnConnectionRestored(std::uint64_t id) {
  Move(id, "ready", true);
}
void MetricsConnectionObserver::OnConnectionRetired(std::uint64_t id) {
  Move(id, "", false);
}

void MetricsConnectionObserver::OnEndpointAdded(absl::string_view) {
  if (sink_) sink_->Add(MetricId::kEndpoints, {}, 1);
}
void MetricsConnectionObserver::OnEndpointRemoved(absl::string_view,
                                                  absl::string_view) {
  if (sink_) sink_->Add(MetricId::kEndpoints, {}, -1);
}
void MetricsConnectionObserver::OnEndpointsError(const absl::Status&) {
  if (sink_) sink_->Add(MetricId::kEndpointErrors, {}, 1);
}

void MetricsConnectionObserver::Move(std::uint64_t id, absl::string_view state,
                                     bool only_if_suspect) {
  std::string target;
  absl::string_view from;
  {
    MutexLock lock(&mu_);
    auto it = conns_.find(id);
    if (it == conns_.end()) return;
    Conn& c = it->second;
    // A draining connection stays draining until it is retired.
    if (!state.empty() && c.state == "draining") return;
    if (only_if_suspect && c.state != "suspect") return;
    if (c.state == state) return;
    target = c.target;
    from = c.state;
    if (state.empty()) {
      conns_.erase(it);
    } else {
      c.state = state;
    }
  }
  if (!sink_) return;
  const absl::string_view lf[] = {target, from};
  sink_->Add(MetricId::kConnections, lf, -1);
  if (!state.empty()) {
    const absl::string_view lt[] = {target, state};
    sink_->Add(MetricId::kConnections, lt, 1);
  }
}

std::shared_ptr<MetricsConnectionObserver> MakeMetricsConnectionObserver(
    std::shared_ptr<MetricsSink> sink) {
  return std::make_shared<MetricsConnectionObserver>(std::move(sink));
}

// --- MetricsBreakerObserver ------------------------------------------------

MetricsBreakerObserver::MetricsBreakerObserver(
    std::shared_ptr<MetricsSink> sink)
    : sink_(std::move(sink)) {}

void MetricsBreakerObserver::SetState(absl::string_view breaker,
                                      BreakerState state,
                                      bool only_if_unknown) {
  absl::optional<BreakerState> from;
  {
    MutexLock lock(&mu_);
    auto it = states_.find(breaker);
    if (it == states_.end()) {
      states_.emplace(std::string(breaker), state);
    } else {
      if (only_if_unknown || it->second == state) return;
      from = it->second;
      it->second = state;
    }
  }
  if (!sink_) return;
  if (from) {
    const absl::string_view lf[] = {breaker, BreakerStateName(*from)};
    sink_->Add(MetricId::kBreakerState, lf, -1);
  }
  const absl::string_view lt[] = {breaker, BreakerStateName(state)};
  sink_->Add(MetricId::kBreakerState, lt, 1);
}

void MetricsBreakerObserver::OnStateChange(absl::string_view breaker,
                                           BreakerState from, BreakerState to,
                                           const BreakerCounts& /*counts*/) {
  SetState(breaker, to, false);
  if (!sink_) return;
  const absl::string_view l[] = {breaker, BreakerStateName(from),
                                 BreakerStateName(to)};
  sink_->Add(MetricId::kBreakerTransitions, l, 1);
}

void MetricsBreakerObserver::OnRecorded(absl::string_view breaker,
                                        Outcome outcome,
                                        const BreakerCounts& counts) {
  SetState(breaker, counts.state, true);
  if (!sink_) return;
  const absl::string_view l[] = {breaker, OutcomeName(outcome)};
  sink_->Add(MetricId::kBreakerCalls, l, 1);
}

void MetricsBreakerObserver::OnNotPermitted(absl::string_view breaker,
                                            const BreakerCounts& counts) {
  SetState(breaker, counts.state, true);
  if (!sink_) return;
  const absl::string_view l[] = {breaker, "not_permitted"};
  sink_->Add(MetricId::kBreakerCalls, l, 1);
}

std::shared_ptr<MetricsBreakerObserver> MakeMetricsBreakerObserver(
    std::shared_ptr<MetricsSink> sink) {
  return std::make_shared<MetricsBreakerObserver>(std::move(sink));
}

// --- CombineObservers ------------------------------------------------------

namespace {

template <class T>
std::vector<std::shared_ptr<T>> NonNull(std::vector<std::shared_ptr<T>> v) {
  std::vector<std::shared_ptr<T>> out;
  for (auto& o : v) {
    if (o) out.push_back(std::move(o));
  }
  return out;
}

class StreamFanOut final : public StreamObserver {
 public:
  explicit StreamFanOut(std::vector<std::shared_ptr<StreamObserver>> v)
      : v_(std::move(v)) {}
  void OnAttemptStarted(const AttemptInfo& i) override {
    for (auto& o : v_) o->OnAttemptStarted(i);
  }
  void OnFirstMessage(const AttemptInfo& i, absl::Duration d) override {
    for (auto& o : v_) o->OnFirstMessage(i, d);
  }
  void OnAttemptEnded(const AttemptInfo& i, const absl::Status& s, EndClass c,
                      bool by_client) override {
    for (auto& o : v_) o->OnAttemptEnded(i, s, c, by_client);
  }
  void OnDuplicateDropped(std::uint64_t s, std::uint64_t l) override {
    for (auto& o : v_) o->OnDuplicateDropped(s, l);
  }
  void OnGap(std::uint64_t e, std::uint64_t g) override {
    for (auto& o : v_) o->OnGap(e, g);
  }
  void OnBackoff(absl::Duration d, const absl::Status& s) override {
    for (auto& o : v_) o->OnBackoff(d, s);
  }
  void OnRetryBudgetWait(absl::Duration d) override {
    for (auto& o : v_) o->OnRetryBudgetWait(d);
  }
  void OnGaveUp(const absl::Status& s) override {
    for (auto& o : v_) o->OnGaveUp(s);
  }
  void OnStalled(const AttemptInfo& i, absl::Duration d) override {
    for (auto& o : v_) o->OnStalled(i, d);
  }
  void OnResync(const absl::Status& why, std::uint64_t after) override {
    for (auto& o : v_) o->OnResync(why, after);
  }
  void OnConnectionDraining(std::uint64_t id, absl::string_view w) override {
    for (auto& o : v_) o->OnConnectionDraining(id, w);
  }
  void OnDrainNotice(const AttemptInfo& i) override {
    for (auto& o : v_) o->OnDrainNotice(i);
  }
  void OnMessageDelivered() override {
    for (auto& o : v_) o->OnMessageDelivered();
  }
  void OnStreamEnded(const absl::Status& s, StreamEnd how) override {
    for (auto& o : v_) o->OnStreamEnded(s, how);
  }
  void OnOutboxChanged(std::int64_t delta) override {
    for (auto& o : v_) o->OnOutboxChanged(delta);
  }
  void OnWriteRefused() override {
    for (auto& o : v_) o->OnWriteRefused();
  }

 private:
  const std::vector<std::shared_ptr<StreamObserver>> v_;
};

class ConnectionFanOut final : public ConnectionObserver {
 public:
  explicit ConnectionFanOut(std::vector<std::shared_ptr<ConnectionObserver>> v)
      : v_(std::move(v)) {}
  void OnConnectionOpened(std::uint64_t id, absl::string_view t) override {
    for (auto& o : v_) o->OnConnectionOpened(id, t);
  }
  void OnConnectionReady(std::uint64_t id) override {
    for (auto& o : v_) o->OnConnectionReady(id);
  }
  void OnConnectionDraining(std::uint64_t id, absl::string_view w) override {
    for (auto& o : v_) o->OnConnectionDraining(id, w);
  }
  void OnConnectionSuspect(std::uint64_t id, const absl::Status& s) override {
    for (auto& o : v_) o->OnConnectionSuspect(id, s);
  }
  void OnConnectionRestored(std::uint64_t id) override {
    for (auto& o : v_) o->OnConnectionRestored(id);
  }
  void OnConnectionRetired(std::uint64_t id) override {
    for (auto& o : v_) o->OnConnectionRetired(id);
  }
  void OnEndpointAdded(absl::string_view a) override {
    for (auto& o : v_) o->OnEndpointAdded(a);
  }
  void OnEndpointMissing(absl::string_view a) override {
    for (auto& o : v_) o->OnEndpointMissing(a);
  }
  void OnEndpointRemoved(absl::string_view a, absl::string_view w) override {
    for (auto& o : v_) o->OnEndpointRemoved(a, w);
  }
  void OnEndpointsError(const absl::Status& s) override {
    for (auto& o : v_) o->OnEndpointsError(s);
  }
  void OnEndpointBalancesCalls(absl::string_view a,
                               absl::string_view w) override {
    for (auto& o : v_) o->OnEndpointBalancesCalls(a, w);
  }

 private:
  const std::vector<std::shared_ptr<ConnectionObserver>> v_;
};

class BreakerFanOut final : public BreakerObserver {
 public:
  explicit BreakerFanOut(std::vector<std::shared_ptr<BreakerObserver>> v)
      : v_(std::move(v)) {}
  void OnStateChange(absl::string_view b, BreakerState f, BreakerState t,
                     const BreakerCounts& c) override {
    for (auto& o : v_) o->OnStateChange(b, f, t, c);
  }
  void OnRecorded(absl::string_view b, Outcome out,
                  const BreakerCounts& c) override {
    for (auto& o : v_) o->OnRecorded(b, out, c);
  }
  void OnNotPermitted(absl::string_view b, const BreakerCounts& c) override {
    for (auto& o : v_) o->OnNotPermitted(b, c);
  }

 private:
  const std::vector<std::shared_ptr<BreakerObserver>> v_;
};

}  // namespace

std::shared_ptr<StreamObserver> CombineObservers(
    std::vector<std::shared_ptr<StreamObserver>> observers) {
  return std::make_shared<StreamFanOut>(NonNull(std::move(observers)));
}
std::shared_ptr<ConnectionObserver> CombineObservers(
    std::vector<std::shared_ptr<ConnectionObserver>> observers) {
  return std::make_shared<ConnectionFanOut>(NonNull(std::move(observers)));
}
std::shared_ptr<BreakerObserver> CombineObservers(
    std::vector<std::shared_ptr<BreakerObserver>> observers) {
  return std::make_shared<BreakerFanOut>(NonNull(std::move(observers)));
}

}  // namespace tether
