// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "test/integration/server/feed_server.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "feed.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"

namespace tether {
namespace testsupport {

using ::tether::test::FeedEvent;
using ::tether::test::FeedRequest;

namespace {

// A callback call the ticker writes to.
class Ticked {
 public:
  virtual ~Ticked() = default;
  // With the server's lock held: true when the caller must call `Write()`
  // once the lock is released (a write is then in flight, so the reactor
  // stays alive until its OnWriteDone).
  virtual bool PrepareWrite() = 0;
  virtual void Write() = 0;
  // With the server's lock held: finishes a stuck call (after unlocking,
  // through the returned flag, as `Write`).
  virtual bool ReleaseLocked() = 0;
  virtual void DoFinish() = 0;
};

}  // namespace

class FeedServer::Impl {
 public:
  explicit Impl(FeedServerOptions o) : options_(std::move(o)) {}

  // Bookkeeping shared by both APIs, under mu_.
  void Started(Ticked* t) {
    std::lock_guard<std::mutex> lock(mu_);
    starts_.push_back(absl::Now());
    if (t != nullptr) ticked_.insert(t);
  }
  void Forget(Ticked* t) {
    std::lock_guard<std::mutex> lock(mu_);
    ticked_.erase(t);
  }
  void NoticeSent() {
    std::lock_guard<std::mutex> lock(mu_);
    ++notices_;
  }
  // Sync handlers that ignore their end wait here.
  void WaitReleased() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return released_; });
  }
  FeedEvent Event(std::uint64_t seq) const {
    FeedEvent e;
    e.set_seq(seq);
    e.set_server(options_.name);
    return e;
  }
  FeedEvent Notice() const {
    FeedEvent e;
    e.set_drain_notice(true);
    e.set_server(options_.name);
    return e;
  }
  server::DrainController* drain() {
    std::lock_guard<std::mutex> lock(mu_);
    return drain_.get();
  }

  void TickLoop();
  // A sync call from its first request on.
  template <class Stream>
  grpc::Status ServeSync(grpc::ServerContext* ctx, std::uint64_t after,
                         Stream* stream);

  const FeedServerOptions options_;
  mutable std::mutex mu_;  // also guards every reactor's state
  std::condition_variable cv_;
  std::set<Ticked*> ticked_;
  std::vector<absl::Time> starts_;
  int notices_ = 0;
  bool released_ = false;
  bool stop_ticker_ = false;
  std::thread ticker_;
  int port_ = 0;
  std::unique_ptr<grpc::Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<server::DrainController> drain_;
};

namespace {

// One callback call (server stream or bidi): writes the next event at each
// tick, the notice when the drain asks, and ends when told.
template <class Base>
class FeedReactor : public Base, public Ticked {
 public:
  explicit FeedReactor(FeedServer::Impl* impl) : impl_(impl) {}

  // Registers with the drain and starts feeding after `after`.
  void Open(std::uint64_t after) {
    {
      std::lock_guard<std::mutex> lock(impl_->mu_);
      next_ = after + 1;
      open_ = true;
    }
    server::DrainHooks hooks;
    hooks.send_notice = [this] {
      std::lock_guard<std::mutex> lock(impl_->mu_);
      if (impl_->options_.send_notice) notice_pending_ = true;
    };
    hooks.end = [this](const grpc::Status& s) { RequestEnd(s); };
    if (!impl_->options_.register_calls) return;
    std::unique_ptr<server::DrainCall> call =
        impl_->drain()->Register(std::move(hooks));
    std::lock_guard<std::mutex> lock(impl_->mu_);
    call_ = std::move(call);
  }

  bool PrepareWrite() override {
    if (!open_ || finishing_ || stuck_ || in_flight_) return false;
    in_flight_ = true;
    notice_in_flight_ = notice_pending_;
    notice_pending_ = false;
    ev_ = notice_in_flight_ ? impl_->Notice() : impl_->Event(next_);
    return true;
  }
  void Write() override { this->StartWrite(&ev_); }

  void OnWriteDone(bool ok) override {
    bool finish = false;
    {
      std::lock_guard<std::mutex> lock(impl_->mu_);
      in_flight_ = false;
      if (ok && notice_in_flight_) {
        ++impl_->notices_;
      } else if (ok) {
        ++next_;
      } else {
        EndLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed"));
      }
      finish = finishing_ && !finished_;
      if (finish) finished_ = true;
    }
    if (finish) this->Finish(final_);
  }

  void OnCancel() override {
    RequestEnd(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  }

  void OnDone() override {
    // No hook of this call runs once `call_` is gone.
    std::unique_ptr<server::DrainCall> call;
    {
      std::lock_guard<std::mutex> lock(impl_->mu_);
      call = std::move(call_);
    }
    call.reset();
    impl_->Forget(this);
    delete this;
  }

  bool ReleaseLocked() override {
    if (!stuck_ || finished_) return false;
    stuck_ = false;
    finishing_ = true;
    final_ = grpc::Status(grpc::StatusCode::UNAVAILABLE, "released");
    if (in_flight_) return false;  // OnWriteDone finishes
    finished_ = true;
    return true;
  }
  void DoFinish() override { this->Finish(final_); }

 protected:
  void RequestEnd(const grpc::Status& s) {
    bool finish = false;
    {
      std::lock_guard<std::mutex> lock(impl_->mu_);
      EndLocked(s);
      finish = finishing_ && !finished_ && !in_flight_;
      if (finish) finished_ = true;
    }
    if (finish) this->Finish(final_);
  }
  void EndLocked(const grpc::Status& s) {
    if (finishing_) return;
    if (!impl_->options_.obey_end) {
      stuck_ = true;  // a handler that never ends
      return;
    }
    finishing_ = true;
    final_ = s;
  }

  FeedServer::Impl* const impl_;
  std::unique_ptr<server::DrainCall> call_;
  bool open_ = false;
  std::uint64_t next_ = 1;
  bool in_flight_ = false;
  bool notice_pending_ = false;
  bool notice_in_flight_ = false;
  bool finishing_ = false;
  bool finished_ = false;
  bool stuck_ = false;
  grpc::Status final_;
  FeedEvent ev_;
};

class WatchReactor final
    : public FeedReactor<grpc::ServerWriteReactor<FeedEvent>> {
 public:
  WatchReactor(FeedServer::Impl* impl, std::uint64_t after)
      : FeedReactor(impl) {
    impl->Started(this);
    Open(after);
  }
};

class ChatReactor final
    : public FeedReactor<grpc::ServerBidiReactor<FeedRequest, FeedEvent>> {
 public:
  explicit ChatReactor(FeedServer::Impl* impl) : FeedReactor(impl) {
    impl->Started(this);
    StartRead(&request_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;  // the client half-closed (or left): keep feeding
    if (!opened_) {
      opened_ = true;
      Open(request_.after_seq());
    }
    StartRead(&request_);
  }

 private:
  FeedRequest request_;
  bool opened_ = false;
};

class CallbackFeed final : public tether::test::Feed::CallbackService {
 public:
  explicit CallbackFeed(FeedServer::Impl* impl) : impl_(impl) {}
  grpc::ServerWriteReactor<FeedEvent>* Watch(
      grpc::CallbackServerContext*, const FeedRequest* request) override {
    return new WatchReactor(impl_, request->after_seq());
  }
  grpc::ServerBidiReactor<FeedRequest, FeedEvent>* Chat(
      grpc::CallbackServerContext*) override {
    return new ChatReactor(impl_);
  }

 private:
  FeedServer::Impl* const impl_;
};

class SyncFeed final : public tether::test::Feed::Service {
 public:
  explicit SyncFeed(FeedServer::Impl* impl) : impl_(impl) {}
  grpc::Status Watch(grpc::ServerContext* ctx, const FeedRequest* request,
                     grpc::ServerWriter<FeedEvent>* writer) override {
    impl_->Started(nullptr);
    return impl_->ServeSync(ctx, request->after_seq(), writer);
  }
  grpc::Status Chat(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<FeedEvent, FeedRequest>* stream) override {
    impl_->Started(nullptr);
    FeedRequest first;
    if (!stream->Read(&first)) return grpc::Status::OK;
    return impl_->ServeSync(ctx, first.after_seq(), stream);
  }

 private:
  FeedServer::Impl* const impl_;
};

}  // namespace

template <class Stream>
grpc::Status FeedServer::Impl::ServeSync(grpc::ServerContext* ctx,
                                         std::uint64_t after, Stream* stream) {
  // A sync handler registers without hooks and polls between writes.
  std::unique_ptr<server::DrainCall> call =
      options_.register_calls ? drain()->Register() : nullptr;
  std::uint64_t seq = after + 1;
  for (;;) {
    absl::optional<grpc::Status> end;
    if (call != nullptr) end = call->end_status();
    if (!end.has_value() && ctx->IsCancelled()) {
      end = grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
    }
    if (end.has_value()) {
      if (!options_.obey_end) WaitReleased();
      return *end;
    }
    if (call != nullptr && call->TakeNotice() && options_.send_notice) {
      if (stream->Write(Notice())) NoticeSent();
    }
    if (stream->Write(Event(seq))) ++seq;
    if (call != nullptr) {
      call->WaitForSignal(options_.tick);
    } else {
      std::this_thread::sleep_for(absl::ToChronoNanoseconds(options_.tick));
    }
  }
}

void FeedServer::Impl::TickLoop() {
  const auto tick = absl::ToChronoNanoseconds(options_.tick);
  std::vector<Ticked*> batch;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_ticker_) {
    cv_.wait_for(lock, tick, [&] { return stop_ticker_; });
    batch.clear();
    for (Ticked* t : ticked_) {
      if (t->PrepareWrite()) batch.push_back(t);
    }
    lock.unlock();
    for (Ticked* t : batch) t->Write();
    lock.lock();
  }
}

FeedServer::FeedServer(FeedServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {
  impl_->ticker_ = std::thread([this] { impl_->TickLoop(); });
}

FeedServer::~FeedServer() {
  ReleaseStuck();
  Kill();
  {
    std::lock_guard<std::mutex> lock(impl_->mu_);
    impl_->stop_ticker_ = true;
    impl_->cv_.notify_all();
  }
  impl_->ticker_.join();
}

absl::Status FeedServer::Start() {
  grpc::EnableDefaultHealthCheckService(true);
  if (impl_->options_.sync) {
    impl_->service_ = std::make_unique<SyncFeed>(impl_.get());
  } else {
    impl_->service_ = std::make_unique<CallbackFeed>(impl_.get());
  }
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(absl::StrCat("127.0.0.1:", impl_->port_),
                           impl_->options_.credentials != nullptr
                               ? impl_->options_.credentials
                               : grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(impl_->service_.get());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError("cannot listen on 127.0.0.1");
  }
  auto drain =
      server::DrainController::Create(server.get(), impl_->options_.drain);
  if (!drain.ok()) {
    server->Shutdown(std::chrono::system_clock::now());
    return drain.status();
  }
  std::lock_guard<std::mutex> lock(impl_->mu_);
  impl_->port_ = port;
  impl_->released_ = false;
  impl_->server_ = std::move(server);
  impl_->drain_ = std::move(*drain);
  return absl::OkStatus();
}

void FeedServer::Kill() {
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<server::DrainController> drain;
  {
    std::lock_guard<std::mutex> lock(impl_->mu_);
    server = std::move(impl_->server_);
    drain = std::move(impl_->drain_);
  }
  if (server == nullptr) return;
  const bool drained = drain->draining();
  if (drained) {
    // A drain reached or will reach Shutdown on the controller's thread;
    // released handlers let it return. Server::Wait returns once it has.
    drain->Wait();
    server->Wait();
  }
  drain.reset();  // stops a drain's later steps
  if (!drained) server->Shutdown(std::chrono::system_clock::now());
  server->Wait();
}

std::string FeedServer::address() const {
  return absl::StrCat("127.0.0.1:", port());
}

int FeedServer::port() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->port_;
}

server::DrainController& FeedServer::drain() { return *impl_->drain(); }

void FeedServer::ReleaseStuck() {
  std::vector<Ticked*> finish;
  {
    std::lock_guard<std::mutex> lock(impl_->mu_);
    impl_->released_ = true;
    impl_->cv_.notify_all();
    for (Ticked* t : impl_->ticked_) {
      if (t->ReleaseLocked()) finish.push_back(t);
    }
  }
  for (Ticked* t : finish) t->DoFinish();
}

int FeedServer::CallsStartedSince(absl::Time t) const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  int n = 0;
  for (absl::Time s : impl_->starts_) n += s >= t ? 1 : 0;
  return n;
}

int FeedServer::calls_started() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return static_cast<int>(impl_->starts_.size());
}

int FeedServer::notices_sent() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->notices_;
}

}  // namespace testsupport
}  // namespace tether
