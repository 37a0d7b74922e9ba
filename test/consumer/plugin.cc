// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "plugin.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "consumer.grpc.pb.h"
#include "feed_server.h"
#include "tether/connection_pool.h"
#include "tether/generated_method.h"
#include "tether/reconnecting_stream.h"

namespace consumer {

std::string StreamThroughSharedObject() {
  Executions executions;
  FeedServer server(&executions);
  if (!server.Start()) return "the Feed server did not start";

  tether::ConnectionPoolOptions pool_options;
  pool_options.addresses = {server.address()};
  auto pool = tether::ConnectionPool::Create(pool_options);
  if (!pool.ok()) return pool.status().ToString();

  using Watch = tether::ReconnectingStream<tether_consumer::WatchRequest,
                                           tether_consumer::Event>;
  Watch::Spec spec;
  spec.start = tether::StartWith<tether_consumer::Feed>(
      &tether_consumer::Feed::Stub::async::Watch);
  spec.sequence_of = [](const tether_consumer::Event& e) {
    return static_cast<std::uint64_t>(e.seq());
  };
  spec.resume_after = [](tether_consumer::WatchRequest& r, std::uint64_t seq) {
    r.set_resume_after(static_cast<std::int64_t>(seq));
  };

  std::mutex mu;
  std::condition_variable cv;
  std::int64_t last = 0;
  std::string error;
  auto watch = Watch::Start(
      *pool, spec, tether::ReconnectingStreamOptions(),
      [&](tether_consumer::Event&& e) {
        std::lock_guard<std::mutex> lock(mu);
        if (e.seq() != last + 1 && error.empty()) {
          error = "event " + std::to_string(e.seq()) + " after " +
                  std::to_string(last);
        }
        last = e.seq();
        cv.notify_all();
      },
      [&](const absl::Status& s) {
        std::lock_guard<std::mutex> lock(mu);
        if (!absl::IsCancelled(s) && error.empty()) error = s.ToString();
        cv.notify_all();
      });
  if (!watch.ok()) return watch.status().ToString();
  std::unique_lock<std::mutex> lock(mu);
  if (!cv.wait_for(lock, std::chrono::seconds(60),
                   [&] { return last >= 50 || !error.empty(); })) {
    error = "50 events did not arrive within 60 s";
  }
  lock.unlock();
  watch->reset();  // cancels; no callback runs after this
  return error;
}

}  // namespace consumer
