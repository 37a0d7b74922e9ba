// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// The client side of tether::server's integration tests: tether streams on
// tether.test.Feed (server or bidi) through a ConnectionPool, and logs of
// what they and the pool did, with the time of each event (absl::Now()).
#ifndef TETHER_TEST_INTEGRATION_SERVER_FEED_CLIENTS_H_
#define TETHER_TEST_INTEGRATION_SERVER_FEED_CLIENTS_H_

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "feed.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tether/classification.h"
#include "tether/connection_pool.h"
#include "tether/observer.h"
#include "tether/position.h"
#include "tether/reconnecting_bidi_stream.h"
#include "tether/reconnecting_stream.h"

namespace tether {
namespace testsupport {
namespace feed {

using ::tether::test::FeedEvent;
using ::tether::test::FeedRequest;

// How long any single event may take before a test gives up: the events
// take milliseconds; the margin is for a loaded 2-core machine.
inline constexpr absl::Duration kWait = absl::Seconds(30);

using Watch = ReconnectingStream<FeedRequest, FeedEvent>;
using Chat = ReconnectingBidiStream<FeedRequest, FeedEvent>;

inline Position PositionOf(const FeedEvent& e) {
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
    EndClass end_class = EndClass::kOk;
    bool by_client = false;
    AttemptReason reason = AttemptReason::kFirst;
    bool noticed = false;  // the server's drain notice arrived on it
  };
  void AttemptStarted(int stream, const AttemptInfo& info) {
    std::lock_guard<std::mutex> lock(mu_);
    Attempt& a = attempts_[{stream, info.attempt}];
    a.stream = stream;
    a.connection = info.connection_id;
    a.started = absl::Now();
    a.reason = info.reason;
  }
  void Noticed(int stream, const AttemptInfo& info) {
    std::lock_guard<std::mutex> lock(mu_);
    attempts_[{stream, info.attempt}].noticed = true;
  }
  void AttemptEnded(int stream, const AttemptInfo& info,
                    const absl::Status& status, EndClass end_class,
                    bool by_client) {
    std::lock_guard<std::mutex> lock(mu_);
    Attempt& a = attempts_[{stream, info.attempt}];
    a.stream = stream;
    a.connection = info.connection_id;
    a.ended = absl::Now();
    a.status = status;
    a.end_class = end_class;
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
                      EndClass end_class, bool by_client) override {
    log_->AttemptEnded(stream_, info, status, end_class, by_client);
  }
  void OnDrainNotice(const AttemptInfo& info) override {
    log_->Noticed(stream_, info);
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
    std::string last_server;
    absl::Time last_at = absl::InfinitePast();
    // The longest wait between two events once `MarkStallsFrom` was
    // called.
    absl::Duration max_gap = absl::ZeroDuration();
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
      d.last_server = e.server();
      const absl::Time now = absl::Now();
      if (stalls_from_ != absl::InfiniteFuture()) {
        d.max_gap =
            std::max(d.max_gap, now - std::max(d.last_at, stalls_from_));
      }
      d.last_at = now;
    }
    cv_.notify_all();
  }
  void Done(int i, const absl::Status& s) {
    std::lock_guard<std::mutex> lock(mu_);
    streams_[i].done = true;
    streams_[i].status = s;
    cv_.notify_all();
  }
  // Waits until every stream has `n` events, from any server.
  bool WaitEvents(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(kWait), [&] {
      for (const Delivered& d : streams_) {
        if (d.done) return true;
        if (d.last < static_cast<std::uint64_t>(n)) return false;
      }
      return true;
    });
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
  // From now on, gaps between events count as stalls.
  void MarkStallsFrom(absl::Time t) {
    std::lock_guard<std::mutex> lock(mu_);
    stalls_from_ = t;
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
  absl::Time stalls_from_ = absl::InfiniteFuture();
};

enum class Kind { kWatch, kChat };

// N tether streams of one kind on a pool.
class Clients {
 public:
  // `base`: options every stream starts from (its observer is replaced).
  // `notice_hook`: the streams act on the server's drain notice
  // (`is_drain_notice`), and the app does not see it; else it is a control
  // message the app gets.
  Clients(std::shared_ptr<ConnectionPool> pool, std::shared_ptr<Log> log,
          Kind kind, int n, ReconnectingStreamOptions base = {},
          bool notice_hook = false)
      : fleet_(n) {
    auto is_notice = [](const FeedEvent& e) { return e.drain_notice(); };
    for (int i = 0; i < n; ++i) {
      ReconnectingStreamOptions o = base;
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
        if (notice_hook) spec.is_drain_notice = is_notice;
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
        if (notice_hook) spec.is_drain_notice = is_notice;
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

}  // namespace feed
}  // namespace testsupport
}  // namespace tether

#endif  // TETHER_TEST_INTEGRATION_SERVER_FEED_CLIENTS_H_
