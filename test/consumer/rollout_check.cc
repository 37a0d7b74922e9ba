// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "rollout_check.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "consumer.grpc.pb.h"
#include "feed_server.h"
#include "tether/client.h"
#include "tether/generated_method.h"

namespace consumer {
namespace {

using Ack_ = tether_consumer::Ack;
using Event_ = tether_consumer::Event;
using tether_consumer::Feed;
using tether_consumer::Order;
using tether_consumer::WatchRequest;

constexpr auto kWait = std::chrono::seconds(60);

// What the application saw, checked as it arrives.
class Seen {
 public:
  void OnEvent(std::int64_t seq) { Next(&events_, seq, "event"); }
  void OnAck(std::int64_t id) { Next(&acks_, id, "ack"); }
  void Done(const absl::Status& s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!absl::IsCancelled(s)) Problem("a stream ended: " + s.ToString());
  }
  // Waits until events and acks both moved on by the amounts given.
  bool WaitForProgress(std::int64_t events, std::int64_t acks) {
    std::unique_lock<std::mutex> lock(mu_);
    const std::int64_t e = events_ + events;
    const std::int64_t a = acks_ + acks;
    return cv_.wait_for(lock, kWait, [&] {
      return (events_ >= e && acks_ >= a) || !problem_.empty();
    }) && problem_.empty();
  }
  // Waits until the ack of order `id` arrived.
  bool WaitForAck(std::int64_t id) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kWait, [&] { return acks_ >= id; });
  }
  std::int64_t acks() {
    std::lock_guard<std::mutex> lock(mu_);
    return acks_;
  }
  std::int64_t events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  std::string problem() {
    std::lock_guard<std::mutex> lock(mu_);
    return problem_;
  }

 private:
  void Next(std::int64_t* last, std::int64_t got, const char* what) {
    std::lock_guard<std::mutex> lock(mu_);
    if (got != *last + 1) {
      Problem(std::string(what) + " " + std::to_string(got) + " after " +
              std::to_string(*last) +
              (got <= *last ? " (duplicate)" : " (lost)"));
    }
    *last = got;
    cv_.notify_all();
  }
  void Problem(const std::string& p) {
    if (problem_.empty()) problem_ = p;
    cv_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::int64_t events_ = 0;
  std::int64_t acks_ = 0;
  std::string problem_;
};

}  // namespace

std::string RolloutWithOneClient() {
  Executions executions;
  FeedServer a(&executions);
  FeedServer b(&executions);
  if (!a.Start() || !b.Start()) return "the Feed servers did not start";

  // The README's example, with the one object.
  tether::ClientOptions options;
  options.pool.addresses = {a.address(), b.address()};
  options.logging = absl::nullopt;  // quiet test output
  auto client = tether::Client::Create(options);
  if (!client.ok()) return client.status().ToString();

  Seen seen;
  tether::StreamSpec<WatchRequest, Event_> watch_spec;
  watch_spec.start = tether::StartWith<Feed>(&Feed::Stub::async::Watch);
  watch_spec.sequence_of = [](const Event_& e) {
    return static_cast<std::uint64_t>(e.seq());
  };
  watch_spec.resume_after = [](WatchRequest& r, std::uint64_t seq) {
    r.set_resume_after(static_cast<std::int64_t>(seq));
  };
  auto watch = (*client)->Start(
      watch_spec, [&](Event_&& e) { seen.OnEvent(e.seq()); },
      [&](const absl::Status& s) { seen.Done(s); });
  if (!watch.ok()) return watch.status().ToString();

  // Orders: written at least once (replayed until acknowledged), executed
  // once by key on the server, acknowledged to the app once (dense ids).
  tether::BidiStreamSpec<Order, Ack_> order_spec;
  order_spec.start = tether::StartWith<Feed>(&Feed::Stub::async::Place);
  order_spec.open_requests = [](const tether::ResumeState&) {
    return std::vector<Order>{};
  };
  order_spec.acknowledges = [](const Order& oldest, const Ack_& ack) {
    return ack.key() == oldest.key();
  };
  order_spec.sequence_of = [](const Ack_& ack) {
    return static_cast<std::uint64_t>(ack.id());
  };
  auto orders = (*client)->Start(
      order_spec, [&](Ack_&& ack) { seen.OnAck(ack.id()); },
      [&](const absl::Status& s) { seen.Done(s); });
  if (!orders.ok()) return orders.status().ToString();

  // The writer keeps at most 8 orders unacknowledged: it waits for acks,
  // never for time.
  std::mutex mu;
  bool stop = false;
  std::int64_t written = 0;
  std::string write_error;
  std::thread writer([&] {
    for (std::int64_t id = 1;; ++id) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (stop) return;
      }
      if (id > 8 && !seen.WaitForAck(id - 8)) continue;  // re-check stop
      Order order;
      order.set_key("order-" + std::to_string(id));
      order.set_id(id);
      const absl::Status s = (*orders)->Write(order);
      std::lock_guard<std::mutex> lock(mu);
      if (!s.ok()) {
        write_error = s.ToString();
        return;
      }
      written = id;
    }
  });

  std::string error;
  auto step = [&](const char* what) {
    if (error.empty() && !seen.WaitForProgress(200, 20)) {
      error = std::string("no progress after ") + what + ": " + seen.problem();
    }
  };
  step("start");
  a.Stop(std::chrono::seconds(2));  // graceful: GOAWAY, then 2 s
  step("a graceful stop");
  if (!a.Start()) error = "a did not restart";
  b.Stop(std::chrono::seconds(2));
  step("b graceful stop");
  if (!b.Start()) error = "b did not restart";
  a.Stop(std::chrono::milliseconds(0));  // abrupt: every call cut at once
  step("a abrupt stop");
  if (!a.Start()) error = "a did not restart";
  b.Stop(std::chrono::milliseconds(0));
  step("b abrupt stop");
  if (!b.Start()) error = "b did not restart";
  step("the restarts");

  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
  }
  writer.join();
  std::int64_t last_written = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    last_written = written;
    if (error.empty() && !write_error.empty()) error = "Write: " + write_error;
  }
  if (error.empty() && !seen.WaitForAck(last_written)) {
    error = "not every order was acknowledged: " + std::to_string(seen.acks()) +
            " of " + std::to_string(last_written);
  }
  watch->reset();
  orders->reset();
  client->reset();
  if (error.empty() && !seen.problem().empty()) error = seen.problem();
  if (error.empty() && seen.acks() != last_written) {
    error = std::to_string(seen.acks()) + " acks for " +
            std::to_string(last_written) + " orders";
  }
  if (error.empty() && executions.executed() != last_written) {
    error = "orders executed: " + std::to_string(executions.executed()) +
            " of " + std::to_string(last_written);
  }
  if (error.empty()) {
    std::printf(
        "  %lld events and %lld orders through 4 restarts; %lld orders "
        "reached a server again (at-least-once) and were executed once "
        "(idempotency key)\n",
        static_cast<long long>(seen.events()),
        static_cast<long long>(last_written),
        static_cast<long long>(executions.replays()));
  }
  return error;
}

}  // namespace consumer
