// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// A Feed server on 127.0.0.1 for the consumer checks, written the way an
// application team would (gRPC's synchronous API): `Watch` streams events
// seq resume_after+1, +2, ... one per millisecond until the call ends;
// `Place` executes each order's key once (a second order with a key already
// executed is acknowledged again, not executed again) and acknowledges it.
// Servers share one `Executions` record, as replicas share a database.
#ifndef TETHER_CONSUMER_FEED_SERVER_H_
#define TETHER_CONSUMER_FEED_SERVER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "consumer.grpc.pb.h"
#include "grpcpp/server.h"

namespace consumer {

// The orders the servers executed, by key, and how many arrived again
// (replayed by the client) and were acknowledged without executing.
// Thread-safe.
class Executions {
 public:
  // Executes `key` unless it was; true if this call executed it.
  bool Execute(const std::string& key);
  std::int64_t executed() const;
  std::int64_t replays() const;

 private:
  mutable std::mutex mu_;
  std::set<std::string> executed_;
  std::int64_t replays_ = 0;
};

class FeedServer {
 public:
  explicit FeedServer(Executions* executions);
  ~FeedServer();

  // Listens on 127.0.0.1:port (0: a free port, kept for later restarts).
  bool Start(int port = 0);
  int port() const { return port_; }
  std::string address() const;
  // Graceful: GOAWAY now, calls cut after `grace`. Zero: abrupt, every call
  // cut at once. Blocks until stopped.
  void Stop(std::chrono::milliseconds grace);

 private:
  class Service;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace consumer

#endif  // TETHER_CONSUMER_FEED_SERVER_H_
