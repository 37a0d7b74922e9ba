// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "test/support/test_server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "seqstream.grpc.pb.h"
#include "seqstream.pb.h"
#include "tether/internal/tsan.h"

namespace tether {
namespace testsupport {
namespace {

// TSan cannot see the system gRPC's own synchronization: mark the hand-off
// before each operation we start and at the top of each reaction.
inline void HandOverToGrpc(void* addr) { internal::HandOff(addr); }
inline void TakeBackFromGrpc(void* addr) { internal::TakeOver(addr); }

constexpr char kServiceName[] = "tether.test.SeqStream";
constexpr char kDrainMessage[] = "server is shutting down";
constexpr std::size_t kMaxPayload = 16u << 20;

void DieIf(bool bad, const char* what) {
  if (bad) {
    std::fprintf(stderr, "TestServer: invalid argument: %s\n", what);
    std::abort();
  }
}

// One thread that runs callbacks at (steady-clock) times. Used for the pause
// between two events of a stream; callbacks hold a reference on their reactor,
// so a reactor is never freed while a tick for it is pending.
class TickScheduler {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;

  TickScheduler() : thread_([this] { Loop(); }) {}
  ~TickScheduler() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
      cv_.notify_all();
    }
    thread_.join();
  }

  void RunAfter(absl::Duration delay, std::function<void()> fn) {
    SteadyTime due =
        std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(delay);
    // Notifies under the lock: the scheduler may be destroyed as soon as the
    // callback has run, which can be before this function returns.
    std::lock_guard<std::mutex> l(mu_);
    queue_.emplace(due, std::move(fn));
    cv_.notify_all();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> l(mu_);
    while (!stop_) {
      if (queue_.empty()) {
        cv_.wait(l);
        continue;
      }
      auto first = queue_.begin();
      if (first->first > std::chrono::steady_clock::now()) {
        cv_.wait_until(l, first->first);
        continue;
      }
      std::function<void()> fn = std::move(first->second);
      queue_.erase(first);
      l.unlock();
      fn();
      l.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                                       // Guarded by mu_.
  std::multimap<SteadyTime, std::function<void()>> queue_;  // Guarded by mu_.
  std::thread thread_;  // Last: starts after the members above exist.
};

}  // namespace

// What a stream reads from the server when it decides its next step.
struct Behaviour {
  std::string name;
  absl::Duration tick;
  bool mute = false;  // accept calls, write nothing
  std::size_t payload_bytes = 0;
  std::int64_t end_every_n = 0;
  grpc::Status end_status;
  grpc::Status permanent_status;
  bool drain_reject = false;
  std::multimap<std::string, std::string> error_trailers;
};

// The client metadata a test server records ("x-" keys).
std::map<std::string, std::string> XMetadata(
    const grpc::CallbackServerContext* context) {
  std::map<std::string, std::string> out;
  for (const auto& kv : context->client_metadata()) {
    std::string key(kv.first.data(), kv.first.size());
    if (key.rfind("x-", 0) != 0) continue;
    std::string value(kv.second.data(), kv.second.size());
    auto it = out.find(key);
    if (it == out.end()) {
      out.emplace(std::move(key), std::move(value));
    } else {
      it->second += "," + value;
    }
  }
  return out;
}

void AddTrailers(grpc::CallbackServerContext* context,
                 const std::multimap<std::string, std::string>& trailers) {
  for (const auto& kv : trailers) context->AddTrailingMetadata(kv.first, kv.second);
}

class WatchReactor;

class TestServer::Impl {
 public:
  explicit Impl(TestServerOptions options);
  ~Impl();

  absl::Status Start();
  void Shutdown(absl::Duration grace);
  void StartBackground(std::function<void()> fn);
  void CancelFirstDrain(absl::Duration window, absl::Duration grace);
  void EndAllStreams(const grpc::Status& status);
  void SetServing(bool serving);

  // Reactor hooks.
  Behaviour GetBehaviour();
  void OnWatchStarted(WatchReactor* reactor, std::uint64_t after_seq);
  void OnMessageSent();
  void OnWatchDone(WatchReactor* reactor, bool before_first);
  void OnReactorDeleted();
  void OnPing();
  void OnCall(std::string method, std::map<std::string, std::string> md);
  // The status the next Ping fails with, OK to answer (consumes one).
  grpc::Status TakePingFailure();
  TickScheduler& scheduler() { return scheduler_; }

  bool WaitFor(const std::function<bool(const TestServerStats&)>& pred,
               absl::Duration timeout);

  const std::string name_;
  const std::string host_;  // options_.host, fixed at construction
  // Locks `mu_`; wakes every waiter on `cv_` when it goes out of scope.
  // Used by everything that changes state a waiter may be waiting for.
  class ChangeLock {
   public:
    explicit ChangeLock(const Impl* impl) : impl_(impl), lock_(impl->mu_) {}
    // Notifies before unlocking: once `mu_` is released a waiter may
    // destroy the Impl (and `cv_`).
    ~ChangeLock() { impl_->cv_.notify_all(); }

   private:
    const Impl* impl_;
    std::unique_lock<std::mutex> lock_;
  };

  // Waits on `cv_` (with `lock` held on `mu_`) until `pred()` or `timeout`.
  template <typename Pred>
  bool WaitLocked(std::unique_lock<std::mutex>& lock, absl::Duration timeout,
                  Pred pred) const {
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), pred);
  }

  // std::mutex rather than absl::Mutex: the system abseil is not built with
  // TSan annotations, so TSan could not see absl::Mutex synchronization.
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  // All guarded by mu_:
  TestServerOptions options_;
  TestServerStats stats_;
  int port_ = 0;
  bool running_ = false;
  bool drain_reject_ = false;
  bool mute_ = false;  // SetMute
  std::multimap<std::string, std::string> error_trailers_;
  int ping_failures_ = 0;
  grpc::Status ping_failure_status_;

 private:
  struct Run;

  // Serializes Start and Shutdown (held for a whole graceful shutdown).
  // Taken before mu_, never while holding it.
  std::mutex life_mu_;
  // All guarded by mu_:
  std::shared_ptr<Run> run_;
  bool abort_background_ = false;
  std::vector<std::thread> background_;
  absl::flat_hash_set<WatchReactor*> open_;
  std::int64_t live_reactors_ = 0;
  TickScheduler scheduler_;
};

// One Watch call. Lifetime: one reference for gRPC (dropped in OnDone), one
// per pending tick, and temporary ones taken by `EndAllStreams`; deleted when
// the last goes. Decisions are made under `mu_`; gRPC is called outside it,
// because a reaction may run inline on the calling thread.
class WatchReactor : public grpc::ServerWriteReactor<tether::test::Event> {
 public:
  WatchReactor(TestServer::Impl* impl, grpc::CallbackServerContext* context,
               const tether::test::WatchRequest& req)
      : impl_(impl),
        context_(context),
        key_(req.key()),
        next_seq_(req.after_seq() + 1) {}

  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      TestServer::Impl* impl = impl_;
      delete this;
      impl->OnReactorDeleted();
    }
  }

  // First step, right after the call arrived.
  void Begin() {
    Behaviour b = impl_->GetBehaviour();
    grpc::Status fail;
    if (!b.permanent_status.ok()) {
      fail = b.permanent_status;
    } else if (b.drain_reject) {
      fail = grpc::Status(grpc::StatusCode::UNAVAILABLE, kDrainMessage);
    }
    if (!fail.ok()) {
      End(fail);
      return;
    }
    if (b.mute) {
      ScheduleTick(absl::InfiniteFuture());
      return;
    }
    bool write;
    {
      std::lock_guard<std::mutex> l(mu_);
      write = !finished_;
      if (write) PrepareWriteLocked(b);
    }
    if (write) DoWrite();
  }

  // Ends the call with `status` unless it has ended already.
  void End(grpc::Status status) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (finished_) return;
      finished_ = true;
    }
    DoFinish(std::move(status));
  }

 private:
  enum class Next { kNothing, kWrite, kSchedule, kFinish };

  ~WatchReactor() override = default;

  void DoWrite() {
    HandOverToGrpc(this);
    StartWrite(&event_);
  }
  void DoFinish(grpc::Status status) {
    if (!status.ok()) AddTrailers(context_, impl_->GetBehaviour().error_trailers);
    HandOverToGrpc(this);
    Finish(std::move(status));
  }

  void PrepareWriteLocked(const Behaviour& b) {  // Needs mu_ held.
    event_.set_key(key_);
    event_.set_seq(next_seq_++);
    event_.set_server(b.name);
    if (event_.payload().size() != b.payload_bytes) {
      event_.set_payload(std::string(b.payload_bytes, 'x'));
    }
    write_in_flight_ = true;
  }

  void OnWriteDone(bool ok) override {
    TakeBackFromGrpc(this);
    if (ok) impl_->OnMessageSent();
    Behaviour b = impl_->GetBehaviour();
    Next next = Next::kNothing;
    grpc::Status status;
    {
      std::lock_guard<std::mutex> l(mu_);
      write_in_flight_ = false;
      if (finished_) {
        next = Next::kNothing;
      } else if (!ok) {
        // The call is broken (client gone, or the server is cancelling it).
        finished_ = true;
        next = Next::kFinish;
        status = grpc::Status(grpc::StatusCode::CANCELLED, "write failed");
      } else {
        ++sent_;
        if (b.end_every_n > 0 && sent_ >= b.end_every_n) {
          finished_ = true;
          next = Next::kFinish;
          status = b.end_status;
        } else if (b.tick <= absl::ZeroDuration()) {
          PrepareWriteLocked(b);
          next = Next::kWrite;
        } else {
          next = Next::kSchedule;
        }
      }
    }
    switch (next) {
      case Next::kNothing:
        break;
      case Next::kWrite:
        DoWrite();
        break;
      case Next::kFinish:
        DoFinish(std::move(status));
        break;
      case Next::kSchedule:
        ScheduleTick(absl::Now() + b.tick);
        break;
    }
  }

  // Waits for the next write in slices of at most 100 ms, so that a long
  // tick (a server that goes silent) never holds the reactor after its call
  // ended.
  void ScheduleTick(absl::Time due) {
    Ref();
    const absl::Duration wait =
        std::min(absl::Milliseconds(100),
                 std::max(absl::ZeroDuration(), due - absl::Now()));
    impl_->scheduler().RunAfter(wait, [this, due] {
      OnTick(due);
      Unref();
    });
  }

  void OnTick(absl::Time due) {
    Behaviour b = impl_->GetBehaviour();
    bool wait_more = false;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (finished_ || write_in_flight_) return;
      wait_more = b.mute || absl::Now() < due;
      if (!wait_more) PrepareWriteLocked(b);
    }
    if (wait_more) {
      ScheduleTick(due);
      return;
    }
    DoWrite();
  }

  void OnCancel() override {
    TakeBackFromGrpc(this);
    End(grpc::Status(grpc::StatusCode::CANCELLED, "call cancelled"));
  }

  void OnDone() override {
    TakeBackFromGrpc(this);
    bool before_first;
    {
      std::lock_guard<std::mutex> l(mu_);
      before_first = sent_ == 0;
    }
    impl_->OnWatchDone(this, before_first);
    Unref();
  }

  TestServer::Impl* const impl_;
  grpc::CallbackServerContext* const context_;  // valid until OnDone
  const std::string key_;
  std::atomic<int> refs_{1};
  std::mutex mu_;
  // All guarded by mu_:
  std::uint64_t next_seq_;
  std::int64_t sent_ = 0;
  bool finished_ = false;
  bool write_in_flight_ = false;
  // Owned by gRPC while `write_in_flight_`; otherwise by `mu_`.
  tether::test::Event event_;
};

namespace {

class SeqStreamService final : public tether::test::SeqStream::CallbackService {
 public:
  explicit SeqStreamService(TestServer::Impl* impl) : impl_(impl) {}

  grpc::ServerWriteReactor<tether::test::Event>* Watch(
      grpc::CallbackServerContext* context,
      const tether::test::WatchRequest* request) override {
    TakeBackFromGrpc(this);
    impl_->OnCall("Watch", XMetadata(context));
    auto* reactor = new WatchReactor(impl_, context, *request);
    impl_->OnWatchStarted(reactor, request->after_seq());
    reactor->Begin();
    HandOverToGrpc(reactor);
    return reactor;
  }

  grpc::ServerUnaryReactor* Ping(grpc::CallbackServerContext* context,
                                 const tether::test::PingRequest* /*request*/,
                                 tether::test::PingReply* reply) override {
    TakeBackFromGrpc(this);
    Behaviour b = impl_->GetBehaviour();
    impl_->OnCall("Ping", XMetadata(context));
    impl_->OnPing();
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    grpc::Status failure = impl_->TakePingFailure();
    if (!failure.ok()) {
      AddTrailers(context, b.error_trailers);
      reactor->Finish(failure);
    } else if (!b.permanent_status.ok()) {
      AddTrailers(context, b.error_trailers);
      reactor->Finish(b.permanent_status);
    } else {
      reply->set_server(b.name);
      reactor->Finish(grpc::Status::OK);
    }
    return reactor;
  }

 private:
  TestServer::Impl* const impl_;
};

}  // namespace

// One started grpc::Server with its service. The server is declared last so
// it is destroyed first.
struct TestServer::Impl::Run {
  std::unique_ptr<SeqStreamService> service;
  std::unique_ptr<grpc::Server> server;
};

TestServer::Impl::Impl(TestServerOptions options)
    : name_(options.name), host_(options.host), options_(std::move(options)) {}

TestServer::Impl::~Impl() {
  std::vector<std::thread> background;
  {
    ChangeLock l(this);
    abort_background_ = true;
    background.swap(background_);
  }
  for (auto& t : background) t.join();
  Shutdown(absl::ZeroDuration());
  // Pending ticks hold reactors alive; the scheduler is still running, so
  // they fire and let go.
  std::unique_lock<std::mutex> l(mu_);
  if (!WaitLocked(l, absl::Seconds(30),
                  [this] { return live_reactors_ == 0; })) {
    std::fprintf(stderr, "TestServer: reactors still alive at destruction\n");
    std::abort();
  }
}

absl::Status TestServer::Impl::Start() {
  std::lock_guard<std::mutex> life(life_mu_);
  int port;
  bool serving;
  std::string host;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (running_) {
      return absl::FailedPreconditionError("TestServer already running");
    }
    const TestServerOptions& o = options_;
    if (o.port < 0 || o.port > 65535) {
      return absl::InvalidArgumentError("port must be in [0, 65535]");
    }
    if (!absl::StartsWith(o.host, "127.")) {
      return absl::InvalidArgumentError("host must be in 127.0.0.0/8");
    }
    host = o.host;
    if (o.tick < absl::ZeroDuration()) {
      return absl::InvalidArgumentError("tick must be >= 0");
    }
    if (o.payload_bytes > kMaxPayload) {
      return absl::InvalidArgumentError("payload_bytes must be <= 16 MiB");
    }
    if (o.end_every_n < 0) {
      return absl::InvalidArgumentError("end_every_n must be >= 0");
    }
    if (o.max_connection_age < absl::Milliseconds(1)) {
      return absl::InvalidArgumentError("max_connection_age must be >= 1 ms");
    }
    if (o.max_concurrent_streams < 0) {
      return absl::InvalidArgumentError("max_concurrent_streams must be >= 0");
    }
    if (o.max_connection_age_grace < absl::ZeroDuration()) {
      return absl::InvalidArgumentError(
          "max_connection_age_grace must be >= 0");
    }
    port = port_ != 0 ? port_ : o.port;
    serving = o.serving;
  }
  auto run = std::make_shared<Run>();
  run->service = std::make_unique<SeqStreamService>(this);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int selected = 0;
  std::shared_ptr<grpc::ServerCredentials> credentials;
  {
    std::lock_guard<std::mutex> l(mu_);
    credentials = options_.credentials;
  }
  if (credentials == nullptr) credentials = grpc::InsecureServerCredentials();
  builder.AddListeningPort(absl::StrCat(host, ":", port), credentials,
                           &selected);
  {
    std::lock_guard<std::mutex> l(mu_);
    // gRPC takes an int of milliseconds; INT_MAX is its "never".
    const auto ms = [](absl::Duration d) {
      return d >= absl::Milliseconds(INT_MAX)
                 ? INT_MAX
                 : static_cast<int>(absl::ToInt64Milliseconds(d));
    };
    if (options_.max_concurrent_streams > 0) {
      builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                                 options_.max_concurrent_streams);
    }
    if (options_.max_connection_age != absl::InfiniteDuration()) {
      builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                                 ms(options_.max_connection_age));
      builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                                 ms(options_.max_connection_age_grace));
    }
  }
  builder.RegisterService(run->service.get());
  HandOverToGrpc(run->service.get());
  run->server = builder.BuildAndStart();
  if (run->server == nullptr || selected == 0) {
    return absl::UnavailableError(
        absl::StrCat("TestServer could not bind ", host, ":", port));
  }
  if (auto* health = run->server->GetHealthCheckService()) {
    health->SetServingStatus(serving);
  }
  ChangeLock l(this);
  port_ = selected;
  running_ = true;
  drain_reject_ = false;
  run_ = std::move(run);
  return absl::OkStatus();
}

void TestServer::Impl::Shutdown(absl::Duration grace) {
  std::lock_guard<std::mutex> life(life_mu_);
  std::shared_ptr<Run> run;
  {
    std::lock_guard<std::mutex> l(mu_);
    run = run_;
  }
  if (run == nullptr) return;
  auto deadline =
      std::chrono::system_clock::now() +
      absl::ToChronoNanoseconds(std::max(grace, absl::ZeroDuration()));
  run->server->Shutdown(deadline);
  run->server->Wait();
  {
    // Shutdown has cancelled every call; wait until each has seen OnDone.
    std::unique_lock<std::mutex> l(mu_);
    WaitLocked(l, absl::Seconds(30), [this] { return open_.empty(); });
    run_ = nullptr;
    running_ = false;
    drain_reject_ = false;
    cv_.notify_all();
  }
  run.reset();  // Destroys server, then service (unless SetServing holds it).
}

void TestServer::Impl::StartBackground(std::function<void()> fn) {
  std::lock_guard<std::mutex> l(mu_);
  background_.emplace_back(std::move(fn));
}

void TestServer::Impl::CancelFirstDrain(absl::Duration window,
                                        absl::Duration grace) {
  {
    std::lock_guard<std::mutex> l(mu_);
    drain_reject_ = true;
  }
  EndAllStreams(grpc::Status(grpc::StatusCode::UNAVAILABLE, kDrainMessage));
  StartBackground([this, window, grace] {
    {
      std::unique_lock<std::mutex> l(mu_);
      WaitLocked(l, window, [this] { return abort_background_; });
    }
    Shutdown(grace);
  });
}

void TestServer::Impl::EndAllStreams(const grpc::Status& status) {
  std::vector<WatchReactor*> reactors;
  {
    std::lock_guard<std::mutex> l(mu_);
    reactors.assign(open_.begin(), open_.end());
    for (WatchReactor* r : reactors) r->Ref();
  }
  for (WatchReactor* r : reactors) {
    r->End(status);
    r->Unref();
  }
}

void TestServer::Impl::SetServing(bool serving) {
  std::shared_ptr<Run> run;
  {
    std::lock_guard<std::mutex> l(mu_);
    options_.serving = serving;
    run = run_;
  }
  if (run != nullptr) {
    if (auto* health = run->server->GetHealthCheckService()) {
      health->SetServingStatus(serving);
    }
  }
}

Behaviour TestServer::Impl::GetBehaviour() {
  std::lock_guard<std::mutex> l(mu_);
  Behaviour b;
  b.name = options_.name;
  b.tick = options_.tick;
  b.mute = mute_;
  b.payload_bytes = options_.payload_bytes;
  b.end_every_n = options_.end_every_n;
  b.end_status = options_.end_status;
  b.permanent_status = options_.permanent_status;
  b.drain_reject = drain_reject_;
  b.error_trailers = error_trailers_;
  return b;
}

void TestServer::Impl::OnWatchStarted(WatchReactor* reactor,
                                      std::uint64_t after_seq) {
  ChangeLock l(this);
  ++stats_.watches_started;
  ++stats_.open_streams;
  stats_.after_seqs.push_back(after_seq);
  open_.insert(reactor);
  ++live_reactors_;
}

void TestServer::Impl::OnMessageSent() {
  ChangeLock l(this);
  ++stats_.messages_sent;
}

void TestServer::Impl::OnWatchDone(WatchReactor* reactor, bool before_first) {
  ChangeLock l(this);
  ++stats_.watches_ended;
  --stats_.open_streams;
  if (before_first) ++stats_.watches_failed_before_first;
  open_.erase(reactor);
}

void TestServer::Impl::OnReactorDeleted() {
  ChangeLock l(this);
  --live_reactors_;
}

void TestServer::Impl::OnCall(std::string method,
                              std::map<std::string, std::string> md) {
  ChangeLock l(this);
  stats_.calls.push_back({std::move(method), std::move(md)});
}

grpc::Status TestServer::Impl::TakePingFailure() {
  ChangeLock l(this);
  if (ping_failures_ <= 0) return grpc::Status::OK;
  --ping_failures_;
  return ping_failure_status_;
}

void TestServer::Impl::OnPing() {
  ChangeLock l(this);
  ++stats_.pings;
}

bool TestServer::Impl::WaitFor(
    const std::function<bool(const TestServerStats&)>& pred,
    absl::Duration timeout) {
  std::unique_lock<std::mutex> l(mu_);
  return WaitLocked(l, timeout, [&] { return pred(stats_); });
}

// ---------------------------------------------------------------------------

TestServer::TestServer(TestServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

TestServer::~TestServer() = default;

absl::Status TestServer::Start() { return impl_->Start(); }

int TestServer::port() const {
  Impl::ChangeLock l(impl_.get());
  return impl_->port_;
}

std::string TestServer::address() const {
  return absl::StrCat(impl_->host_, ":", port());
}

const std::string& TestServer::name() const { return impl_->name_; }

bool TestServer::running() const {
  Impl::ChangeLock l(impl_.get());
  return impl_->running_;
}

void TestServer::SetMute(bool mute) {
  Impl::ChangeLock l(impl_.get());
  impl_->mute_ = mute;
}

void TestServer::SetTick(absl::Duration tick) {
  DieIf(tick < absl::ZeroDuration(), "tick must be >= 0");
  Impl::ChangeLock l(impl_.get());
  impl_->options_.tick = tick;
}

void TestServer::SetEndEveryN(std::int64_t n, grpc::Status status) {
  DieIf(n < 0, "end_every_n must be >= 0");
  Impl::ChangeLock l(impl_.get());
  impl_->options_.end_every_n = n;
  impl_->options_.end_status = std::move(status);
}

void TestServer::SetPermanentStatus(grpc::Status status) {
  Impl::ChangeLock l(impl_.get());
  impl_->options_.permanent_status = std::move(status);
}

void TestServer::SetErrorTrailers(
    std::multimap<std::string, std::string> trailers) {
  Impl::ChangeLock l(impl_.get());
  impl_->error_trailers_ = std::move(trailers);
}

void TestServer::FailNextPings(int n, grpc::Status status) {
  DieIf(n < 0 || (n > 0 && status.ok()),
        "FailNextPings needs n >= 0 and a non-OK status");
  Impl::ChangeLock l(impl_.get());
  impl_->ping_failures_ = n;
  impl_->ping_failure_status_ = std::move(status);
}

void TestServer::EndAllStreams(grpc::Status status) {
  DieIf(status.ok(), "EndAllStreams needs a non-OK status");
  impl_->EndAllStreams(status);
}

void TestServer::CancelFirstDrain(absl::Duration window, absl::Duration grace) {
  impl_->CancelFirstDrain(window, grace);
}

void TestServer::Shutdown(absl::Duration grace) { impl_->Shutdown(grace); }

void TestServer::ShutdownAsync(absl::Duration grace) {
  Impl* impl = impl_.get();
  impl->StartBackground([impl, grace] { impl->Shutdown(grace); });
}

void TestServer::Kill() { impl_->Shutdown(absl::ZeroDuration()); }

void TestServer::SetServing(bool serving) { impl_->SetServing(serving); }

TestServerStats TestServer::stats() const {
  Impl::ChangeLock l(impl_.get());
  return impl_->stats_;
}

std::vector<std::uint64_t> TestServer::after_seqs() const {
  Impl::ChangeLock l(impl_.get());
  return impl_->stats_.after_seqs;
}

void TestServer::ResetStats() {
  Impl::ChangeLock l(impl_.get());
  std::int64_t open = impl_->stats_.open_streams;
  impl_->stats_ = TestServerStats();
  impl_->stats_.open_streams = open;
}

bool TestServer::WaitForWatches(std::int64_t n, absl::Duration timeout) {
  return WaitFor(
      [n](const TestServerStats& s) { return s.watches_started >= n; },
      timeout);
}

bool TestServer::WaitForFailedWatches(std::int64_t n, absl::Duration timeout) {
  return WaitFor(
      [n](const TestServerStats& s) {
        return s.watches_failed_before_first >= n;
      },
      timeout);
}

bool TestServer::WaitForMessages(std::int64_t n, absl::Duration timeout) {
  return WaitFor([n](const TestServerStats& s) { return s.messages_sent >= n; },
                 timeout);
}

bool TestServer::WaitForOpenStreams(std::int64_t n, absl::Duration timeout) {
  return WaitFor([n](const TestServerStats& s) { return s.open_streams == n; },
                 timeout);
}

bool TestServer::WaitForStopped(absl::Duration timeout) {
  std::unique_lock<std::mutex> l(impl_->mu_);
  return impl_->WaitLocked(l, timeout, [this] { return !impl_->running_; });
}

bool TestServer::WaitFor(std::function<bool(const TestServerStats&)> pred,
                         absl::Duration timeout) {
  return impl_->WaitFor(pred, timeout);
}

}  // namespace testsupport
}  // namespace tether
