// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Many streams over one pool against real servers, for the rollout tests:
// what each stream delivered (`Fleet`), each stream's attempts
// (`AttemptLog`), starting them (`Streams`) and tearing down in order.
#ifndef TETHER_TEST_INTEGRATION_ROLLOUT_FIXTURE_H_
#define TETHER_TEST_INTEGRATION_ROLLOUT_FIXTURE_H_

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "gtest/gtest.h"
#include "test/integration/stream_test_util.h"
#include "test/support/one_shot.h"
#include "test/support/test_server.h"
#include "tether/backoff.h"
#include "tether/connection_pool.h"
#include "tether/observer.h"
#include "tether/reconnecting_stream.h"

namespace tether {
namespace testsupport {

inline ReconnectingStreamOptions FastOptions(
    std::shared_ptr<StreamObserver> obs) {
  ReconnectingStreamOptions o;
  ExponentialBackoffOptions b;
  b.initial_delay = absl::Milliseconds(20);
  b.max_delay = absl::Milliseconds(200);
  o.backoff = *ExponentialBackoff::Create(b);
  o.observer = std::move(obs);
  return o;
}

// What one stream handed the application.
struct Delivered {
  std::uint64_t last = 0;
  int count = 0;
  int out_of_order = 0;  // seq != last + 1: a loss or a duplicate
  std::map<std::string, int> by_server;
  std::map<std::string, absl::Time> first_from;  // first arrival per server
  absl::Time last_at = absl::InfinitePast();     // the last arrival
  // The longest time between two arrivals (the worst stall).
  absl::Duration max_gap = absl::ZeroDuration();
  absl::optional<absl::Status> done;

  int From(const std::string& server) const {
    auto it = by_server.find(server);
    return it == by_server.end() ? 0 : it->second;
  }
};

// The application side of many streams, under one lock so that a test can
// wait for a condition over all of them.
class Fleet {
 public:
  explicit Fleet(int n) : streams_(n) {}

  SeqStream::MessageCallback MessageFn(int i) {
    return [this, i](tether::test::Event&& e) {
      std::lock_guard<std::mutex> lock(mu_);
      Delivered& d = streams_[i];
      if (e.seq() != d.last + 1) ++d.out_of_order;
      d.last = e.seq();
      ++d.count;
      ++d.by_server[e.server()];
      const absl::Time now = absl::Now();
      d.first_from.emplace(e.server(), now);
      if (d.last_at != absl::InfinitePast()) {
        d.max_gap = std::max(d.max_gap, now - d.last_at);
      }
      d.last_at = now;
      cv_.notify_all();
    };
  }
  SeqStream::DoneCallback DoneFn(int i) {
    return [this, i](const absl::Status& s) {
      std::lock_guard<std::mutex> lock(mu_);
      streams_[i].done = s;
      cv_.notify_all();
    };
  }

  // Waits until `pred(i, stream i)` holds for every stream, or a stream
  // ended (which no test here expects), or `timeout` passes. True if `pred`
  // held for all.
  bool WaitAll(const std::function<bool(int, const Delivered&)>& pred,
               absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    auto all = [&] {
      for (int i = 0; i < size(); ++i) {
        if (streams_[i].done.has_value() || !pred(i, streams_[i])) {
          return false;
        }
      }
      return true;
    };
    cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] {
      for (const Delivered& d : streams_) {
        if (d.done.has_value()) return true;
      }
      return all();
    });
    return all();
  }
  bool WaitAll(const std::function<bool(const Delivered&)>& pred,
               absl::Duration timeout) {
    return WaitAll([&](int, const Delivered& d) { return pred(d); }, timeout);
  }

  // Waits for `n` more messages from `server` on every stream than when
  // called.
  bool WaitMoreFrom(const std::string& server, int n, absl::Duration timeout) {
    std::vector<int> base;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const Delivered& d : streams_) base.push_back(d.From(server));
    }
    return WaitAll(
        [&](int i, const Delivered& d) {
          return d.From(server) >= base[i] + n;
        },
        timeout);
  }

  Delivered Get(int i) const {
    std::lock_guard<std::mutex> lock(mu_);
    return streams_[i];
  }
  int size() const { return static_cast<int>(streams_.size()); }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Delivered> streams_;
};

// One stream's attempts, as its observer saw them.
class AttemptLog final : public StreamObserver {
 public:
  struct Entry {
    AttemptInfo info;
    bool ended = false;
    bool got_message = false;
    bool by_client = false;
    absl::Status status;
  };

  void OnAttemptStarted(const AttemptInfo& info) override {
    std::lock_guard<std::mutex> lock(mu_);
    entries_[info.attempt].info = info;
  }
  void OnFirstMessage(const AttemptInfo& info, absl::Duration) override {
    std::lock_guard<std::mutex> lock(mu_);
    entries_[info.attempt].got_message = true;
  }
  void OnAttemptEnded(const AttemptInfo& info, const absl::Status& status,
                      EndClass, bool by_client) override {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& e = entries_[info.attempt];
    e.info = info;
    e.ended = true;
    e.by_client = by_client;
    e.status = status;
  }

  std::vector<Entry> Entries() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Entry> out;
    for (const auto& e : entries_) out.push_back(e.second);
    return out;
  }
  // Attempts after the first that ran on one of `connections`.
  int LaterAttemptsOn(const std::set<std::uint64_t>& connections) const {
    int n = 0;
    for (const Entry& e : Entries()) {
      if (e.info.attempt > 1 && connections.count(e.info.connection_id)) ++n;
    }
    return n;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::uint64_t, Entry> entries_;  // by attempt number
};

// A server named `name` on `host` (a loopback address) and `port` (0: any).
inline std::unique_ptr<TestServer> StartServer(
    const std::string& name, const std::string& host = "127.0.0.1",
    int port = 0) {
  TestServerOptions o;
  o.name = name;
  o.host = host;
  o.port = port;
  auto server = std::make_unique<TestServer>(o);
  absl::Status s = server->Start();
  EXPECT_TRUE(s.ok()) << s;
  return s.ok() ? std::move(server) : nullptr;
}

// Streams 0..n-1 over one pool, each with its own attempt log. Declared after
// the servers, proxy and pool in each test, so that the streams go first.
struct Streams {
  explicit Streams(int n) : fleet(n) {}
  ~Streams() { streams.clear(); }  // no callback after this

  // `options` makes each stream's options around its attempt log.
  void StartAll(const std::shared_ptr<ConnectionPool>& pool,
                const std::function<ReconnectingStreamOptions(
                    std::shared_ptr<StreamObserver>)>& options = FastOptions) {
    for (int i = 0; i < fleet.size(); ++i) {
      logs.push_back(std::make_shared<AttemptLog>());
      auto s = SeqStream::Start(pool, WatchSpec(absl::StrCat("k", i)),
                                options(logs.back()), fleet.MessageFn(i),
                                fleet.DoneFn(i));
      ASSERT_TRUE(s.ok()) << s.status();
      streams.push_back(*std::move(s));
    }
  }

  // Every stream: no loss, no duplicate, no end. The streams still run, so
  // the library's counters may be ahead of what the app has seen so far.
  void ExpectClean() {
    for (int i = 0; i < fleet.size(); ++i) {
      const Delivered d = fleet.Get(i);
      EXPECT_EQ(d.out_of_order, 0) << "stream " << i;
      EXPECT_FALSE(d.done.has_value())
          << "stream " << i << " ended: " << d.done.value_or(absl::OkStatus());
      // Seqs 1..count, each once.
      EXPECT_EQ(d.last, static_cast<std::uint64_t>(d.count)) << "stream " << i;
      const StreamStats st = streams[i]->stats();
      EXPECT_EQ(st.gaps, 0u) << "stream " << i;
      EXPECT_GE(st.last_delivered_seq, d.last) << "stream " << i;
      EXPECT_GE(st.messages_delivered, static_cast<std::uint64_t>(d.count))
          << "stream " << i;
    }
  }

  Fleet fleet;
  std::vector<std::shared_ptr<AttemptLog>> logs;
  std::vector<std::unique_ptr<SeqStream>> streams;
};

inline std::shared_ptr<ConnectionPool> MakePool(ConnectionPoolOptions o) {
  auto pool = ConnectionPool::Create(std::move(o));
  EXPECT_TRUE(pool.ok()) << pool.status();
  return pool.ok() ? *pool : nullptr;
}

// Destroys the streams, drops the test's reference to the pool, and waits
// until the pool is destroyed (its calls in flight hold it until they end),
// so that no stream or pool work outlives the servers of the test.
inline void StopStreamsAndWaitForPool(Streams& s,
                                      std::shared_ptr<ConnectionPool>& pool,
                                      OneShot& pool_gone) {
  s.streams.clear();
  pool.reset();
  EXPECT_TRUE(pool_gone.Wait(absl::Seconds(30)))
      << "the pool outlived its streams";
}

}  // namespace testsupport
}  // namespace tether

#endif  // TETHER_TEST_INTEGRATION_ROLLOUT_FIXTURE_H_
