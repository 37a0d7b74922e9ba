// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Compile-time anchor (bench/compile_time.sh): what a user translation unit
// with a hand-written raw gRPC callback reader compiles. Compare with
// tu_tether.cc, the same watch through tether::ReconnectingStream. Never
// run; built only so that its compile command is known.
#include <atomic>
#include <cstdint>
#include <memory>

#include "grpcpp/grpcpp.h"
#include "seqstream.grpc.pb.h"

namespace tether_compile_time {

class RawWatch final : public grpc::ClientReadReactor<tether::test::Event> {
 public:
  RawWatch(tether::test::SeqStream::Stub* stub, std::uint64_t after) {
    request_.set_key("k");
    request_.set_after_seq(after);
    stub->async()->Watch(&context_, &request_, this);
    StartRead(&event_);
    StartCall();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    last_ = event_.seq();
    StartRead(&event_);
  }
  void OnDone(const grpc::Status& status) override { ok_ = status.ok(); }
  void Cancel() { context_.TryCancel(); }

 private:
  grpc::ClientContext context_;
  tether::test::WatchRequest request_;
  tether::test::Event event_;
  std::atomic<std::uint64_t> last_{0};
  std::atomic<bool> ok_{false};
};

std::unique_ptr<RawWatch> StartRawWatch(
    const std::shared_ptr<grpc::Channel>& channel) {
  static auto stub = tether::test::SeqStream::NewStub(channel);
  return std::make_unique<RawWatch>(stub.get(), 0);
}

}  // namespace tether_compile_time
