// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Compile-time anchor (bench/compile_time.sh): a user translation unit with
// two hand-written raw gRPC callback reactors: tu_raw.cc's server-stream
// reader (included whole) and a bidi reactor that writes its requests one
// at a time. Compare with tu_tether_bidi.cc, the same two calls through
// tether. Never run nor linked; built only so that its compile command is
// known.
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>

#include "tu_raw.cc"  // NOLINT(build/include): the whole server-stream TU
#include "grpcpp/grpcpp.h"
#include "positions.grpc.pb.h"

namespace tether_compile_time {

class RawChat final : public grpc::ClientBidiReactor<tether::test::PosRequest,
                                                     tether::test::PosEvent> {
 public:
  explicit RawChat(tether::test::PosStream::Stub* stub) {
    stub->async()->Chat(&context_, this);
    tether::test::PosRequest open;
    open.set_open(true);
    Write(open);
    StartRead(&event_);
    StartCall();
  }
  void Write(tether::test::PosRequest request) {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back(std::move(request));
    if (pending_.size() == 1) StartWrite(&pending_.front());
  }
  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.pop_front();
    if (ok && !pending_.empty()) StartWrite(&pending_.front());
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    last_ = event_.ack();
    StartRead(&event_);
  }
  void OnDone(const grpc::Status& status) override { ok_ = status.ok(); }

 private:
  grpc::ClientContext context_;
  tether::test::PosEvent event_;
  std::mutex mu_;
  std::deque<tether::test::PosRequest> pending_;
  std::atomic<std::uint64_t> last_{0};
  std::atomic<bool> ok_{false};
};

std::unique_ptr<RawChat> StartRawChat(
    const std::shared_ptr<grpc::Channel>& channel) {
  static auto stub = tether::test::PosStream::NewStub(channel);
  return std::make_unique<RawChat>(stub.get());
}

}  // namespace tether_compile_time
