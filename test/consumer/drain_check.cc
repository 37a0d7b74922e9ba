// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// tether::server as an application links it: a sync gRPC server on
// 127.0.0.1 whose Watch handler registers with a DrainController, sends the
// app's drain notice when told and ends when told; a tether stream on a
// pool over two such servers, moving on the notice (`is_drain_notice`).
// One server drains: the stream goes on from the other with no event lost
// or repeated, and the drain stops the server. Exits non-zero on failure.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include "absl/time/time.h"
#include "consumer.grpc.pb.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/server_context.h"
#include "tether/connection_pool.h"
#include "tether/generated_method.h"
#include "tether/reconnecting_stream.h"
#include "tether/server/drain_controller.h"

namespace {

using tether_consumer::Event;
using tether_consumer::WatchRequest;

// Events seq after+1, after+2, ... every millisecond, `payload` naming the
// server; the drain notice (seq 0, `drain_notice`) when the drain asks.
class DrainedFeed final : public tether_consumer::Feed::Service {
 public:
  DrainedFeed(std::string name, tether::server::DrainController** drain)
      : name_(std::move(name)), drain_(drain) {}

  grpc::Status Watch(grpc::ServerContext* context, const WatchRequest* request,
                     grpc::ServerWriter<Event>* writer) override {
    std::unique_ptr<tether::server::DrainCall> call = (*drain_)->Register();
    for (std::int64_t seq = request->resume_after() + 1;
         !context->IsCancelled();) {
      if (auto end = call->end_status()) return *end;
      Event event;
      if (call->TakeNotice()) {
        event.set_drain_notice(true);
      } else {
        event.set_seq(seq);
      }
      event.set_payload(name_);
      if (!writer->Write(event)) break;
      if (!event.drain_notice()) ++seq;
      call->WaitForSignal(absl::Milliseconds(1));  // the tick
    }
    return grpc::Status::OK;
  }

 private:
  const std::string name_;
  tether::server::DrainController** const drain_;
};

struct Server {
  std::unique_ptr<DrainedFeed> service;
  std::unique_ptr<grpc::Server> server;
  tether::server::DrainController* drain_ptr = nullptr;
  std::unique_ptr<tether::server::DrainController> drain;
  int port = 0;

  bool Start(const std::string& name) {
    service = std::make_unique<DrainedFeed>(name, &drain_ptr);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(service.get());
    server = builder.BuildAndStart();
    if (!server || port == 0) return false;
    tether::server::DrainOptions options;
    options.unready_window = absl::Milliseconds(50);
    options.notice_grace = absl::Seconds(5);
    options.goaway_grace = absl::Milliseconds(200);
    options.drain_deadline = absl::Seconds(2);
    auto made = tether::server::DrainController::Create(server.get(), options);
    if (!made.ok()) return false;
    drain = *std::move(made);
    drain_ptr = drain.get();
    return true;
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port); }
};

// What the stream handed the application.
struct Seen {
  std::mutex mu;
  std::condition_variable cv;
  std::int64_t last = 0;
  int bad = 0;  // lost or repeated
  std::string server;
  int from_other = 0;
  std::string leaving;
  bool done = false;
};

}  // namespace

int main() {
  // The servers start before anything else reads their controller.
  Server a, b;
  if (!a.Start("a") || !b.Start("b")) {
    std::fprintf(stderr, "drain_check: the servers did not start\n");
    return 1;
  }
  tether::ConnectionPoolOptions pool_options;
  pool_options.addresses = {a.address(), b.address()};
  auto pool = tether::ConnectionPool::Create(pool_options);
  if (!pool.ok()) {
    std::fprintf(stderr, "drain_check: %s\n", pool.status().ToString().c_str());
    return 1;
  }
  using Watch = tether::ReconnectingStream<WatchRequest, Event>;
  Watch::Spec spec;
  spec.start = tether::StartWith<tether_consumer::Feed>(
      &tether_consumer::Feed::Stub::async::Watch);
  spec.sequence_of = [](const Event& e) {
    return static_cast<std::uint64_t>(e.seq());
  };
  spec.resume_after = [](WatchRequest& r, std::uint64_t seq) {
    r.set_resume_after(static_cast<std::int64_t>(seq));
  };
  spec.is_drain_notice = [](const Event& e) { return e.drain_notice(); };
  Seen seen;
  auto stream = Watch::Start(
      *pool, std::move(spec), {},
      [&seen](Event&& e) {
        std::lock_guard<std::mutex> lock(seen.mu);
        if (e.seq() != seen.last + 1) ++seen.bad;
        seen.last = e.seq();
        seen.server = e.payload();
        if (!seen.leaving.empty() && e.payload() != seen.leaving) {
          ++seen.from_other;
        }
        seen.cv.notify_all();
      },
      [&seen](const absl::Status&) {
        std::lock_guard<std::mutex> lock(seen.mu);
        seen.done = true;
        seen.cv.notify_all();
      });
  if (!stream.ok()) {
    std::fprintf(stderr, "drain_check: %s\n",
                 stream.status().ToString().c_str());
    return 1;
  }
  const auto limit = std::chrono::seconds(30);
  std::string leaving;
  {
    std::unique_lock<std::mutex> lock(seen.mu);
    if (!seen.cv.wait_for(lock, limit, [&] { return seen.last >= 20; })) {
      std::fprintf(stderr, "drain_check: no events\n");
      return 1;
    }
    leaving = seen.leaving = seen.server;
  }
  Server& gone = leaving == "a" ? a : b;
  gone.drain->Begin();
  const tether::server::DrainReport report = gone.drain->Wait();
  bool moved = false;
  {
    std::unique_lock<std::mutex> lock(seen.mu);
    moved =
        seen.cv.wait_for(lock, limit, [&] { return seen.from_other >= 20; });
  }
  std::lock_guard<std::mutex> lock(seen.mu);
  const tether::StreamStats stats = (*stream)->stats();
  std::printf(
      "drain_check: %s drained (%s); the stream moved to the other: "
      "%s, %d lost or repeated, %llu drain notices, ended: %s\n",
      leaving.c_str(), DrainReportToString(report).c_str(),
      moved ? "yes" : "no", seen.bad,
      static_cast<unsigned long long>(stats.drain_notices),
      seen.done ? "yes" : "no");
  const bool ok = moved && seen.bad == 0 && !seen.done &&
                  report.server_stopped && stats.drain_notices >= 1;
  return ok ? 0 : 1;
}
