// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// The ledger's `PlaceOrders` (the README's bidi example) against real gRPC
// servers on 127.0.0.1, each behind a loopback proxy: orders with keys that
// are not dense (acknowledged by key, no positions) go on while each server
// leaves gracefully (a real GOAWAY, calls cut after a grace) and is killed
// (its connections reset with no GOAWAY, calls cut at once) and restarted.
// Every order reaches the app's `on_message` acknowledged exactly once.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "ledger/ledger.grpc.pb.h"
#include "support/fault_proxy.h"
#include "tether/client.h"
#include "tether/generated_method.h"

namespace tether {
namespace {

namespace lv1 = ::tether::examples::ledger::v1;
using support::FaultProxy;
using support::Select;

constexpr auto kWait = std::chrono::seconds(30);

// The keys executed, shared by the servers as replicas share a database:
// a key arriving again (a replay) is acknowledged again, not executed.
class Executions {
 public:
  void Execute(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!executed_.insert(key).second) ++replays_;
  }
  int replays() {
    std::lock_guard<std::mutex> lock(mu_);
    return replays_;
  }

 private:
  std::mutex mu_;
  std::set<std::string> executed_;
  int replays_ = 0;
};

// One PlaceOrders call: executes each order's key and acknowledges it, in
// order; finishes once the client is gone and no write is in flight.
class OrdersReactor final
    : public grpc::ServerBidiReactor<lv1::Order, lv1::OrderAck> {
 public:
  explicit OrdersReactor(Executions* executions) : executions_(executions) {
    StartRead(&order_);
  }

  void OnReadDone(bool ok) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (!ok) {
      reads_done_ = true;
      MaybeFinishLocked();
      return;
    }
    executions_->Execute(order_.key());
    lv1::OrderAck ack;
    ack.set_key(order_.key());
    acks_.push_back(std::move(ack));
    if (!writing_) {
      writing_ = true;
      StartWrite(&acks_.front());
    }
    StartRead(&order_);
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> lock(mu_);
    acks_.pop_front();
    if (ok && !acks_.empty()) {
      StartWrite(&acks_.front());
      return;
    }
    writing_ = false;
    if (!ok) acks_.clear();  // the call is broken: nothing more goes out
    MaybeFinishLocked();
  }

  void OnDone() override { delete this; }

 private:
  void MaybeFinishLocked() {
    if (reads_done_ && !writing_ && !finished_) {
      finished_ = true;
      Finish(grpc::Status::OK);
    }
  }

  Executions* const executions_;
  std::mutex mu_;
  lv1::Order order_;
  std::deque<lv1::OrderAck> acks_;
  bool writing_ = false;
  bool reads_done_ = false;
  bool finished_ = false;
};

class OrdersService final : public lv1::Ledger::CallbackService {
 public:
  explicit OrdersService(Executions* executions) : executions_(executions) {}
  grpc::ServerBidiReactor<lv1::Order, lv1::OrderAck>* PlaceOrders(
      grpc::CallbackServerContext* /*context*/) override {
    return new OrdersReactor(executions_);
  }

 private:
  Executions* const executions_;
};

// A server on 127.0.0.1 (the same port across restarts) behind a proxy
// that clients dial.
class Replica {
 public:
  explicit Replica(Executions* executions) : service_(executions) {}
  ~Replica() {
    Stop(absl::ZeroDuration());
    proxy_.Stop();
  }

  bool Start() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort(absl::StrCat("127.0.0.1:", port_),
                             grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    if (!server_ || port_ == 0) return false;
    if (!proxy_started_) {
      if (!proxy_.Start().ok()) return false;
      proxy_started_ = true;
    }
    return proxy_.SetBackend(absl::StrCat("127.0.0.1:", port_)).ok();
  }
  std::string address() const { return proxy_.address(); }

  // Graceful: a GOAWAY now, calls cut after `grace`.
  void Stop(absl::Duration grace) {
    if (!server_) return;
    server_->Shutdown(std::chrono::system_clock::now() +
                      absl::ToChronoNanoseconds(grace));
    server_->Wait();
    server_.reset();
  }
  // As a `kill -9`: the connections drop with no GOAWAY, then the process
  // is gone.
  void Kill() {
    proxy_.Reset(Select::All());
    Stop(absl::ZeroDuration());
  }

 private:
  OrdersService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  FaultProxy proxy_;
  bool proxy_started_ = false;
};

// What the app saw: each key acknowledged, how often.
class Acks {
 public:
  void On(const lv1::OrderAck& ack) {
    std::lock_guard<std::mutex> lock(mu_);
    if (++seen_[ack.key()] == 2) {
      problem_ = absl::StrCat("order ", ack.key(), " acknowledged twice");
    }
    ++total_;
    cv_.notify_all();
  }
  void Done(const absl::Status& s) {
    std::lock_guard<std::mutex> lock(mu_);
    problem_ = absl::StrCat("the stream ended: ", s.ToString());
    cv_.notify_all();
  }
  // Waits until at least `n` acknowledgements arrived (false: a problem or
  // the wait ran out).
  bool WaitFor(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, kWait,
                 [&] { return total_ >= n || !problem_.empty(); });
    return total_ >= n && problem_.empty();
  }
  int count(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = seen_.find(key);
    return it == seen_.end() ? 0 : it->second;
  }
  int total() {
    std::lock_guard<std::mutex> lock(mu_);
    return total_;
  }
  std::string problem() {
    std::lock_guard<std::mutex> lock(mu_);
    return problem_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, int> seen_;
  int total_ = 0;
  std::string problem_;
};

TEST(PlaceOrdersTest, EachOrderIsAcknowledgedToTheAppOnceThroughRestarts) {
  Executions executions;
  Replica a(&executions), b(&executions);
  ASSERT_TRUE(a.Start());
  ASSERT_TRUE(b.Start());

  ClientOptions options;
  options.pool.addresses = {a.address(), b.address()};
  options.logging = absl::nullopt;
  auto client = Client::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();

  // The README's spec: acknowledged by key, no positions.
  BidiStreamSpec<lv1::Order, lv1::OrderAck> spec;
  spec.start = StartWith<lv1::Ledger>(&lv1::Ledger::Stub::async::PlaceOrders);
  spec.open_requests = [](const ResumeState&) {
    return std::vector<lv1::Order>{};
  };
  spec.acknowledges = [](const lv1::Order& order, const lv1::OrderAck& ack) {
    return ack.key() == order.key();
  };
  Acks acks;
  auto orders = (*client)->Start(
      spec, [&](lv1::OrderAck&& ack) { acks.On(ack); },
      [&](const absl::Status& s) { acks.Done(s); });
  ASSERT_TRUE(orders.ok()) << orders.status();

  // The writer keeps at most 8 orders unacknowledged: it waits for
  // acknowledgements, never for time. Keys are not dense.
  std::mutex mu;
  bool stop = false;
  std::vector<std::string> keys;
  std::string write_error;
  std::thread writer([&] {
    for (int n = 1;; ++n) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (stop || !write_error.empty()) return;
      }
      if (n > 8 && !acks.WaitFor(n - 8)) return;
      lv1::Order order;
      order.set_account("alice");
      order.set_amount(-n);
      // A key per order, as a UUID would be (not dense, not ordered).
      order.set_key(absl::StrFormat("%08x-%d", (n * 2654435761u), n));
      const std::string key = order.key();
      const absl::Status s = (*orders)->Write(std::move(order));
      std::lock_guard<std::mutex> lock(mu);
      if (!s.ok()) {
        write_error = s.ToString();
        return;
      }
      keys.push_back(key);
    }
  });
  auto progress = [&](const char* after) {
    const int now = acks.total();
    EXPECT_TRUE(acks.WaitFor(now + 40))
        << "no progress after " << after << ": " << acks.problem();
  };

  progress("the start");
  a.Stop(absl::Seconds(2));  // graceful: GOAWAY, calls cut 2 s later
  ASSERT_TRUE(a.Start());
  progress("a graceful stop");
  b.Stop(absl::Seconds(2));
  ASSERT_TRUE(b.Start());
  progress("b graceful stop");
  a.Kill();
  ASSERT_TRUE(a.Start());
  progress("a killed");
  b.Kill();
  ASSERT_TRUE(b.Start());
  progress("b killed");

  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
  }
  writer.join();
  std::vector<std::string> written;
  {
    std::lock_guard<std::mutex> lock(mu);
    written = keys;
    EXPECT_EQ(write_error, "");
  }
  ASSERT_TRUE(acks.WaitFor(static_cast<int>(written.size())))
      << acks.problem() << " (" << acks.total() << " of " << written.size()
      << ")";
  EXPECT_EQ(acks.problem(), "");
  EXPECT_EQ(acks.total(), static_cast<int>(written.size()));
  for (const std::string& key : written) {
    EXPECT_EQ(acks.count(key), 1) << key;
  }
  EXPECT_EQ((*orders)->outbox_size(), 0u);
  const StreamStats stats = (*orders)->stats();
  EXPECT_GE(stats.attempts, 3u);
  std::printf(
      "orders: %zu written, each acknowledged once; %d replays reached a "
      "server, %llu duplicate acknowledgements dropped, %llu attempts\n",
      written.size(), executions.replays(),
      static_cast<unsigned long long>(stats.duplicates_dropped),
      static_cast<unsigned long long>(stats.attempts));
  orders->reset();
  client->reset();
}

}  // namespace
}  // namespace tether
