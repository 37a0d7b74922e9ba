// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Shared by the integration tests: a stream spec for tether.test.SeqStream
// and a collector that checks what one stream delivered.
#ifndef TETHER_TEST_INTEGRATION_STREAM_TEST_UTIL_H_
#define TETHER_TEST_INTEGRATION_STREAM_TEST_UTIL_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "grpcpp/grpcpp.h"
#include "seqstream.grpc.pb.h"
#include "tether/reconnecting_stream.h"

namespace tether {
namespace testsupport {

using SeqStream =
    ReconnectingStream<tether::test::WatchRequest, tether::test::Event>;

inline SeqStream::Spec WatchSpec(const std::string& key) {
  SeqStream::Spec spec;
  spec.start = [](const std::shared_ptr<grpc::Channel>& channel,
                  grpc::ClientContext* context,
                  const tether::test::WatchRequest* request,
                  grpc::ClientReadReactor<tether::test::Event>* reactor) {
    tether::test::SeqStream::NewStub(channel)->async()->Watch(context, request,
                                                              reactor);
  };
  spec.request.set_key(key);
  spec.sequence_of =
      [](const tether::test::Event& e) -> absl::optional<std::uint64_t> {
    if (e.seq() == 0) return absl::nullopt;
    return e.seq();
  };
  spec.resume_after = [](tether::test::WatchRequest& r, std::uint64_t seq) {
    r.set_after_seq(seq);
  };
  return spec;
}

// Records what one stream hands the application and checks it: every seq is
// exactly last + 1 (no loss, no repeat, in order).
class Collector {
 public:
  void OnMessage(tether::test::Event&& e) {
    std::lock_guard<std::mutex> lock(mu_);
    if (e.seq() != last_ + 1) {
      ++out_of_order_;
    }
    last_ = e.seq();
    ++count_;
    ++by_server_[e.server()];
    last_server_ = e.server();
    cv_.notify_all();
  }
  void OnDone(const absl::Status& s) {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = s;
    cv_.notify_all();
  }

  // Waits until the stream has ended, up to `timeout`.
  bool WaitForDone(absl::Duration timeout) {
    return WaitFor([](const Collector& c) { return c.done_.has_value(); },
                   timeout);
  }

  // Waits until `pred` holds, up to `timeout`. Returns whether it held.
  // `pred` runs under the collector's lock: it reads fields, not accessors.
  bool WaitFor(const std::function<bool(const Collector&)>& pred,
               absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                        [&] { return pred(*this); });
  }
  // Waits for `n` more messages than now, from server `server` if not empty.
  bool WaitForMoreFrom(const std::string& server, int n,
                       absl::Duration timeout) {
    int start;
    {
      std::lock_guard<std::mutex> lock(mu_);
      start = server.empty() ? count_ : by_server_[server];
    }
    return WaitFor(
               [&](const Collector& c) {
                 int now =
                     server.empty() ? c.count_ : c.CountFromLocked(server);
                 return now >= start + n || c.done_.has_value();
               },
               timeout) &&
           !done().has_value();
  }

  // Waits until a running stream's own counters (`stats`, read under this
  // collector's lock) agree with what this collector received: the same
  // number of messages and the same last seq. A live stream cannot be
  // compared in one shot: its counters move under its own lock before the
  // message callback runs (and `last_delivered_seq` when a message is queued),
  // so two reads a few milliseconds apart (a busy machine) see different
  // messages. Each delivery wakes this wait, so a transient difference
  // resolves at the next callback; a real one lasts until `timeout`.
  // Returns whether they agreed; `*last_seen` gets the last stats read.
  bool WaitForStatsToAgree(const std::function<StreamStats()>& stats,
                           absl::Duration timeout, StreamStats* last_seen) {
    return WaitFor(
        [&](const Collector& c) {
          *last_seen = stats();
          return last_seen->messages_delivered ==
                     static_cast<std::uint64_t>(c.count_) &&
                 last_seen->last_delivered_seq == c.last_;
        },
        timeout);
  }

  int count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return count_;
  }
  int out_of_order() const {
    std::lock_guard<std::mutex> lock(mu_);
    return out_of_order_;
  }
  std::uint64_t last() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_;
  }
  absl::optional<absl::Status> done() const {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  // The server of the last message ("" before the first).
  std::string last_server() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_server_;
  }
  int from(const std::string& server) const {
    std::lock_guard<std::mutex> lock(mu_);
    return CountFromLocked(server);
  }

  SeqStream::MessageCallback MessageFn() {
    return [this](tether::test::Event&& e) { OnMessage(std::move(e)); };
  }
  SeqStream::DoneCallback DoneFn() {
    return [this](const absl::Status& s) { OnDone(s); };
  }

 private:
  int CountFromLocked(const std::string& server) const {
    auto it = by_server_.find(server);
    return it == by_server_.end() ? 0 : it->second;
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t last_ = 0;
  int count_ = 0;
  int out_of_order_ = 0;
  std::map<std::string, int> by_server_;
  std::string last_server_;
  absl::optional<absl::Status> done_;
};

}  // namespace testsupport
}  // namespace tether

#endif  // TETHER_TEST_INTEGRATION_STREAM_TEST_UTIL_H_
