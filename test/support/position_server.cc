// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "test/support/position_server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "positions.grpc.pb.h"
#include "positions.pb.h"

namespace tether {
namespace testsupport {

std::uint64_t PosPrevItem(std::uint64_t p) {
  const std::uint64_t r = p % 10;
  if (r >= 7) return p - r + 7;
  if (r >= 4) return p - r + 4;
  if (r >= 1) return p - r + 1;
  return p >= 10 ? p - 3 : 0;
}

std::uint64_t PosNextItem(std::uint64_t p) {
  const std::uint64_t r = p % 10;
  if (r < 1) return p - r + 1;
  if (r < 4) return p - r + 4;
  if (r < 7) return p - r + 7;
  return p - r + 11;
}

class PositionServer::Impl final : public tether::test::PosStream::Service {
 public:
  Impl(std::string name, absl::Duration tick)
      : name_(std::move(name)), tick_(tick) {}

  grpc::Status Watch(grpc::ServerContext* ctx,
                     const tether::test::PosRequest* req,
                     grpc::ServerWriter<tether::test::PosEvent>* w) override {
    const std::uint64_t gen = Opened(req->after());
    if (req->after() > 0 && req->after() + 1 < compacted_.load()) {
      return grpc::Status(grpc::StatusCode::OUT_OF_RANGE, "compacted");
    }
    return Stream(ctx, req->after(), gen,
                  [w](const tether::test::PosEvent& e) { return w->Write(e); },
                  nullptr);
  }

  grpc::Status Chat(grpc::ServerContext* ctx,
                    grpc::ServerReaderWriter<tether::test::PosEvent,
                                             tether::test::PosRequest>* s)
      override {
    tether::test::PosRequest open;
    if (!s->Read(&open) || !open.open()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "open first");
    }
    const std::uint64_t gen = Opened(open.after());
    {
      std::string tag;
      auto it = ctx->client_metadata().find("x-attempt");
      if (it != ctx->client_metadata().end()) {
        tag.assign(it->second.data(), it->second.size());
      }
      std::lock_guard<std::mutex> l(mu_);
      chat_tags_.push_back(std::move(tag));
    }
    std::mutex m;
    std::deque<std::uint64_t> acks;  // guarded by m
    std::thread reader([&] {
      tether::test::PosRequest r;
      while (s->Read(&r)) {
        if (r.write_id() == 0) continue;
        {
          std::lock_guard<std::mutex> l(mu_);
          write_ids_.push_back(r.write_id());
        }
        std::lock_guard<std::mutex> l(m);
        acks.push_back(r.write_id());
      }
    });
    auto write = [s](const tether::test::PosEvent& e) { return s->Write(e); };
    grpc::Status status;
    tether::test::PosEvent created;
    created.set_created(true);
    created.set_server(name_);
    if (!s->Write(created)) {
      status = grpc::Status(grpc::StatusCode::CANCELLED, "write failed");
    } else if (open.after() > 0 && open.after() + 1 < compacted_.load()) {
      tether::test::PosEvent c;
      c.set_compacted(compacted_.load());
      c.set_server(name_);
      s->Write(c);
      // The client cancels; wait for it (bounded by the call's end).
      while (!ctx->IsCancelled() && !stopping_.load() && gen >= ended_.load()) {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait_for(l, std::chrono::milliseconds(5));
      }
      status = grpc::Status(grpc::StatusCode::CANCELLED, "compacted");
    } else {
      status = Stream(ctx, open.after(), gen, write, [&] {
        std::deque<std::uint64_t> out;
        std::lock_guard<std::mutex> l(m);
        out.swap(acks);
        return out;
      });
    }
    ctx->TryCancel();  // ends the reader's Read
    reader.join();
    return status;
  }

  std::uint64_t Opened(std::uint64_t after) {
    std::lock_guard<std::mutex> l(mu_);
    opens_.push_back(after);
    return ended_.load();
  }

  // Resumes one item early (the last item at or below `after`, so the
  // first batch straddles `after`), three items per batch, one batch per
  // tick, a progress notice after every 4th batch (and the acks `take_acks`
  // gives, first), until the call ends.
  template <class Write, class TakeAcks>
  grpc::Status Stream(grpc::ServerContext* ctx, std::uint64_t after,
                      std::uint64_t gen, Write write, TakeAcks take_acks) {
    std::uint64_t cur = after == 0 ? 1 : std::max<std::uint64_t>(
                                             PosPrevItem(after), 1);
    for (std::uint64_t n = 1;; ++n) {
      if (ctx->IsCancelled()) {
        return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
      }
      if (stopping_.load() || gen < ended_.load()) {
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "ended by server");
      }
      if constexpr (!std::is_same<TakeAcks, std::nullptr_t>::value) {
        for (std::uint64_t id : take_acks()) {
          tether::test::PosEvent a;
          a.set_ack(id);
          a.set_server(name_);
          if (!write(a)) return grpc::Status::CANCELLED;
        }
      }
      tether::test::PosEvent e;
      for (int i = 0; i < 3; ++i) {
        e.add_items(cur);
        cur = PosNextItem(cur);
      }
      e.set_server(name_);
      if (!write(e)) return grpc::Status::CANCELLED;
      if (n % 4 == 0) {
        tether::test::PosEvent p;
        p.set_progress(e.items(2) + 1);
        p.set_server(name_);
        if (!write(p)) return grpc::Status::CANCELLED;
      }
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait_for(l, absl::ToChronoNanoseconds(tick_));
    }
  }

  const std::string name_;
  const absl::Duration tick_;
  std::atomic<std::uint64_t> compacted_{0};
  std::atomic<std::uint64_t> ended_{0};  // calls of a generation below end
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::uint64_t> opens_;      // guarded by mu_
  std::vector<std::uint64_t> write_ids_;  // guarded by mu_
  std::vector<std::string> chat_tags_;    // guarded by mu_
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

PositionServer::PositionServer(std::string name, absl::Duration tick)
    : impl_(std::make_unique<Impl>(std::move(name), tick)) {}

PositionServer::~PositionServer() {
  if (impl_->server_) {
    impl_->stopping_ = true;
    impl_->cv_.notify_all();
    impl_->server_->Shutdown(std::chrono::system_clock::now());
    impl_->server_->Wait();
  }
}

absl::Status PositionServer::Start() {
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                     &impl_->port_);
  b.RegisterService(impl_.get());
  impl_->server_ = b.BuildAndStart();
  if (!impl_->server_ || impl_->port_ == 0) {
    return absl::UnavailableError("PositionServer: could not start");
  }
  return absl::OkStatus();
}

std::string PositionServer::address() const {
  return absl::StrCat("127.0.0.1:", impl_->port_);
}

void PositionServer::Shutdown(absl::Duration grace) {
  impl_->server_->Shutdown(std::chrono::system_clock::now() +
                           absl::ToChronoNanoseconds(grace));
  impl_->stopping_ = true;
  impl_->cv_.notify_all();
  impl_->server_->Wait();
  impl_->server_.reset();
}

void PositionServer::Compact(std::uint64_t position) {
  impl_->compacted_ = position;
}

void PositionServer::EndAllCalls() {
  {
    std::lock_guard<std::mutex> l(impl_->mu_);
    impl_->ended_.fetch_add(1);
  }
  impl_->cv_.notify_all();
}

std::vector<std::uint64_t> PositionServer::opens() const {
  std::lock_guard<std::mutex> l(impl_->mu_);
  return impl_->opens_;
}

std::vector<std::string> PositionServer::chat_attempt_tags() const {
  std::lock_guard<std::mutex> l(impl_->mu_);
  return impl_->chat_tags_;
}

std::vector<std::uint64_t> PositionServer::write_ids() const {
  std::lock_guard<std::mutex> l(impl_->mu_);
  return impl_->write_ids_;
}

}  // namespace testsupport
}  // namespace tether
