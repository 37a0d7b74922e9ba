// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// The simulated application: streams of every kind the API has, each with
// a `DeliveryChecker` and an oracle that knows the server's log.
#ifndef TETHER_TEST_SIM_CLIENTS_H_
#define TETHER_TEST_SIM_CLIENTS_H_

#include <cstdint>
#include <vector>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "test/sim/feed.h"
#include "test/sim/network.h"
#include "test/sim/world.h"
#include "tether/reconnecting_bidi_stream.h"
#include "tether/reconnecting_stream.h"
#include "tether/stream_options.h"
#include "tether/testing/delivery_checker.h"

namespace tether {
namespace sim {

enum class StreamKind {
  kDense,   // sequence numbers 1, 2, 3, ...
  kSparse,  // revisions global to a cluster, with progress notices
  kBatch,   // batches of items, trimmed on overlap
  kCursor,  // opaque cursors
  kBidi,    // a bidi stream whose writes the server acknowledges
};
const char* StreamKindName(StreamKind k);

// How the app around one stream behaves.
struct AppBehavior {
  // Chance that a message callback advances simulated time (a slow
  // callback: other events, of this stream too, run meanwhile).
  double slow_callback = 0;
  // Chance, per message, that the callback cancels or destroys its own
  // stream (re-entrant).
  double reentrant_end = 0;
  // Chance that the app's observer takes a few simulated milliseconds in
  // `OnAttemptStarted` (other events run meanwhile, as on gRPC's other
  // threads).
  double slow_observer = 0;
  // Bidi: the mean time between the app's writes.
  absl::Duration write_every = absl::Seconds(3);
  // Bidi: chance, per turn of the app's write loop, that it writes a burst
  // (a producer flushing its queue: up to 10 writes back to back, until one
  // is refused) instead of one write. A burst's acknowledgements come back
  // together, so all of them may land between a refusal and the app's
  // `SetOnWritable`.
  double write_burst = 0;
  // Streams with positions resync when the store compacted their log past
  // their resume position: the app's listing answers at once, or after a
  // simulated while (chance `resync_slow`), or hangs (`resync_hang`): it
  // holds its worker of the resync pool past the stream's deadline, then
  // gives up.
  double resync_slow = 0;
  double resync_hang = 0;
};

// One stream of the app, and the checks on it.
//
// The oracle: every message delivered is the next entry of the feed's log
// after the last delivered one (a batch may come trimmed at it; progress
// notices are skipped unless delivered), so nothing is lost, repeated or
// invented. A stream ends only when the app ends it (or, in an outage,
// within its budget). After the fleet heals, `CaughtUp` says whether it
// has everything the log had.
class Client {
 public:
  // `options.observer`, if set, is the app's own observer (a logger); the
  // stream tells it after the simulation's tracer.
  Client(World& world, Network& network,
         std::shared_ptr<ConnectionSource> source, Feed& feed, StreamKind kind,
         AppBehavior app, ReconnectingStreamOptions options);
  ~Client();

  // False (and a failure in the world) when the stream refused to start.
  bool Start();
  // The app's own end of the stream.
  void Cancel();
  void Destroy();
  // The app writes (bidi): one write or a burst; schedules the next turn.
  void WriteLoop();
  // The app writes no more (the run is winding down).
  void StopWriting() { writing_stopped_ = true; }

  // Everything in the log delivered (bidi: and every write acknowledged).
  bool CaughtUp(std::string* why) const;
  // The checker's verdict.
  absl::Status CheckerStatus() const;
  bool ended() const { return done_ || destroyed_; }
  bool live() const { return !ended(); }
  // The app cancelled or destroyed it.
  bool app_ended() const { return cancelled_ || destroyed_; }
  StreamKind kind() const { return kind_; }
  std::uint64_t delivered() const { return delivered_; }
  // The app's acknowledgement time of write `id` (InfiniteFuture: none).
  absl::Time AckedAt(std::uint64_t id) const;
  // An outage is on: ends within the budget are expected.
  void set_outage(bool on) { outage_ = on; }
  // The server asked not to retry (or to wait past the budget): the
  // stream may end.
  void AllowEnd() { end_allowed_ = true; }
  // ... and must: `why` names the end; any new attempt is a violation.
  void ExpectEnd(std::string why);
  // A call of this stream started (the network's word).
  void OnCall(Call& call);
  // Bidi: attempt `attempt` of the stream started `call`.
  void OnBidiCall(std::uint64_t attempt, const std::shared_ptr<Call>& call);
  // Another call of this stream than `call` is still running, or the
  // stream has started an attempt whose call has not started yet.
  bool OtherCallRunning(const Call& call) const;
  // The stream's observer saw an attempt start.
  void OnAttemptStarted() { ++attempts_started_; }
  std::uint64_t latest_call() const { return latest_call_; }
  // The stream's observer saw an attempt end that asks for a resync.
  void OnResyncAsked();
  // The stream's observer saw a resync to `after`: the next delivery may
  // skip to the log's first entry past it.
  void OnResynced(std::uint64_t after);
  absl::Time done_at() const { return done_at_; }
  absl::Status done_status() const { return done_status_; }
  absl::Time last_progress() const { return last_progress_; }

 private:
  using Stream = ReconnectingStream<SimReq, SimMsg>;
  using BidiStream = ReconnectingBidiStream<SimWrite, SimMsg>;
  class Factory;
  class BidiFactory;
  class Tracer;

  // Starts `out` with `checker` around its callbacks and observer.
  template <class StreamT, class Checker>
  absl::Status StartChecked(typename StreamT::Spec spec,
                            const Checker& checker,
                            std::unique_ptr<StreamT>& out);
  void OnMessage(SimMsg&& m);
  void OnDone(const absl::Status& status);
  // Checks `m` against the log; false (and a failure) when it is not the
  // next entry.
  bool Expect(const SimMsg& m);
  bool Skippable(const SimMsg& e) const;
  // One app write; on a refusal, asks for `on_writable` (maybe after a
  // while). False when the stream was destroyed meanwhile.
  bool WriteOnce();
  // The writer writes: once the stream's newest attempt has had its call
  // open for kWriterBound, every write accepted kWriterBound ago has
  // reached the server (the newest attempt is the writer; an older one,
  // even one whose start ran last, never takes the writes from it).
  void CheckWriter();
  static constexpr absl::Duration kWriterBound = absl::Seconds(5);
  std::string Name() const;
  // The app's `resync`: lists the log and answers with its head.
  void Listing(ResyncDone done);

  World& world_;
  Network& network_;
  std::shared_ptr<ConnectionSource> source_;
  Feed& feed_;
  const StreamKind kind_;
  const AppBehavior app_;
  ReconnectingStreamOptions options_;
  bool deliver_progress_ = false;

  std::unique_ptr<Stream> stream_;
  std::unique_ptr<BidiStream> bidi_;
  std::unique_ptr<fakes::DeliveryChecker<SimMsg>> checker_;
  std::unique_ptr<fakes::BidiDeliveryChecker<SimWrite, SimMsg>> bidi_checker_;

  // The oracle.
  std::size_t expect_ = 0;  // index of the next log entry due
  bool has_last_ = false;
  std::uint64_t last_ = 0;
  std::uint64_t delivered_ = 0;
  // A resync to this position that no delivery has passed yet.
  bool resync_pending_ = false;
  std::uint64_t resync_after_ = 0;
  bool listing_hung_ = false;  // the stream must end within its bound
  // A resync was asked and its listing not called yet (it waits for a
  // worker of the resync pool, which the runner checks are all taken), and
  // how long the last listing waited to be called.
  bool resync_waiting_ = false;
  absl::Time resync_asked_at_;
  absl::Duration listing_waited_ = absl::ZeroDuration();
  absl::Time last_progress_;
  bool in_callback_ = false;
  bool done_ = false;
  bool destroyed_ = false;
  bool cancelled_ = false;
  bool outage_ = false;
  bool end_allowed_ = false;
  std::string end_expected_;  // why the stream must end; "" when it need not
  std::uint64_t latest_call_ = 0;
  std::uint64_t attempts_started_ = 0;  // as the observer saw them
  std::uint64_t calls_started_ = 0;     // as the network saw them
  std::vector<std::weak_ptr<Call>> calls_;
  absl::Time done_at_ = absl::InfiniteFuture();
  absl::Status done_status_;
  // Bidi.
  std::uint64_t next_write_ = 1;
  bool blocked_ = false;  // a Write was refused for a full outbox
  bool writing_stopped_ = false;
  std::vector<absl::Time> acked_at_;  // by write id
  std::vector<absl::Time> written_at_;  // by write id: accepted by Write
  std::uint64_t oldest_unsent_ = 1;  // no write before it is unsent
  std::uint64_t newest_attempt_ = 0;
  std::weak_ptr<Call> newest_call_;  // the call of the newest attempt
};

}  // namespace sim
}  // namespace tether

#endif  // TETHER_TEST_SIM_CLIENTS_H_
