// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// tether::server::DrainController against real gRPC servers on 127.0.0.1
// with tether's own client (a ConnectionPool over two servers, streams on
// the one that leaves): the order of a drain as the client sees it, for
// server and bidi streams, callback and sync handlers, 64 streams at once,
// with and without health checking; the hard bound with a handler that
// never ends; a connection that never finishes its handshake. Every wait is
// on an event with a generous deadline; nothing sleeps.
#include "tether/server/drain_controller.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "feed.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "support/tls_certs.h"
#include "test/integration/server/feed_server.h"
#include "tether/connection_pool.h"
#include "tether/observer.h"
#include "tether/reconnecting_bidi_stream.h"
#include "tether/reconnecting_stream.h"

namespace tether {
namespace testsupport {
namespace {

using ::tether::server::DrainController;
using ::tether::server::DrainOptions;
using ::tether::server::DrainReport;
using ::tether::test::FeedEvent;
using ::tether::test::FeedRequest;

// How long any single event may take before a test gives up: the events
// take milliseconds; the margin is for a loaded 2-core machine.
constexpr absl::Duration kWait = absl::Seconds(30);

using Watch = ReconnectingStream<FeedRequest, FeedEvent>;
using Chat = ReconnectingBidiStream<FeedRequest, FeedEvent>;

Position PositionOf(const FeedEvent& e) {
  // The drain notice is a control message: delivered, no position.
  return e.drain_notice() ? Position::None() : Position::Item(e.seq());
}

// The times things happened, on absl::Now(), from every thread.
class Log {
 public:
  void Connection(std::uint64_t id, absl::string_view target) {
    std::lock_guard<std::mutex> lock(mu_);
    target_of_[id] = std::string(target);
  }
  void Draining(std::uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    draining_at_.emplace(id, absl::Now());
    cv_.notify_all();
  }
  void Ready(std::uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    ready_.insert(id);
    cv_.notify_all();
  }
  struct Attempt {
    int stream = 0;
    std::uint64_t connection = 0;
    absl::Time started;
    absl::Time ended = absl::InfiniteFuture();
    absl::Status status;
    bool by_client = false;
  };
  void AttemptStarted(int stream, const AttemptInfo& info) {
    std::lock_guard<std::mutex> lock(mu_);
    Attempt& a = attempts_[{stream, info.attempt}];
    a.stream = stream;
    a.connection = info.connection_id;
    a.started = absl::Now();
  }
  void AttemptEnded(int stream, const AttemptInfo& info,
                    const absl::Status& status, bool by_client) {
    std::lock_guard<std::mutex> lock(mu_);
    Attempt& a = attempts_[{stream, info.attempt}];
    a.stream = stream;
    a.connection = info.connection_id;
    a.ended = absl::Now();
    a.status = status;
    a.by_client = by_client;
  }

  // Waits until a connection to `target` is READY.
  bool WaitReady(const std::string& target) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(kWait), [&] {
      for (std::uint64_t id : ready_) {
        if (target_of_[id] == target) return true;
      }
      return false;
    });
  }
  std::set<std::uint64_t> ConnectionsTo(const std::string& target) {
    std::lock_guard<std::mutex> lock(mu_);
    std::set<std::uint64_t> out;
    for (const auto& [id, t] : target_of_) {
      if (t == target) out.insert(id);
    }
    return out;
  }
  // When the first of `ids` was marked draining (InfiniteFuture: never).
  absl::Time FirstDraining(const std::set<std::uint64_t>& ids) {
    std::lock_guard<std::mutex> lock(mu_);
    absl::Time first = absl::InfiniteFuture();
    for (std::uint64_t id : ids) {
      auto it = draining_at_.find(id);
      if (it != draining_at_.end()) first = std::min(first, it->second);
    }
    return first;
  }
  std::vector<Attempt> Attempts() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Attempt> out;
    for (const auto& [key, a] : attempts_) out.push_back(a);
    return out;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::uint64_t, std::string> target_of_;
  std::map<std::uint64_t, absl::Time> draining_at_;
  std::set<std::uint64_t> ready_;
  std::map<std::pair<int, std::uint64_t>, Attempt> attempts_;
};

class PoolLog final : public ConnectionObserver {
 public:
  explicit PoolLog(std::shared_ptr<Log> log) : log_(std::move(log)) {}
  void OnConnectionOpened(std::uint64_t id, absl::string_view target) override {
    log_->Connection(id, target);
  }
  void OnConnectionReady(std::uint64_t id) override { log_->Ready(id); }
  void OnConnectionDraining(std::uint64_t id, absl::string_view) override {
    log_->Draining(id);
  }

 private:
  std::shared_ptr<Log> log_;
};

class StreamLog final : public StreamObserver {
 public:
  StreamLog(std::shared_ptr<Log> log, int stream)
      : log_(std::move(log)), stream_(stream) {}
  void OnAttemptStarted(const AttemptInfo& info) override {
    log_->AttemptStarted(stream_, info);
  }
  void OnAttemptEnded(const AttemptInfo& info, const absl::Status& status,
                      EndClass, bool by_client) override {
    log_->AttemptEnded(stream_, info, status, by_client);
  }

 private:
  std::shared_ptr<Log> log_;
  const int stream_;
};

// What each stream handed the application.
class Fleet {
 public:
  explicit Fleet(int n) : streams_(n) {}
  struct Delivered {
    std::uint64_t last = 0;
    int bad = 0;  // seq != last + 1: a loss or a duplicate
    std::map<std::string, int> by_server;
    absl::Time notice_at = absl::InfiniteFuture();
    int notices = 0;
    bool done = false;
    absl::Status status;
  };
  void On(int i, const FeedEvent& e) {
    std::lock_guard<std::mutex> lock(mu_);
    Delivered& d = streams_[i];
    if (e.drain_notice()) {
      ++d.notices;
      d.notice_at = std::min(d.notice_at, absl::Now());
    } else {
      if (e.seq() != d.last + 1) ++d.bad;
      d.last = e.seq();
      ++d.by_server[e.server()];
    }
    cv_.notify_all();
  }
  void Done(int i, const absl::Status& s) {
    std::lock_guard<std::mutex> lock(mu_);
    streams_[i].done = true;
    streams_[i].status = s;
    cv_.notify_all();
  }
  // Waits until every stream has `n` more events from `server` than now.
  bool WaitMoreFrom(const std::string& server, int n) {
    std::unique_lock<std::mutex> lock(mu_);
    std::vector<int> base;
    for (Delivered& d : streams_) base.push_back(d.by_server[server]);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(kWait), [&] {
      for (std::size_t i = 0; i < streams_.size(); ++i) {
        if (streams_[i].done) return true;
        if (streams_[i].by_server[server] < base[i] + n) return false;
      }
      return true;
    });
  }
  std::vector<Delivered> Get() {
    std::lock_guard<std::mutex> lock(mu_);
    return streams_;
  }
  int size() const { return static_cast<int>(streams_.size()); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Delivered> streams_;
};

enum class Kind { kWatch, kChat };

// N tether streams of one kind on a pool.
class Clients {
 public:
  Clients(std::shared_ptr<ConnectionPool> pool, std::shared_ptr<Log> log,
          Kind kind, int n)
      : fleet_(n) {
    for (int i = 0; i < n; ++i) {
      ReconnectingStreamOptions o;
      o.observer = std::make_shared<StreamLog>(log, i);
      auto on_message = [this, i](FeedEvent&& e) { fleet_.On(i, e); };
      auto on_done = [this, i](const absl::Status& s) { fleet_.Done(i, s); };
      if (kind == Kind::kWatch) {
        Watch::Spec spec;
        spec.start = [](const std::shared_ptr<grpc::Channel>& ch,
                        grpc::ClientContext* ctx, const FeedRequest* r,
                        grpc::ClientReadReactor<FeedEvent>* reactor) {
          tether::test::Feed::NewStub(ch)->async()->Watch(ctx, r, reactor);
        };
        spec.position_of = PositionOf;
        spec.resume_after = [](FeedRequest& r, std::uint64_t after) {
          r.set_after_seq(after);
        };
        auto s = Watch::Start(pool, std::move(spec), o, on_message, on_done);
        EXPECT_TRUE(s.ok()) << s.status();
        if (s.ok()) watches_.push_back(std::move(*s));
      } else {
        Chat::Spec spec;
        spec.start = [](const std::shared_ptr<grpc::Channel>& ch,
                        grpc::ClientContext* ctx,
                        grpc::ClientBidiReactor<FeedRequest, FeedEvent>* r) {
          tether::test::Feed::NewStub(ch)->async()->Chat(ctx, r);
        };
        spec.open_requests = [](const ResumeState& s) {
          FeedRequest open;
          if (s.has_position) open.set_after_seq(s.last);
          return std::vector<FeedRequest>{open};
        };
        spec.position_of = PositionOf;
        auto s = Chat::Start(pool, std::move(spec), o, on_message, on_done);
        EXPECT_TRUE(s.ok()) << s.status();
        if (s.ok()) chats_.push_back(std::move(*s));
      }
    }
  }
  Fleet& fleet() { return fleet_; }

 private:
  Fleet fleet_;
  std::vector<std::unique_ptr<Watch>> watches_;
  std::vector<std::unique_ptr<Chat>> chats_;
};

// Timings small enough for a test, large enough that every step is visible.
DrainOptions TestDrain() {
  DrainOptions o;
  o.unready_window = absl::Milliseconds(300);
  o.notice_grace = absl::Milliseconds(300);
  o.goaway_grace = absl::Milliseconds(300);
  o.drain_deadline = absl::Seconds(3);
  o.stop_slack = absl::Seconds(1);
  return o;
}

// Records when the server-side steps happened.
class StepTimes final : public server::DrainObserver {
 public:
  void OnUnready(absl::Duration) override { Set(unready_); }
  void OnNotice(std::size_t) override { Set(notice_); }
  void OnGoaway(std::size_t, absl::Duration) override { Set(goaway_); }
  void OnEndCalls(std::size_t, const grpc::Status&) override { Set(end_); }
  absl::Time unready() { return Get(unready_); }
  absl::Time notice() { return Get(notice_); }
  absl::Time goaway() { return Get(goaway_); }
  absl::Time end() { return Get(end_); }

 private:
  void Set(absl::Time& t) {
    std::lock_guard<std::mutex> lock(mu_);
    t = absl::Now();
  }
  absl::Time Get(const absl::Time& t) {
    std::lock_guard<std::mutex> lock(mu_);
    return t;
  }
  std::mutex mu_;
  absl::Time unready_ = absl::InfiniteFuture();
  absl::Time notice_ = absl::InfiniteFuture();
  absl::Time goaway_ = absl::InfiniteFuture();
  absl::Time end_ = absl::InfiniteFuture();
};

struct Scenario {
  Kind kind = Kind::kWatch;
  bool sync = false;
  int streams = 8;
  bool health = false;  // the pool watches grpc.health.v1
};

// Two servers, "a" (leaving) and "b"; every stream starts on "a" (b is
// down at first), then b comes up and a drains.
void RunRollout(const Scenario& sc) {
  auto steps = std::make_shared<StepTimes>();
  FeedServerOptions ao;
  ao.name = "a";
  ao.sync = sc.sync;
  ao.drain = TestDrain();
  ao.drain.observer = steps;
  ao.drain.log_sink = std::make_shared<QuietSink>();
  FeedServer a(ao);
  FeedServerOptions bo;
  bo.name = "b";
  bo.sync = sc.sync;
  FeedServer b(bo);
  ASSERT_TRUE(a.Start().ok());
  ASSERT_TRUE(b.Start().ok());
  b.Kill();  // its port is kept for the restart

  auto log = std::make_shared<Log>();
  ConnectionPoolOptions po;
  po.addresses = {a.address(), b.address()};
  po.health_check = sc.health;
  po.observer = std::make_shared<PoolLog>(log);
  auto pool = ConnectionPool::Create(po);
  ASSERT_TRUE(pool.ok()) << pool.status();
  Clients clients(*pool, log, sc.kind, sc.streams);
  ASSERT_TRUE(clients.fleet().WaitMoreFrom("a", 3));
  ASSERT_TRUE(b.Start().ok());
  ASSERT_TRUE(log->WaitReady(b.address()));

  const absl::Time begin = absl::Now();
  ASSERT_TRUE(a.drain().Begin());
  ASSERT_TRUE(clients.fleet().WaitMoreFrom("b", 3))
      << "the streams did not move to b";
  absl::optional<DrainReport> report =
      a.drain().WaitFor(server::HardBound(ao.drain) + kWait);
  ASSERT_TRUE(report.has_value());
  EXPECT_TRUE(report->server_stopped) << DrainReportToString(*report);
  EXPECT_EQ(report->calls_stuck, 0u);

  // No stream ended, none lost or repeated an event.
  for (const Fleet::Delivered& d : clients.fleet().Get()) {
    EXPECT_FALSE(d.done) << d.status;
    EXPECT_EQ(d.bad, 0);
  }
  // Nothing opened on the leaving server once the drain began: no stream
  // came back to it.
  EXPECT_EQ(a.CallsStartedSince(begin), 0);
  const std::set<std::uint64_t> on_a = log->ConnectionsTo(a.address());
  const absl::Time draining = log->FirstDraining(on_a);
  ASSERT_NE(draining, absl::InfiniteFuture()) << "the pool never saw a drain";
  int attempts_on_a = 0;
  for (const Log::Attempt& at : log->Attempts()) {
    if (on_a.count(at.connection) == 0) continue;
    ++attempts_on_a;
    EXPECT_LT(at.started, begin) << "an attempt opened on a during its drain";
    // The order: the pool knew a was draining before any of its streams
    // there ended (by the client's own cancel after the move, or by the
    // server).
    if (at.ended != absl::InfiniteFuture()) {
      EXPECT_GE(at.ended, draining)
          << "stream " << at.stream << " ended " << at.status << " "
          << absl::FormatDuration(draining - at.ended)
          << " before the pool saw the drain";
    }
  }
  EXPECT_EQ(attempts_on_a, sc.streams);

  if (sc.health) {
    // NOT_SERVING started every move within the unready window, long
    // before the GOAWAY. (When the old call is left depends on the client's
    // handoff: the new one must deliver something the old one has not.)
    EXPECT_LT(draining, begin + ao.drain.unready_window);
    for (const Log::Attempt& at : log->Attempts()) {
      if (on_a.count(at.connection) == 0 && at.started > begin) {
        EXPECT_LT(at.started, begin + ao.drain.unready_window);
      }
    }
  } else {
    // Without health checks the client learns from the GOAWAY, which left
    // after the unready window and the notice grace (the client ignores
    // notices), and each stream had its notice before.
    EXPECT_GE(steps->goaway() - begin,
              ao.drain.unready_window + ao.drain.notice_grace);
    EXPECT_GE(draining - begin,
              ao.drain.unready_window + ao.drain.notice_grace);
    EXPECT_EQ(report->calls_noticed, static_cast<std::size_t>(sc.streams));
    for (const Fleet::Delivered& d : clients.fleet().Get()) {
      EXPECT_EQ(d.notices, 1);
      EXPECT_LT(d.notice_at, draining);
    }
  }
}

TEST(DrainControllerTest, ServerStreamsLeaveInOrder) {
  RunRollout({Kind::kWatch, /*sync=*/false, 8, /*health=*/false});
}

TEST(DrainControllerTest, BidiStreamsLeaveInOrder) {
  RunRollout({Kind::kChat, /*sync=*/false, 8, /*health=*/false});
}

TEST(DrainControllerTest, SyncHandlersLeaveInOrder) {
  RunRollout({Kind::kWatch, /*sync=*/true, 4, /*health=*/false});
}

TEST(DrainControllerTest, SyncBidiHandlersLeaveInOrder) {
  RunRollout({Kind::kChat, /*sync=*/true, 4, /*health=*/false});
}

TEST(DrainControllerTest, SixtyFourStreamsLeaveInOrder) {
  RunRollout({Kind::kWatch, /*sync=*/false, 64, /*health=*/false});
}

TEST(DrainControllerTest, WithHealthChecksNothingOpensAfterTheFlip) {
  RunRollout({Kind::kWatch, /*sync=*/false, 8, /*health=*/true});
}

TEST(DrainControllerTest, WithHealthChecksBidiStreamsLeaveBeforeTheGoaway) {
  RunRollout({Kind::kChat, /*sync=*/false, 8, /*health=*/true});
}

}  // namespace
}  // namespace testsupport
}  // namespace tether
