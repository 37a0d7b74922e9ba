// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// micro_bench: Google Benchmark microbenchmarks of tether's hot paths, no
// network:
//   BM_StreamDeliverPerMessage  one message through a ReconnectingStream's
//                               core: sequence_of, the sequence gate, the
//                               read-ahead queue and on_message (attempts
//                               come from an in-process factory that hands
//                               messages straight to the stream);
//   BM_DeliveryQueuePushDrain   the read-ahead queue alone;
//   BM_SequenceGateAdmit        the sequence (position) gate alone, in
//                               order;
//   BM_SequenceGateDuplicate    a duplicate dropped by the gate;
//   BM_BreakerAcquireRecord     CircuitBreaker::TryAcquire + Record(success);
//   BM_BreakerAcquireRecordContended  the same from several threads.
//
//   micro_bench [--benchmark_filter=...] [--benchmark_format=json]
//
// scripts/bench runs it with --benchmark_min_time=0.2.
#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "benchmark/benchmark.h"
#include "seqstream.pb.h"
#include "tether/circuit_breaker.h"
#include "tether/internal/delivery_queue.h"
#include "tether/internal/message_store.h"
#include "tether/internal/position_gate.h"
#include "tether/position.h"
#include "tether/reconnecting_stream.h"

namespace {

using tether::test::Event;
using tether::test::WatchRequest;
using Stream = tether::ReconnectingStream<WatchRequest, Event>;

// A source with one connection that never drains.
class OneConnection final : public tether::ConnectionSource {
 public:
  absl::StatusOr<tether::ConnectionPick> Pick(
      std::weak_ptr<DrainListener>) override {
    tether::ConnectionPick pick;
    pick.connection_id = 1;
    return pick;
  }
  void Release(std::uint64_t, const std::weak_ptr<DrainListener>&) override {}
  void ReportDrainEnd(std::uint64_t, const absl::Status&) override {}
  void ReportUnannouncedEnd(std::uint64_t, const EndReport&) override {}
};

class NoopAttempt final : public tether::Attempt {
 public:
  void Resume() override {}
  void Cancel() override {}
};

// Hands the benchmark the attempt's listener, so that it can deliver
// messages the way a gRPC reactor's OnReadDone does.
class DirectFactory final
    : public tether::AttemptFactory<WatchRequest, Event> {
 public:
  std::shared_ptr<tether::Attempt> StartAttempt(
      const tether::ConnectionPick&, const tether::AttemptInfo&,
      const WatchRequest&,
      std::shared_ptr<tether::AttemptListener<Event>> listener) override {
    listener_ = std::move(listener);
    return std::make_shared<NoopAttempt>();
  }
  // Ends the attempt (as gRPC would after a cancel).
  void Finish() {
    if (listener_) listener_->OnEnd(absl::CancelledError("bench"), {});
    listener_.reset();
  }
  std::shared_ptr<tether::AttemptListener<Event>> listener_;
};

void BM_StreamDeliverPerMessage(benchmark::State& state) {
  auto factory = std::make_shared<DirectFactory>();
  Stream::Spec spec;
  spec.attempt_factory = factory;
  spec.request.set_key("bench");
  spec.sequence_of = [](const Event& e) {
    return absl::optional<std::uint64_t>(e.seq());
  };
  spec.resume_after = [](WatchRequest& r, std::uint64_t s) {
    r.set_after_seq(s);
  };
  std::int64_t delivered = 0;
  auto stream = Stream::Start(
      std::shared_ptr<tether::ConnectionSource>(
          std::make_shared<OneConnection>()),
      std::move(spec), tether::ReconnectingStreamOptions(),
      [&delivered](Event&& e) { benchmark::DoNotOptimize(delivered += e.seq() != 0); },
      [](const absl::Status&) {});
  if (!stream.ok() || !factory->listener_) {
    state.SkipWithError("stream did not start");
    return;
  }
  std::uint64_t seq = 0;
  for (auto _ : state) {
    Event e;
    e.set_seq(++seq);
    e.set_server("r0");
    benchmark::DoNotOptimize(factory->listener_->OnMessage(std::move(e)));
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["delivered"] = static_cast<double>(delivered);
  (*stream)->Cancel();
  factory->Finish();
  stream->reset();
}
BENCHMARK(BM_StreamDeliverPerMessage);

void BM_DeliveryQueuePushDrain(benchmark::State& state) {
  std::int64_t delivered = 0;
  struct NoOwner final : tether::internal::DeliveryQueueOwner {
    void OnQueueSpace() override {}
    void OnCallbackError(absl::Status) override {}
  } owner;
  tether::internal::TypedMessageStore<Event> store(
      [&delivered](Event&& e) { delivered += e.seq() != 0; });
  tether::internal::DeliveryQueue queue(
      32, &store, [](const absl::Status&) {}, &owner);
  std::uint64_t seq = 0;
  for (auto _ : state) {
    Event e;
    e.set_seq(++seq);
    queue.Push(&e);
    queue.Drain();
  }
  state.SetItemsProcessed(state.iterations());
  benchmark::DoNotOptimize(delivered);
  queue.Close(absl::OkStatus());
  queue.Drain();
}
BENCHMARK(BM_DeliveryQueuePushDrain);

tether::internal::PositionGate MakeGate(absl::optional<std::uint64_t> last) {
  return tether::internal::PositionGate(last, tether::PositionSpacing::kDense,
                                        tether::GapPolicy::kDeliverAndReport,
                                        /*can_trim=*/false);
}

void BM_SequenceGateAdmit(benchmark::State& state) {
  tether::internal::PositionGate gate = MakeGate(absl::nullopt);
  tether::internal::PositionGate::Cursor cursor;
  std::uint64_t seq = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(gate.Admit(
        cursor, tether::Position::Item(++seq), absl::nullopt, 1));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SequenceGateAdmit);

void BM_SequenceGateDuplicate(benchmark::State& state) {
  tether::internal::PositionGate gate = MakeGate(std::uint64_t{1000000});
  tether::internal::PositionGate::Cursor cursor;
  for (auto _ : state) {
    cursor = tether::internal::PositionGate::Cursor();
    benchmark::DoNotOptimize(
        gate.Admit(cursor, tether::Position::Item(5), absl::nullopt, 2));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SequenceGateDuplicate);

std::shared_ptr<tether::CircuitBreaker> MakeBreaker() {
  tether::CircuitBreakerOptions o;
  o.name = "bench";
  return tether::CircuitBreaker::Create(o).value();
}

void BM_BreakerAcquireRecord(benchmark::State& state) {
  static std::shared_ptr<tether::CircuitBreaker> breaker;
  if (state.thread_index() == 0) breaker = MakeBreaker();
  for (auto _ : state) {
    absl::StatusOr<tether::CircuitBreaker::Permit> permit =
        breaker->TryAcquire();
    if (permit.ok()) {
      breaker->Record(*std::move(permit), tether::Outcome::kSuccess);
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_BreakerAcquireRecord);
BENCHMARK(BM_BreakerAcquireRecord)
    ->Name("BM_BreakerAcquireRecordContended")
    ->Threads(4)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
