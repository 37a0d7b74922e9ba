// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "feed_server.h"

#include <thread>

#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/server_context.h"

namespace consumer {

bool Executions::Execute(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (executed_.insert(key).second) return true;
  ++replays_;
  return false;
}

std::int64_t Executions::executed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<std::int64_t>(executed_.size());
}

std::int64_t Executions::replays() const {
  std::lock_guard<std::mutex> lock(mu_);
  return replays_;
}

class FeedServer::Service final : public tether_consumer::Feed::Service {
 public:
  explicit Service(Executions* executions) : executions_(executions) {}

  grpc::Status Watch(
      grpc::ServerContext* context,
      const tether_consumer::WatchRequest* request,
      grpc::ServerWriter<tether_consumer::Event>* writer) override {
    for (std::int64_t seq = request->resume_after() + 1;
         !context->IsCancelled(); ++seq) {
      tether_consumer::Event event;
      event.set_seq(seq);
      if (!writer->Write(event)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the tick
    }
    return grpc::Status::OK;
  }

  grpc::Status Place(
      grpc::ServerContext* /*context*/,
      grpc::ServerReaderWriter<tether_consumer::Ack, tether_consumer::Order>*
          stream) override {
    tether_consumer::Order order;
    while (stream->Read(&order)) {
      executions_->Execute(order.key());  // once per key, across servers
      tether_consumer::Ack ack;
      ack.set_key(order.key());
      ack.set_id(order.id());
      if (!stream->Write(ack)) break;
    }
    return grpc::Status::OK;
  }

 private:
  Executions* const executions_;
};

FeedServer::FeedServer(Executions* executions)
    : service_(std::make_unique<Service>(executions)) {}

FeedServer::~FeedServer() { Stop(std::chrono::milliseconds(0)); }

std::string FeedServer::address() const {
  return "127.0.0.1:" + std::to_string(port_);
}

bool FeedServer::Start(int port) {
  if (port == 0) port = port_;
  grpc::ServerBuilder builder;
  int bound = 0;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port),
                           grpc::InsecureServerCredentials(), &bound);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (!server_ || bound == 0) return false;
  port_ = bound;
  return true;
}

void FeedServer::Stop(std::chrono::milliseconds grace) {
  if (!server_) return;
  server_->Shutdown(std::chrono::system_clock::now() + grace);
  server_->Wait();
  server_.reset();
}

}  // namespace consumer
