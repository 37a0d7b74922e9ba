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
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "consumer.grpc.pb.h"
#include "grpcpp/server.h"

namespace consumer {

// How many times each order key was executed. Thread-safe.
class Executions {
 public:
  // Executes `key` unless it was; true if this call executed it.
  bool Execute(const std::string& key);
  // Keys executed more than once (must stay 0), and keys executed.
  std::int64_t repeated() const;
  std::int64_t executed() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, int> count_;
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
