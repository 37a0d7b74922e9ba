// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "examples/common/ledger_replica.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "ledger/ledger.grpc.pb.h"
#include "tether/server/drain_controller.h"

namespace tether {
namespace examples {

namespace lv1 = ::tether::examples::ledger::v1;

absl::string_view ShutdownModeName(ShutdownMode mode) {
  switch (mode) {
    case ShutdownMode::kGraceful:
      return "graceful";
    case ShutdownMode::kCancelFirst:
      return "cancel-first";
    case ShutdownMode::kAbrupt:
      return "abrupt";
    case ShutdownMode::kTether:
      return "tether";
  }
  return "?";
}

absl::Status ParseShutdownMode(absl::string_view name, ShutdownMode* mode) {
  for (ShutdownMode m : {ShutdownMode::kGraceful, ShutdownMode::kCancelFirst,
                         ShutdownMode::kAbrupt, ShutdownMode::kTether}) {
    if (name == ShutdownModeName(m)) {
      *mode = m;
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--shutdown must be graceful, cancel-first, abrupt or tether, not '",
      name, "'"));
}

absl::Status Validate(const LedgerReplicaOptions& o) {
  if (o.listen.empty()) return absl::InvalidArgumentError("listen is empty");
  if (o.name.empty()) return absl::InvalidArgumentError("name is empty");
  if (o.tick <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("tick must be > 0");
  }
  if (o.pre_drain < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("pre_drain must be >= 0");
  }
  if (o.drain < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("drain must be >= 0");
  }
  if (o.drain_controller) {
    absl::Status s = server::ValidateDrainOptions(DrainOptionsFor(o));
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

server::DrainOptions DrainOptionsFor(const LedgerReplicaOptions& o) {
  server::DrainOptions d;
  d.unready_window = o.pre_drain;
  d.notice_grace = o.notice_grace;
  d.drain_deadline = o.drain;
  // Clients that move on the GOAWAY get a quarter of the drain time.
  d.goaway_grace = std::max(o.drain / 4, absl::Milliseconds(10));
  return d;
}

namespace {
class WatchReactor;
}  // namespace

class LedgerReplica::Impl final : public lv1::Ledger::CallbackService {
 public:
  explicit Impl(LedgerReplicaOptions o) : options_(std::move(o)) {}

  grpc::ServerWriteReactor<lv1::AccountEvent>* WatchAccount(
      grpc::CallbackServerContext* ctx,
      const lv1::WatchAccountRequest* request) override;

  absl::Status Start();
  void Stop(ShutdownMode mode);
  void SetServing(bool serving);
  void SetShedding(bool on);
  void TickLoop();
  // Ends every open stream with `status` (after its write in flight).
  void EndAll(const grpc::Status& status);

  // Reactor bookkeeping; see WatchReactor.
  void Finished(WatchReactor* r, bool sent_any);

  const LedgerReplicaOptions options_;
  std::string address_;

  mutable absl::Mutex mu_;
  std::set<WatchReactor*> reactors_ ABSL_GUARDED_BY(mu_);
  bool fail_new_ ABSL_GUARDED_BY(mu_) = false;
  bool shed_ ABSL_GUARDED_BY(mu_) = false;
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  server::DrainController* calls_drain_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool stop_ticker_ ABSL_GUARDED_BY(mu_) = false;
  std::int64_t started_ ABSL_GUARDED_BY(mu_) = 0;
  std::int64_t failed_before_first_ ABSL_GUARDED_BY(mu_) = 0;

  absl::Mutex stop_mu_;  // Serializes Start and Stop.
  std::unique_ptr<grpc::Server> server_;
  // With `drain_controller` (Start and Stop only); destroyed before
  // `server_`. Watches register with `calls_drain_`, the same controller
  // once it exists (the server serves before it is made).
  std::unique_ptr<server::DrainController> drain_;
  std::thread ticker_;
};

namespace {

// One WatchAccount call. All fields but ev_ are guarded by the replica's
// mutex. The reactor is alive until OnDone; Finish is only called while no
// write is in flight, so a write started by the ticker always finds it
// alive.
class WatchReactor final : public grpc::ServerWriteReactor<lv1::AccountEvent> {
 public:
  WatchReactor(LedgerReplica::Impl* impl, std::string account,
               std::uint64_t after)
      : impl_(impl), account_(std::move(account)), next_seq_(after + 1) {}

  // Registers with the replica's drain (after the constructor: the hooks
  // may run at once, on the drain's thread).
  void RegisterWith(server::DrainController& drain) {
    server::DrainHooks hooks;
    hooks.send_notice = [this] {
      absl::MutexLock lock(&impl_->mu_);
      notice_due_ = true;  // the next write is the notice
    };
    hooks.end = [this](const grpc::Status& status) {
      bool finish;
      {
        absl::MutexLock lock(&impl_->mu_);
        finish = RequestFinishLocked(status);
      }
      if (finish) DoFinish();
    };
    std::unique_ptr<server::DrainCall> call = drain.Register(std::move(hooks));
    absl::MutexLock lock(&impl_->mu_);
    drain_call_ = std::move(call);
  }

  // Called by the ticker with impl_->mu_ held: true if a write should start
  // (then the caller calls StartWrite(&ev_) after unlocking).
  bool PrepareWrite() ABSL_EXCLUSIVE_LOCKS_REQUIRED(impl_->mu_) {
    if (finishing_ || write_in_flight_) return false;
    write_in_flight_ = true;
    notice_in_flight_ = notice_due_;
    notice_due_ = false;
    ev_.Clear();
    ev_.set_account(account_);
    ev_.set_replica(impl_->options_.name);
    if (notice_in_flight_) {
      ev_.set_drain_notice(true);
    } else {
      ev_.set_seq(next_seq_);
      ev_.set_balance(static_cast<std::int64_t>(10 * next_seq_));
    }
    return true;
  }
  void Write() { StartWrite(&ev_); }

  // Ends the call with `status` once no write is in flight. With mu_ held;
  // returns true when the caller must call DoFinish() after unlocking.
  bool RequestFinishLocked(const grpc::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(impl_->mu_) {
    if (finishing_) return false;
    finishing_ = true;
    final_ = status;
    if (write_in_flight_) return false;  // OnWriteDone finishes.
    return true;
  }
  void DoFinish() { Finish(final_); }

  void OnWriteDone(bool ok) override {
    bool finish = false;
    {
      absl::MutexLock lock(&impl_->mu_);
      write_in_flight_ = false;
      if (ok && notice_in_flight_) {
        notice_in_flight_ = false;
      } else if (ok) {
        ++next_seq_;
        sent_any_ = true;
      } else if (!finishing_) {
        finishing_ = true;
        final_ = grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed");
      }
      finish = finishing_;
    }
    if (finish) Finish(final_);
  }

  void OnCancel() override {
    bool finish = false;
    {
      absl::MutexLock lock(&impl_->mu_);
      finish = RequestFinishLocked(
          grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
    }
    if (finish) DoFinish();
  }

  void OnDone() override {
    bool sent_any;
    std::unique_ptr<server::DrainCall> call;
    {
      absl::MutexLock lock(&impl_->mu_);
      sent_any = sent_any_;
      call = std::move(drain_call_);
    }
    call.reset();  // no drain hook runs after this
    impl_->Finished(this, sent_any);
    delete this;
  }

 private:
  LedgerReplica::Impl* const impl_;
  const std::string account_;
  std::uint64_t next_seq_;
  bool write_in_flight_ = false;
  bool notice_due_ = false;
  bool notice_in_flight_ = false;
  std::unique_ptr<server::DrainCall> drain_call_;
  bool finishing_ = false;
  bool sent_any_ = false;
  grpc::Status final_;
  lv1::AccountEvent ev_;
};

}  // namespace

grpc::ServerWriteReactor<lv1::AccountEvent>* LedgerReplica::Impl::WatchAccount(
    grpc::CallbackServerContext* /*ctx*/,
    const lv1::WatchAccountRequest* request) {
  auto* r = new WatchReactor(this, request->account(), request->after_seq());
  bool finish = false;
  server::DrainController* drain = nullptr;
  {
    absl::MutexLock lock(&mu_);
    drain = calls_drain_;
    ++started_;
    reactors_.insert(r);
    if (fail_new_) {
      finish = r->RequestFinishLocked(grpc::Status(
          grpc::StatusCode::UNAVAILABLE, "server is shutting down"));
    } else if (shed_) {
      finish = r->RequestFinishLocked(
          grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "load shed"));
    }
  }
  if (finish) {
    r->DoFinish();
  } else if (drain != nullptr) {
    r->RegisterWith(*drain);
  }
  return r;
}

void LedgerReplica::Impl::Finished(WatchReactor* r, bool sent_any) {
  absl::MutexLock lock(&mu_);
  reactors_.erase(r);
  if (!sent_any) ++failed_before_first_;
}

void LedgerReplica::Impl::EndAll(const grpc::Status& status) {
  std::vector<WatchReactor*> finish;
  {
    absl::MutexLock lock(&mu_);
    for (WatchReactor* r : reactors_) {
      if (r->RequestFinishLocked(status)) finish.push_back(r);
    }
  }
  for (WatchReactor* r : finish) r->DoFinish();
}

void LedgerReplica::Impl::TickLoop() {
  auto next = std::chrono::steady_clock::now();
  const auto tick = absl::ToChronoNanoseconds(options_.tick);
  std::vector<WatchReactor*> batch;
  while (true) {
    next += tick;
    {
      absl::MutexLock lock(&mu_);
      auto stop = [this]()
                      ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_ticker_; };
      auto now = std::chrono::steady_clock::now();
      if (next < now) next = now;  // fell behind: do not burst
      mu_.AwaitWithTimeout(absl::Condition(&stop),
                           absl::FromChrono(next - now));
      if (stop_ticker_) return;
      batch.clear();
      for (WatchReactor* r : reactors_) {
        if (r->PrepareWrite()) batch.push_back(r);
      }
    }
    for (WatchReactor* r : batch) r->Write();
  }
}

absl::Status LedgerReplica::Impl::Start() {
  absl::MutexLock stop_lock(&stop_mu_);
  absl::Status s = Validate(options_);
  if (!s.ok()) return s;
  {
    absl::MutexLock lock(&mu_);
    if (running_ || server_ != nullptr) {
      return absl::FailedPreconditionError("replica already started");
    }
  }
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options_.listen,
                           options_.credentials != nullptr
                               ? options_.credentials
                               : grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(this);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port == 0) {
    server_.reset();
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options_.listen));
  }
  std::string host = options_.listen.substr(0, options_.listen.rfind(':'));
  if (host.empty() || host == "0.0.0.0" || host == "[::]") host = "127.0.0.1";
  address_ = absl::StrCat(host, ":", port);
  server_->GetHealthCheckService()->SetServingStatus(true);
  if (options_.drain_controller) {
    auto drain = server::DrainController::Create(server_.get(),
                                                 DrainOptionsFor(options_));
    if (!drain.ok()) {
      server_->Shutdown(std::chrono::system_clock::now());
      server_.reset();
      return drain.status();
    }
    drain_ = std::move(*drain);
  }
  {
    absl::MutexLock lock(&mu_);
    calls_drain_ = drain_.get();
    running_ = true;
    stop_ticker_ = false;
  }
  ticker_ = std::thread([this] { TickLoop(); });
  return absl::OkStatus();
}

void LedgerReplica::Impl::Stop(ShutdownMode mode) {
  absl::MutexLock stop_lock(&stop_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (!running_) return;
    running_ = false;
  }
  auto now = [] { return std::chrono::system_clock::now(); };
  switch (mode) {
    case ShutdownMode::kGraceful:
      server_->GetHealthCheckService()->SetServingStatus(false);
      absl::SleepFor(options_.pre_drain);
      server_->Shutdown(now() + absl::ToChronoNanoseconds(options_.drain));
      break;
    case ShutdownMode::kCancelFirst: {
      {
        absl::MutexLock lock(&mu_);
        fail_new_ = true;
      }
      EndAll(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "server is shutting down"));
      absl::SleepFor(options_.drain);
      server_->Shutdown(now());
      break;
    }
    case ShutdownMode::kAbrupt:
      server_->Shutdown(now());
      break;
    case ShutdownMode::kTether: {
      if (drain_ == nullptr) {  // not set up for it: as abrupt
        server_->Shutdown(now());
        break;
      }
      drain_->Begin();
      const server::DrainReport report = drain_->Wait();
      if (!report.server_stopped) {
        // A handler never returned; the process must not destroy the
        // server (see DrainController): leave without cleaning up.
        std::_Exit(1);
      }
      break;
    }
  }
  // Shutdown cancelled every call; wait (bounded) until each saw OnDone.
  {
    absl::MutexLock lock(&mu_);
    auto empty = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return reactors_.empty();
    };
    mu_.AwaitWithTimeout(absl::Condition(&empty), absl::Seconds(10));
    stop_ticker_ = true;
  }
  ticker_.join();
  server_->Wait();
  {
    absl::MutexLock lock(&mu_);
    calls_drain_ = nullptr;
  }
  drain_.reset();
  server_.reset();
}

void LedgerReplica::Impl::SetServing(bool serving) {
  absl::MutexLock stop_lock(&stop_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (!running_) return;
  }
  server_->GetHealthCheckService()->SetServingStatus(serving);
}

void LedgerReplica::Impl::SetShedding(bool on) {
  {
    absl::MutexLock lock(&mu_);
    shed_ = on;
  }
  if (on) {
    EndAll(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "load shed"));
  }
}

LedgerReplica::LedgerReplica(LedgerReplicaOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

LedgerReplica::~LedgerReplica() { Stop(ShutdownMode::kAbrupt); }

absl::Status LedgerReplica::Start() { return impl_->Start(); }
std::string LedgerReplica::address() const { return impl_->address_; }
const std::string& LedgerReplica::name() const { return impl_->options_.name; }
void LedgerReplica::Stop(ShutdownMode mode) { impl_->Stop(mode); }
void LedgerReplica::SetServing(bool serving) { impl_->SetServing(serving); }
void LedgerReplica::SetShedding(bool on) { impl_->SetShedding(on); }

std::int64_t LedgerReplica::watches_started() const {
  absl::MutexLock lock(&impl_->mu_);
  return impl_->started_;
}
std::int64_t LedgerReplica::watches_failed_before_first() const {
  absl::MutexLock lock(&impl_->mu_);
  return impl_->failed_before_first_;
}
std::int64_t LedgerReplica::open_streams() const {
  absl::MutexLock lock(&impl_->mu_);
  return static_cast<std::int64_t>(impl_->reactors_.size());
}

}  // namespace examples
}  // namespace tether
