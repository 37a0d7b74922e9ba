// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// ConnectionPool against real gRPC servers on 127.0.0.1: real GOAWAYs, real
// health watches. Every wait is on an event with a generous deadline.
#include "tether/connection_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "gtest/gtest.h"

namespace tether {
namespace {

using ::testing::HasSubstr;
using DrainListener = ConnectionSource::DrainListener;
using Clock = std::chrono::steady_clock;

constexpr auto kWait = std::chrono::seconds(10);

// A mutex + condvar around some state, to wait on events without sleeping.
class Events {
 public:
  void Add(std::string e) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      events_.push_back(std::move(e));
    }
    cv_.notify_all();
  }
  // Waits until `e` was added (`times` times); false on timeout.
  bool WaitFor(const std::string& e,
               std::chrono::steady_clock::duration timeout = kWait,
               int times = 1) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] {
      return std::count(events_.begin(), events_.end(), e) >= times;
    });
  }
  std::vector<std::string> All() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> events_;
};

class Observer final : public ConnectionObserver {
 public:
  void OnConnectionOpened(std::uint64_t id, absl::string_view t) override {
    events.Add(absl::StrCat("opened ", id, " ", t));
  }
  void OnConnectionReady(std::uint64_t id) override {
    events.Add(absl::StrCat("ready ", id));
  }
  void OnConnectionDraining(std::uint64_t id, absl::string_view) override {
    events.Add(absl::StrCat("draining ", id));
  }
  void OnConnectionRetired(std::uint64_t id) override {
    events.Add(absl::StrCat("retired ", id));
  }
  Events events;
};

class Listener final : public DrainListener {
 public:
  void OnConnectionDraining(std::uint64_t id, absl::string_view why) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      why_ = std::string(why);
      ++count_;
    }
    events.Add(absl::StrCat("draining ", id));
  }
  void OnConnectionAvailable() override { events.Add("available"); }
  int count() {
    std::lock_guard<std::mutex> lock(mu_);
    return count_;
  }
  std::string why() {
    std::lock_guard<std::mutex> lock(mu_);
    return why_;
  }
  Events events;

 private:
  std::mutex mu_;
  int count_ = 0;
  std::string why_;
};

// A server whose one generic method "hangs": it sends headers and then never
// answers, until the call is cancelled (by the client, or by the server's
// shutdown deadline).
class HangServer {
 public:
  HangServer() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterCallbackGenericService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~HangServer() { Shutdown(std::chrono::seconds(0)); }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  grpc::Server* server() { return server_.get(); }
  int calls() const { return service_.calls.load(); }
  Events& events() { return service_.events; }

  void Shutdown(std::chrono::steady_clock::duration grace) {
    if (shut_down_.exchange(true)) return;
    server_->Shutdown(std::chrono::system_clock::now() + grace);
    server_->Wait();
  }

 private:
  class Service final : public grpc::CallbackGenericService {
   public:
    grpc::ServerGenericBidiReactor* CreateReactor(
        grpc::GenericCallbackServerContext*) override {
      class Reactor final : public grpc::ServerGenericBidiReactor {
       public:
        Reactor() { StartSendInitialMetadata(); }
        void OnCancel() override {
          Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
        }
        void OnDone() override { delete this; }
      };
      events.Add(absl::StrCat("call ", ++calls));
      return new Reactor;
    }
    std::atomic<int> calls{0};
    Events events;
  };

  int port_ = 0;
  Service service_;
  std::unique_ptr<grpc::Server> server_;
  std::atomic<bool> shut_down_{false};
};

// One call on a channel that stays open until cancelled.
class HangingCall final
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit HangingCall(std::shared_ptr<grpc::Channel> channel)
      : stub_(std::move(channel)) {
    stub_.PrepareBidiStreamingCall(&context_, "/tether.test.Hang/Hang",
                                   grpc::StubOptions(), this);
    StartCall();
  }
  ~HangingCall() override {
    context_.TryCancel();
    events.WaitFor("done");
  }
  void OnReadInitialMetadataDone(bool ok) override {
    events.Add(ok ? "started" : "start failed");
  }
  void OnDone(const grpc::Status& s) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      status_ = s;
    }
    events.Add("done");
  }
  void Cancel() { context_.TryCancel(); }
  Events events;

 private:
  grpc::GenericStub stub_;
  grpc::ClientContext context_;
  std::mutex mu_;
  grpc::Status status_;
};

std::shared_ptr<ConnectionPool> MakePool(ConnectionPoolOptions o) {
  auto pool = ConnectionPool::Create(std::move(o));
  EXPECT_TRUE(pool.ok()) << pool.status();
  return pool.ok() ? *pool : nullptr;
}

TEST(ConnectionPoolIntegrationTest,
     GoawayDrainsPickedConnectionBeforeDeadline) {
  HangServer server;
  auto observer = std::make_shared<Observer>();
  ConnectionPoolOptions o;
  o.target = server.address();
  o.observer = observer;
  auto pool = MakePool(std::move(o));
  ASSERT_NE(pool, nullptr);

  auto listener = std::make_shared<Listener>();
  auto pick = pool->Pick(listener);
  ASSERT_TRUE(pick.ok()) << pick.status();
  EXPECT_EQ(pick->connection_id, 1u);
  ASSERT_NE(pick->channel, nullptr);
  auto call = std::make_unique<HangingCall>(pick->channel);
  ASSERT_TRUE(call->events.WaitFor("started"));
  ASSERT_TRUE(observer->events.WaitFor("ready 1"));
  EXPECT_EQ(pool->Stats().ready, 1u);

  // Shut the server down with a long grace period; the open call holds it.
  const auto grace = std::chrono::seconds(30);
  const auto start = Clock::now();
  std::thread shutdown([&] { server.Shutdown(grace); });

  ASSERT_TRUE(listener->events.WaitFor("draining 1"));
  const auto took = Clock::now() - start;
  EXPECT_LT(took, std::chrono::seconds(10)) << "drain not seen before deadline";
  EXPECT_THAT(listener->why(), HasSubstr("READY"));
  EXPECT_EQ(listener->count(), 1);
  EXPECT_FALSE(call->events.WaitFor("done", std::chrono::seconds(0)))
      << "the call is still running: only the connection is draining";

  // The next pick goes elsewhere: the replacement made before break.
  auto other = std::make_shared<Listener>();
  auto next = pool->Pick(other);
  ASSERT_TRUE(next.ok()) << next.status() << "\n"
                         << absl::StrJoin(observer->events.All(), "\n");
  EXPECT_NE(next->connection_id, 1u);
  EXPECT_NE(next->channel, pick->channel);

  // End the old call (as a migrated stream would); the server then finishes
  // its shutdown long before the grace period, and connection 1 retires.
  call->Cancel();
  ASSERT_TRUE(call->events.WaitFor("done"));
  call.reset();
  pool->Release(1, listener);
  EXPECT_TRUE(observer->events.WaitFor("retired 1"));
  shutdown.join();
  EXPECT_LT(Clock::now() - start, grace);
  pool->Release(next->connection_id, other);
  EXPECT_EQ(listener->count(), 1);
}

TEST(ConnectionPoolIntegrationTest, AddressListSpreadsPicksOverServers) {
  HangServer a;
  HangServer b;
  auto observer = std::make_shared<Observer>();
  ConnectionPoolOptions o;
  o.addresses = {a.address(), b.address()};
  o.observer = observer;
  auto pool = MakePool(std::move(o));
  ASSERT_NE(pool, nullptr);
  // Connections are opened and connected eagerly, one per address.
  ASSERT_TRUE(observer->events.WaitFor("ready 1"));
  ASSERT_TRUE(observer->events.WaitFor("ready 2"));

  auto listener = std::make_shared<Listener>();
  std::map<std::uint64_t, int> per_connection;
  std::vector<std::unique_ptr<HangingCall>> calls;
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < 6; ++i) {
    auto pick = pool->Pick(listener);
    ASSERT_TRUE(pick.ok()) << pick.status();
    ++per_connection[pick->connection_id];
    ids.push_back(pick->connection_id);
    calls.push_back(std::make_unique<HangingCall>(pick->channel));
  }
  EXPECT_EQ(per_connection[1], 3);
  EXPECT_EQ(per_connection[2], 3);
  // And the calls really reached both servers, three each.
  ASSERT_TRUE(a.events().WaitFor("call 3"));
  ASSERT_TRUE(b.events().WaitFor("call 3"));
  for (auto& c : calls) ASSERT_TRUE(c->events.WaitFor("started"));
  EXPECT_EQ(a.calls(), 3);
  EXPECT_EQ(b.calls(), 3);
  EXPECT_EQ(pool->Stats().total_opened, 2u);

  calls.clear();
  for (std::uint64_t id : ids) pool->Release(id, listener);
  EXPECT_EQ(pool->Stats().picks, 0u);
}

TEST(ConnectionPoolIntegrationTest, DrainMovesNextPickToTheOtherServer) {
  HangServer a;
  HangServer b;
  auto observer = std::make_shared<Observer>();
  ConnectionPoolOptions o;
  o.addresses = {a.address(), b.address()};
  o.observer = observer;
  auto pool = MakePool(std::move(o));
  ASSERT_NE(pool, nullptr);
  ASSERT_TRUE(observer->events.WaitFor("ready 1"));
  ASSERT_TRUE(observer->events.WaitFor("ready 2"));

  auto listener = std::make_shared<Listener>();
  auto first = pool->Pick(listener);  // connection 1 -> server a
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->connection_id, 1u);
  auto call = std::make_unique<HangingCall>(first->channel);
  ASSERT_TRUE(a.events().WaitFor("call 1"));

  std::thread shutdown([&] { a.Shutdown(std::chrono::seconds(30)); });
  ASSERT_TRUE(listener->events.WaitFor("draining 1"));

  auto moved = std::make_shared<Listener>();
  auto second = pool->Pick(moved);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->connection_id, 2u);  // b's READY connection, not the
                                         // replacement toward a
  auto call2 = std::make_unique<HangingCall>(second->channel);
  ASSERT_TRUE(b.events().WaitFor("call 1"));
  EXPECT_EQ(a.calls(), 1);

  call.reset();  // cancels: a's shutdown completes early
  pool->Release(1, listener);
  shutdown.join();
  call2.reset();
  pool->Release(2, moved);
}

TEST(ConnectionPoolIntegrationTest, HealthNotServingDrainsWithoutGoaway) {
  grpc::EnableDefaultHealthCheckService(true);
  HangServer server;
  grpc::EnableDefaultHealthCheckService(false);
  ASSERT_NE(server.server()->GetHealthCheckService(), nullptr);
  auto observer = std::make_shared<Observer>();
  ConnectionPoolOptions o;
  o.target = server.address();
  o.observer = observer;
  o.health_check = true;
  auto pool = MakePool(std::move(o));
  ASSERT_NE(pool, nullptr);
  ASSERT_TRUE(observer->events.WaitFor("ready 1"));

  auto listener = std::make_shared<Listener>();
  auto pick = pool->Pick(listener);
  ASSERT_TRUE(pick.ok());
  ASSERT_EQ(pick->connection_id, 1u);

  server.server()->GetHealthCheckService()->SetServingStatus(false);
  ASSERT_TRUE(listener->events.WaitFor("draining 1"));
  EXPECT_THAT(listener->why(), HasSubstr("NOT_SERVING"));
  // The next pick gets another connection. Every connection to this server
  // answers NOT_SERVING now, so the replacement may already have drained
  // too, and the probe schedule then paces the next open: the pick finds
  // none usable. Once the server serves again, the pool says so and a pick
  // gets a new connection. Never the draining one.
  auto next = pool->Pick(listener);
  for (int told = 1; !next.ok() && told <= 20; ++told) {
    ASSERT_EQ(next.status().code(), absl::StatusCode::kUnavailable)
        << next.status();
    pool->NotifyWhenAvailable(listener);
    server.server()->GetHealthCheckService()->SetServingStatus(true);
    ASSERT_TRUE(listener->events.WaitFor("available", kWait, told))
        << absl::StrJoin(observer->events.All(), "\n");
    next = pool->Pick(listener);
  }
  ASSERT_TRUE(next.ok()) << next.status() << "\n"
                         << absl::StrJoin(observer->events.All(), "\n");
  EXPECT_NE(next->connection_id, 1u);
  pool->Release(1, listener);
  EXPECT_TRUE(observer->events.WaitFor("retired 1"));
  pool->Release(next->connection_id, listener);
}

TEST(ConnectionPoolIntegrationTest, HealthWatchThatNeverAnswersIsHarmless) {
  // HangServer's generic service takes every method, so the pool's health
  // Watch is accepted and never answered: no status is not NOT_SERVING.
  HangServer server;
  auto observer = std::make_shared<Observer>();
  ConnectionPoolOptions o;
  o.target = server.address();
  o.observer = observer;
  o.health_check = true;
  auto pool = MakePool(std::move(o));
  ASSERT_NE(pool, nullptr);
  ASSERT_TRUE(observer->events.WaitFor("ready 1"));
  ASSERT_TRUE(server.events().WaitFor("call 1"));  // the health Watch
  {
    auto listener = std::make_shared<Listener>();
    auto pick = pool->Pick(listener);
    ASSERT_TRUE(pick.ok());
    EXPECT_EQ(pick->connection_id, 1u);
    EXPECT_EQ(pool->Stats().draining, 0u);
    pool->Release(1, listener);
  }
  // Destroying the pool cancels the health watch and stops promptly.
  const auto start = Clock::now();
  pool.reset();
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(900));
  EXPECT_TRUE(observer->events.WaitFor("retired 1", std::chrono::seconds(0)));
}

// The watcher thread runs listeners; one that drops the last reference to
// the pool from there must neither deadlock nor crash, and the pool must
// still tear down completely (the observer it holds is released at the end).
TEST(ConnectionPoolIntegrationTest, PoolMayBeDroppedFromAListenerCallback) {
  HangServer server;
  auto torn_down = std::make_shared<Events>();
  class GoneObserver final : public ConnectionObserver {
   public:
    explicit GoneObserver(std::shared_ptr<Events> e) : e_(std::move(e)) {}
    ~GoneObserver() override { e_->Add("gone"); }
    void OnConnectionReady(std::uint64_t id) override {
      e_->Add(absl::StrCat("ready ", id));
    }

   private:
    std::shared_ptr<Events> e_;
  };
  class DroppingListener final : public DrainListener {
   public:
    explicit DroppingListener(std::shared_ptr<ConnectionPool> pool)
        : pool_(std::move(pool)) {}
    void OnConnectionDraining(std::uint64_t, absl::string_view) override {
      pool_.reset();  // the last reference
      events.Add("dropped");
    }
    Events events;

   private:
    std::shared_ptr<ConnectionPool> pool_;
  };

  ConnectionPoolOptions o;
  o.target = server.address();
  o.observer = std::make_shared<GoneObserver>(torn_down);
  auto pool = MakePool(std::move(o));
  ASSERT_NE(pool, nullptr);
  ASSERT_TRUE(torn_down->WaitFor("ready 1"));
  auto listener = std::make_shared<DroppingListener>(pool);
  auto pick = pool->Pick(listener);
  ASSERT_TRUE(pick.ok());
  auto call = std::make_unique<HangingCall>(pick->channel);
  ASSERT_TRUE(call->events.WaitFor("started"));
  pool.reset();  // now only the listener holds the pool

  std::thread shutdown([&] { server.Shutdown(std::chrono::seconds(30)); });
  ASSERT_TRUE(listener->events.WaitFor("dropped"));
  call.reset();
  pick = absl::UnavailableError("dropped");  // let go of the channel
  EXPECT_TRUE(torn_down->WaitFor("gone"));
  shutdown.join();
}

// Many listeners are told from several threads at once; the
// one that drops the last reference may be on a helper thread, which the
// watcher thread waits for: the pool must still go away cleanly.
TEST(ConnectionPoolIntegrationTest, PoolMayBeDroppedFromAnyOfManyListeners) {
  HangServer server;
  auto torn_down = std::make_shared<Events>();
  class GoneObserver final : public ConnectionObserver {
   public:
    explicit GoneObserver(std::shared_ptr<Events> e) : e_(std::move(e)) {}
    ~GoneObserver() override { e_->Add("gone"); }
    void OnConnectionReady(std::uint64_t id) override {
      e_->Add(absl::StrCat("ready ", id));
    }

   private:
    std::shared_ptr<Events> e_;
  };
  class DroppingListener final : public DrainListener {
   public:
    explicit DroppingListener(std::shared_ptr<ConnectionPool> pool)
        : pool_(std::move(pool)) {}
    void OnConnectionDraining(std::uint64_t, absl::string_view) override {
      pool_.reset();  // the last of them destroys the pool
      events.Add("dropped");
    }
    Events events;

   private:
    std::shared_ptr<ConnectionPool> pool_;
  };

  ConnectionPoolOptions o;
  o.target = server.address();
  o.observer = std::make_shared<GoneObserver>(torn_down);
  auto pool = MakePool(std::move(o));
  ASSERT_NE(pool, nullptr);
  ASSERT_TRUE(torn_down->WaitFor("ready 1"));
  constexpr int kListeners = 32;
  std::vector<std::shared_ptr<DroppingListener>> listeners;
  std::shared_ptr<grpc::Channel> channel;
  for (int i = 0; i < kListeners; ++i) {
    listeners.push_back(std::make_shared<DroppingListener>(pool));
    auto pick = pool->Pick(listeners.back());
    ASSERT_TRUE(pick.ok());
    channel = pick->channel;
  }
  auto call = std::make_unique<HangingCall>(channel);
  channel.reset();
  ASSERT_TRUE(call->events.WaitFor("started"));
  pool.reset();  // now only the listeners hold the pool

  std::thread shutdown([&] { server.Shutdown(std::chrono::seconds(30)); });
  for (auto& l : listeners) ASSERT_TRUE(l->events.WaitFor("dropped"));
  call.reset();
  EXPECT_TRUE(torn_down->WaitFor("gone"));
  shutdown.join();
}

TEST(ConnectionPoolIntegrationTest, DestroyWithConnectionsOpenIsClean) {
  HangServer server;
  auto observer = std::make_shared<Observer>();
  ConnectionPoolOptions o;
  o.target = server.address();
  o.observer = observer;
  auto pool = MakePool(std::move(o));
  ASSERT_NE(pool, nullptr);
  ASSERT_TRUE(observer->events.WaitFor("ready 1"));
  const auto start = Clock::now();
  pool.reset();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(observer->events.WaitFor("retired 1", std::chrono::seconds(0)));
}

}  // namespace
}  // namespace tether
