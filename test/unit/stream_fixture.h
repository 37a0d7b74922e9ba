// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// The stream tests' shared fixture: a fake clock, a fake connection source,
// a fake transport for server streams and one for bidi streams, the options
// every test starts from, a recorder of what the app saw and an observer of
// what the stream did, and the shared message types.
//
// Everything the recorder and the observer keep is guarded by their own
// mutex: stream callbacks may run on tether's threads (a resync's), and the
// waits below end on the event or on a generous deadline, never on a sleep.
#ifndef TETHER_TEST_UNIT_STREAM_FIXTURE_H_
#define TETHER_TEST_UNIT_STREAM_FIXTURE_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "test/support/one_shot.h"
#include "tether/observer.h"
#include "tether/position.h"
#include "tether/reconnecting_bidi_stream.h"
#include "tether/reconnecting_stream.h"
#include "tether/stream_options.h"
#include "tether/testing/fake_bidi_transport.h"
#include "tether/testing/fake_clock.h"
#include "tether/testing/fake_transport.h"

namespace tether {
namespace stream_test {

// How long a test waits for an event from another thread before it fails.
inline constexpr absl::Duration kWaitLimit = absl::Seconds(30);

// A server stream's request: where it resumes.
struct Req {
  std::uint64_t after = 0;
  bool has_cursor = false;
  std::string cursor;
};

// A response of either kind: `seq` 0 carries no position (an
// acknowledgement, a control message); `ack` acknowledges the app's write
// with that id (bidi streams).
struct Resp {
  std::uint64_t seq = 0;
  std::uint64_t ack = 0;
};
inline Resp M(std::uint64_t seq) { return Resp{seq, 0}; }
inline Resp Ack(std::uint64_t id) { return Resp{0, id}; }

// A bidi stream's request: an open request (resuming after `from`) or the
// app's write `id`.
struct BidiReq {
  std::string op;  // "open" or "w"
  std::uint64_t id = 0;
  std::uint64_t from = 0;
  bool operator==(const BidiReq& o) const {
    return op == o.op && id == o.id && from == o.from;
  }
};
inline BidiReq Open(std::uint64_t from) { return BidiReq{"open", 0, from}; }
inline BidiReq W(std::uint64_t id) { return BidiReq{"w", id, 0}; }
inline std::ostream& operator<<(std::ostream& os, const BidiReq& r) {
  return os << r.op << r.id
            << (r.op == "open" ? "@" + std::to_string(r.from) : "");
}

using Stream = ReconnectingStream<Req, Resp>;
using BidiStream = ReconnectingBidiStream<BidiReq, Resp>;
using Transport = fakes::FakeTransport<Req, Resp>;
using BidiTransport = fakes::FakeBidiTransport<BidiReq, Resp>;

// What the app saw: the positions of delivered messages and the end.
class Recorder {
 public:
  void Message(const Resp& r) {
    std::lock_guard<std::mutex> l(mu_);
    ++messages_;
    if (r.seq != 0) got_.push_back(r.seq);
    if (r.ack != 0) acks_.push_back(r.ack);
  }
  void Done(const absl::Status& s) {
    std::lock_guard<std::mutex> l(mu_);
    done_.push_back(s);
    cv_.notify_all();
  }
  // The positions of the messages that had one, in delivery order.
  std::vector<std::uint64_t> got() {
    std::lock_guard<std::mutex> l(mu_);
    return got_;
  }
  // The writes acknowledged to the app (`ack`), in delivery order.
  std::vector<std::uint64_t> acks() {
    std::lock_guard<std::mutex> l(mu_);
    return acks_;
  }
  // Every message delivered, with a position or not.
  std::size_t messages() {
    std::lock_guard<std::mutex> l(mu_);
    return messages_;
  }
  std::vector<absl::Status> done() {
    std::lock_guard<std::mutex> l(mu_);
    return done_;
  }
  // Waits (bounded) for the end; false when it did not come.
  bool WaitDone() {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, absl::ToChronoNanoseconds(kWaitLimit),
                        [this] { return !done_.empty(); });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::uint64_t> got_;
  std::vector<std::uint64_t> acks_;
  std::size_t messages_ = 0;
  std::vector<absl::Status> done_;
};

// What the stream did: attempts started and ended, backoffs, duplicates,
// gaps, resyncs, give-ups, drain notices.
class Events final : public StreamObserver {
 public:
  void OnDuplicateDropped(std::uint64_t seq, std::uint64_t) override {
    std::lock_guard<std::mutex> l(mu_);
    duplicates_.push_back(seq);
  }
  void OnGap(std::uint64_t expected, std::uint64_t got) override {
    std::lock_guard<std::mutex> l(mu_);
    gaps_.push_back({expected, got});
  }
  void OnGaveUp(const absl::Status&) override {
    std::lock_guard<std::mutex> l(mu_);
    ++gave_up_;
  }
  void OnStalled(const AttemptInfo& info, absl::Duration silent) override {
    std::lock_guard<std::mutex> l(mu_);
    stalled_.push_back({info.connection_id, silent});
  }
  void OnAttemptStarted(const AttemptInfo& info) override {
    std::lock_guard<std::mutex> l(mu_);
    started_.push_back(info);
  }
  void OnBackoff(absl::Duration d, const absl::Status&) override {
    std::lock_guard<std::mutex> l(mu_);
    backoffs_.push_back(d);
  }
  void OnAttemptEnded(const AttemptInfo&, const absl::Status& status,
                      EndClass cls, bool by_client) override {
    std::lock_guard<std::mutex> l(mu_);
    ended_.push_back(Ended{status, cls, by_client});
  }
  void OnResync(const absl::Status&, std::uint64_t after) override {
    std::lock_guard<std::mutex> l(mu_);
    resyncs_.push_back(after);
  }
  void OnDrainNotice(const AttemptInfo&) override {
    std::lock_guard<std::mutex> l(mu_);
    ++notices_;
  }

  struct Ended {
    absl::Status status;
    EndClass cls;
    bool by_client;
  };
  std::vector<AttemptInfo> started() {
    std::lock_guard<std::mutex> l(mu_);
    return started_;
  }
  std::vector<AttemptReason> reasons() {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<AttemptReason> out;
    for (const AttemptInfo& i : started_) out.push_back(i.reason);
    return out;
  }
  std::vector<absl::Duration> backoffs() {
    std::lock_guard<std::mutex> l(mu_);
    return backoffs_;
  }
  std::vector<Ended> ended() {
    std::lock_guard<std::mutex> l(mu_);
    return ended_;
  }
  std::vector<std::uint64_t> resyncs() {
    std::lock_guard<std::mutex> l(mu_);
    return resyncs_;
  }
  std::vector<std::uint64_t> duplicates() {
    std::lock_guard<std::mutex> l(mu_);
    return duplicates_;
  }
  std::vector<std::pair<std::uint64_t, std::uint64_t>> gaps() {
    std::lock_guard<std::mutex> l(mu_);
    return gaps_;
  }
  int gave_up() {
    std::lock_guard<std::mutex> l(mu_);
    return gave_up_;
  }
  // Drain notices heard.
  int notices() {
    std::lock_guard<std::mutex> l(mu_);
    return notices_;
  }
  // (connection, silence) of every stall.
  std::vector<std::pair<std::uint64_t, absl::Duration>> stalled() {
    std::lock_guard<std::mutex> l(mu_);
    return stalled_;
  }
  int ended_by_client() {
    std::lock_guard<std::mutex> l(mu_);
    int n = 0;
    for (const Ended& e : ended_) n += e.by_client ? 1 : 0;
    return n;
  }

 private:
  std::mutex mu_;
  std::vector<AttemptInfo> started_;
  std::vector<absl::Duration> backoffs_;
  std::vector<Ended> ended_;
  std::vector<std::uint64_t> resyncs_;
  std::vector<std::uint64_t> duplicates_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> gaps_;
  int gave_up_ = 0;
  int notices_ = 0;
  std::vector<std::pair<std::uint64_t, absl::Duration>> stalled_;
};

// A one-shot event with a bounded wait (std::mutex: TSan sees it).
using Event = testsupport::OneShot;

// The two kinds of stream, for a rule that holds for both: a typed test on
// `EachKind` over `StreamKinds` runs once with each kind's fake transport
// and default spec (`SeqSpec`, `BidiSpec`).
struct ServerKind {
  using Fake = Transport;
};
struct BidiKind {
  using Fake = BidiTransport;
};

class StreamFixture : public ::testing::Test {
 protected:
  StreamFixture()
      : clock_(std::make_shared<fakes::FakeClock>()),
        source_(std::make_shared<fakes::FakeConnectionSource>()),
        transport_(std::make_shared<Transport>(source_, clock_)),
        bidi_(std::make_shared<BidiTransport>(source_, clock_)),
        events_(std::make_shared<Events>()),
        rec_(std::make_shared<Recorder>()) {
    options_.clock = clock_;
    options_.observer = events_;
    options_.random_seed = 7;
    options_.reopen_after_progress_jitter = absl::ZeroDuration();
  }

  void TearDown() override { clock_->RunDue(); }

  // Sequence numbers (`seq` 0: the message has none, which fails the
  // stream), resumed after the last delivered one.
  Stream::Spec SeqSpec() {
    Stream::Spec spec;
    spec.attempt_factory = transport_;
    spec.sequence_of = [](const Resp& r) -> absl::optional<std::uint64_t> {
      if (r.seq == 0) return absl::nullopt;
      return r.seq;
    };
    spec.resume_after = [](Req& r, std::uint64_t after) { r.after = after; };
    return spec;
  }

  // Opens with `Open(last delivered)`, acknowledges FIFO by id, positions
  // from `seq` (0: none).
  BidiStream::Spec BidiSpec() {
    BidiStream::Spec spec;
    spec.attempt_factory = bidi_;
    spec.open_requests = [](const ResumeState& s) {
      return std::vector<BidiReq>{Open(s.has_position ? s.last : 0)};
    };
    spec.acknowledges = [](const BidiReq& w, const Resp& r) {
      return r.ack == w.id;
    };
    spec.position_of = [](const Resp& r) {
      return r.seq == 0 ? Position::None() : Position::Item(r.seq);
    };
    return spec;
  }

  // Starts a stream whose messages and end go to `rec` (the fixture's by
  // default).
  std::unique_ptr<Stream> Start(Stream::Spec spec,
                                std::shared_ptr<Recorder> rec = nullptr) {
    if (!rec) rec = rec_;
    auto s = Stream::Start(
        source_, std::move(spec), options_,
        [rec](Resp&& r) { rec->Message(r); },
        [rec](const absl::Status& st) { rec->Done(st); });
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }
  std::unique_ptr<BidiStream> StartBidi(BidiStream::Spec spec) {
    std::shared_ptr<Recorder> rec = rec_;
    auto s = BidiStream::Start(
        source_, std::move(spec), options_,
        [rec](Resp&& r) { rec->Message(r); },
        [rec](const absl::Status& st) { rec->Done(st); });
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }

  // Why a stream with `spec` does not start (OK when it starts: a spec
  // check then fails on its expectation).
  absl::Status StartError(Stream::Spec spec) {
    return Stream::Open(source_, std::move(spec), options_).status();
  }
  absl::Status StartError(BidiStream::Spec spec) {
    return BidiStream::Open(source_, std::move(spec), options_).status();
  }

  std::vector<std::uint64_t> got() { return rec_->got(); }
  std::vector<absl::Status> done() { return rec_->done(); }

  // Each kind's fake transport, and a stream of that kind with its default
  // spec (see `EachKind`).
  std::shared_ptr<Transport> FakeOf(ServerKind) { return transport_; }
  std::shared_ptr<BidiTransport> FakeOf(BidiKind) { return bidi_; }
  std::unique_ptr<Stream> StartOf(ServerKind) { return Start(SeqSpec()); }
  std::unique_ptr<BidiStream> StartOf(BidiKind) {
    return StartBidi(BidiSpec());
  }

  std::shared_ptr<fakes::FakeClock> clock_;
  std::shared_ptr<fakes::FakeConnectionSource> source_;
  std::shared_ptr<Transport> transport_;
  std::shared_ptr<BidiTransport> bidi_;
  std::shared_ptr<Events> events_;
  std::shared_ptr<Recorder> rec_;
  ReconnectingStreamOptions options_;
};

// The fixture for a typed test over both kinds of stream:
//   template <class Kind> class PushbackTest : public EachKind<Kind> {};
//   TYPED_TEST_SUITE(PushbackTest, StreamKinds, StreamKindNames);
//   TYPED_TEST(PushbackTest, X) { this->fake()->Expect(...); ... }
template <class Kind>
class EachKind : public StreamFixture {
 protected:
  using Script = typename Kind::Fake::Script;
  std::shared_ptr<typename Kind::Fake> fake() { return FakeOf(Kind()); }
  auto StartDefault() { return StartOf(Kind()); }
};

// A stream whose every end with OUT_OF_RANGE (a compaction) asks `resync`.
inline Stream::Spec WithResync(Stream::Spec spec,
                               std::function<void(ResyncDone)> resync) {
  spec.resync_on_end = [](const absl::Status& s) {
    return s.code() == absl::StatusCode::kOutOfRange;
  };
  spec.resync = std::move(resync);
  return spec;
}

using StreamKinds = ::testing::Types<ServerKind, BidiKind>;

// "Server" and "Bidi" in the test names.
struct StreamKindNames {
  template <class Kind>
  static std::string GetName(int /*index*/) {
    return std::is_same<Kind, BidiKind>::value ? "Bidi" : "Server";
  }
};

}  // namespace stream_test
}  // namespace tether

#endif  // TETHER_TEST_UNIT_STREAM_FIXTURE_H_
