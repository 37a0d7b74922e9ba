// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Benchmark helpers: a ledger server that writes as fast as flow control
// allows, and a raw gRPC callback reader to compare tether against.
#ifndef TETHER_BENCH_FAST_LEDGER_H_
#define TETHER_BENCH_FAST_LEDGER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "grpcpp/grpcpp.h"
#include "ledger/ledger.grpc.pb.h"

namespace tether {
namespace bench {

namespace lv1 = ::tether::examples::ledger::v1;

// WatchAccount writes seq after_seq+1, +2, ... back to back until cancelled.
class FastLedger final : public lv1::Ledger::CallbackService {
 public:
  grpc::ServerWriteReactor<lv1::AccountEvent>* WatchAccount(
      grpc::CallbackServerContext*,
      const lv1::WatchAccountRequest* req) override {
    class R final : public grpc::ServerWriteReactor<lv1::AccountEvent> {
     public:
      R(std::string account, std::uint64_t next)
          : account_(std::move(account)), next_(next) {
        Next();
      }
      void OnWriteDone(bool ok) override {
        if (!ok) {
          Finish(grpc::Status(grpc::StatusCode::CANCELLED, "gone"));
          return;
        }
        Next();
      }
      void OnDone() override { delete this; }

     private:
      void Next() {
        ev_.set_account(account_);
        ev_.set_seq(next_);
        ev_.set_balance(static_cast<std::int64_t>(10 * next_));
        ev_.set_replica("fast");
        ++next_;
        StartWrite(&ev_);
      }
      std::string account_;
      std::uint64_t next_;
      lv1::AccountEvent ev_;
    };
    return new R(req->account(), req->after_seq() + 1);
  }
};

// Reads one stream with the raw callback API, counting messages.
class RawReader final : public grpc::ClientReadReactor<lv1::AccountEvent> {
 public:
  RawReader(lv1::Ledger::Stub* stub, const std::string& account,
            std::atomic<std::int64_t>* count)
      : count_(count) {
    req_.set_account(account);
    stub->async()->WatchAccount(&ctx_, &req_, this);
    StartRead(&ev_);
    StartCall();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    count_->fetch_add(1, std::memory_order_relaxed);
    StartRead(&ev_);
  }
  void OnDone(const grpc::Status&) override { done_.store(true); }
  void Cancel() { ctx_.TryCancel(); }
  bool done() const { return done_.load(); }

 private:
  grpc::ClientContext ctx_;
  lv1::WatchAccountRequest req_;
  lv1::AccountEvent ev_;
  std::atomic<std::int64_t>* count_;
  std::atomic<bool> done_{false};
};

}  // namespace bench
}  // namespace tether

#endif  // TETHER_BENCH_FAST_LEDGER_H_
