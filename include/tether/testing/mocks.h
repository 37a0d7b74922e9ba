// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// gMock mocks of tether's public interfaces, for tests of code that uses
// tether. Part of the `tether::tether_mocks` target (header-only; links
// GoogleMock):
//
//   find_package(tether CONFIG REQUIRED COMPONENTS mocks)
//   target_link_libraries(my_test PRIVATE tether::tether tether::tether_mocks
//                                         GTest::gmock_main)
//
// The fakes that go with them: `FakeClock` (tether/testing/fake_clock.h),
// `FakeConnectionSource` and `FakeTransport` (tether/testing/fake_transport.h)
// and the matchers in tether/testing/matchers.h.
//
// `CircuitBreaker` is a concrete class, not an interface, so it has no mock:
// tests use a real breaker on a `FakeClock` (it is deterministic), trip it
// with `SetForcedOpen(true)` or with recorded failures, and watch it with a
// `MockBreakerObserver`.
//
// Thread safety: gMock mocks may be called from any thread. Set every
// expectation before the code under test can call the mock (before starting
// the stream, pool or breaker), as gMock requires.
#ifndef TETHER_TESTING_MOCKS_H_
#define TETHER_TESTING_MOCKS_H_

#include <cstdint>
#include <memory>
#include <utility>

#include "absl/random/bit_gen_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "tether/backoff.h"
#include "tether/circuit_breaker.h"
#include "tether/classification.h"
#include "tether/connection_pool.h"
#include "tether/observer.h"

namespace tether {
namespace fakes {

// A `StreamObserver` whose every method is mocked.
//
// Pass it as `ReconnectingStreamOptions::observer`. Uninteresting calls are
// allowed by default (wrap it in `::testing::NiceMock` to silence the
// warnings, or `::testing::StrictMock` to forbid them). The stream calls it
// from the thread that drives the fake (or from gRPC threads in real use);
// with `FakeTransport` and `FakeClock` that is the test's own thread, so
// `::testing::InSequence` orders are deterministic.
//
//   auto observer = std::make_shared<NiceMock<MockStreamObserver>>();
//   EXPECT_CALL(*observer, OnDuplicateDropped(3, 3));
//   options.observer = observer;
class MockStreamObserver : public StreamObserver {
 public:
  MOCK_METHOD(void, OnAttemptStarted, (const AttemptInfo& info), (override));
  MOCK_METHOD(void, OnFirstMessage,
              (const AttemptInfo& info, absl::Duration since_start),
              (override));
  MOCK_METHOD(void, OnAttemptEnded,
              (const AttemptInfo& info, const absl::Status& status,
               EndClass classified, bool by_client),
              (override));
  MOCK_METHOD(void, OnDuplicateDropped,
              (std::uint64_t seq, std::uint64_t last_delivered), (override));
  MOCK_METHOD(void, OnGap, (std::uint64_t expected, std::uint64_t got),
              (override));
  MOCK_METHOD(void, OnBackoff,
              (absl::Duration delay, const absl::Status& last_status),
              (override));
  MOCK_METHOD(void, OnRetryBudgetWait, (absl::Duration added), (override));
  MOCK_METHOD(void, OnGaveUp, (const absl::Status& status), (override));
  MOCK_METHOD(void, OnDrainNotice, (const AttemptInfo& info), (override));
  MOCK_METHOD(void, OnConnectionDraining,
              (std::uint64_t connection_id, absl::string_view why), (override));
};

// A `BackoffPolicy` whose every method is mocked, `Clone` included.
//
// A stream never uses the policy it is given: it calls `Clone()` once and
// owns the copy. Two ways to test with that:
//
//  1. Keep one mock and let every clone forward to it (usual):
//
//       auto backoff = std::make_shared<StrictMock<MockBackoffPolicy>>();
//       EXPECT_CALL(*backoff, OnFailure(_))
//           .WillOnce(Return(absl::Seconds(3)));
//       options.backoff = MockBackoffPolicy::Prototype(backoff);
//
//     `Prototype` returns a policy whose clones call `OnFailure` and `Reset`
//     on `backoff`; the mock's own `Clone` is never called. With several
//     streams on one prototype, all their calls reach the same mock.
//
//  2. Mock `Clone` as well, handing each stream its own mock:
//
//       auto proto = std::make_shared<MockBackoffPolicy>();
//       auto clone = std::make_unique<StrictMock<MockBackoffPolicy>>();
//       MockBackoffPolicy* clone_ptr = clone.get();  // owned by the stream
//       EXPECT_CALL(*proto, Clone())
//           .WillOnce(Return(ByMove(std::move(clone))));
//       options.backoff = proto;
//
//     A `Clone` without an expectation returns null, which the stream
//     cannot use: always set one in this style.
//
// Thread safety: as any gMock mock. The stream calls its clone under its own
// lock: actions must not call back into the stream.
class MockBackoffPolicy : public BackoffPolicy {
 public:
  MOCK_METHOD(std::unique_ptr<BackoffPolicy>, Clone, (), (const, override));
  MOCK_METHOD(absl::Duration, OnFailure, (absl::BitGenRef gen), (override));
  MOCK_METHOD(void, Reset, (), (override));

  // A prototype for `ReconnectingStreamOptions::backoff` whose clones (and
  // the clones of those) forward `OnFailure` and `Reset` to `mock`, which
  // they keep alive. `mock` must not be null.
  static std::shared_ptr<const BackoffPolicy> Prototype(
      std::shared_ptr<MockBackoffPolicy> mock);
};

namespace internal_mocks {

// The policy `MockBackoffPolicy::Prototype` hands out.
class ForwardingBackoff final : public BackoffPolicy {
 public:
  explicit ForwardingBackoff(std::shared_ptr<MockBackoffPolicy> mock)
      : mock_(std::move(mock)) {}
  std::unique_ptr<BackoffPolicy> Clone() const override {
    return std::make_unique<ForwardingBackoff>(mock_);
  }
  absl::Duration OnFailure(absl::BitGenRef gen) override {
    return mock_->OnFailure(gen);
  }
  void Reset() override { mock_->Reset(); }

 private:
  std::shared_ptr<MockBackoffPolicy> mock_;
};

}  // namespace internal_mocks

inline std::shared_ptr<const BackoffPolicy> MockBackoffPolicy::Prototype(
    std::shared_ptr<MockBackoffPolicy> mock) {
  return std::make_shared<internal_mocks::ForwardingBackoff>(std::move(mock));
}

// A `BreakerObserver` whose every method is mocked. Pass it as
// `CircuitBreakerOptions::observer`. `OnStateChange` calls are serialized;
// `OnRecorded`/`OnNotPermitted` run on the caller's thread.
//
//   auto observer = std::make_shared<NiceMock<MockBreakerObserver>>();
//   EXPECT_CALL(*observer, OnStateChange("quotes", BreakerState::kClosed,
//                                        BreakerState::kOpen, _));
//   breaker_options.observer = observer;
class MockBreakerObserver : public BreakerObserver {
 public:
  MOCK_METHOD(void, OnStateChange,
              (absl::string_view breaker, BreakerState from, BreakerState to,
               const BreakerCounts& counts),
              (override));
  MOCK_METHOD(void, OnRecorded,
              (absl::string_view breaker, Outcome outcome,
               const BreakerCounts& counts),
              (override));
  MOCK_METHOD(void, OnNotPermitted,
              (absl::string_view breaker, const BreakerCounts& counts),
              (override));
};

// A `ConnectionObserver` whose every method is mocked. Pass it as
// `ConnectionPoolOptions::observer`. Called from the pool's threads.
class MockConnectionObserver : public ConnectionObserver {
 public:
  MOCK_METHOD(void, OnConnectionOpened,
              (std::uint64_t id, absl::string_view target), (override));
  MOCK_METHOD(void, OnConnectionReady, (std::uint64_t id), (override));
  MOCK_METHOD(void, OnConnectionDraining,
              (std::uint64_t id, absl::string_view why), (override));
  MOCK_METHOD(void, OnConnectionSuspect,
              (std::uint64_t id, const absl::Status& status), (override));
  MOCK_METHOD(void, OnConnectionRetired, (std::uint64_t id), (override));
};

}  // namespace fakes

#ifdef TETHER_DEPRECATED_TESTING_NAMESPACE
// Deprecated: the fakes' old namespace, `tether::testing`. Only on request,
// since any `tether::testing` hides gMock's `::testing` from code inside
// namespace tether (`testing::Return` would then name tether's).
namespace testing = fakes;
#endif
}  // namespace tether

#endif  // TETHER_TESTING_MOCKS_H_
