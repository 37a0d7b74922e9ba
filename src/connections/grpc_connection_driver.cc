// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "connections/grpc_connection_driver.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "connections/pool_core.h"
#include "connections/tether_health.pb.h"
#include "grpc/grpc.h"
#include "grpcpp/channel.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/client_interceptor.h"

namespace tether {
namespace internal {

namespace {

// Process-wide, so two pools never build channels with equal arguments.
std::atomic<std::uint64_t> g_pool_nonce{0};

// How often an armed state watch wakes up with nothing to report. Bounds how
// long the driver's shutdown waits for a channel still referenced elsewhere.
constexpr absl::Duration kWatchPeriod = absl::Seconds(1);

LinkState FromGrpc(grpc_connectivity_state s) {
  switch (s) {
    case GRPC_CHANNEL_IDLE:
      return LinkState::kIdle;
    case GRPC_CHANNEL_CONNECTING:
      return LinkState::kConnecting;
    case GRPC_CHANNEL_READY:
      return LinkState::kReady;
    case GRPC_CHANNEL_TRANSIENT_FAILURE:
      return LinkState::kTransientFailure;
    case GRPC_CHANNEL_SHUTDOWN:
      break;
  }
  return LinkState::kShutdown;
}

int Millis(absl::Duration d) {
  return static_cast<int>(
      std::min<std::int64_t>(absl::ToInt64Milliseconds(d), INT_MAX));
}

gpr_timespec DeadlineAfter(absl::Duration d) {
  return gpr_time_add(
      gpr_now(GPR_CLOCK_MONOTONIC),
      gpr_time_from_millis(absl::ToInt64Milliseconds(d), GPR_TIMESPAN));
}

// Hands one of the user's shared interceptor factories to a channel, which
// wants to own its factories.
class SharedInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit SharedInterceptorFactory(
      std::shared_ptr<grpc::experimental::ClientInterceptorFactoryInterface>
          factory)
      : factory_(std::move(factory)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override {
    return factory_->CreateClientInterceptor(info);
  }

 private:
  const std::shared_ptr<grpc::experimental::ClientInterceptorFactoryInterface>
      factory_;
};

bool HasArg(const grpc::ChannelArguments& args, const char* key) {
  const grpc_channel_args c = args.c_channel_args();
  for (std::size_t i = 0; i < c.num_args; ++i) {
    if (std::strcmp(c.args[i].key, key) == 0) return true;
  }
  return false;
}

// "host:port" -> "host", "[v6]:port" -> "v6", "host" -> "host".
std::string HostOf(const std::string& authority) {
  if (!authority.empty() && authority[0] == '[') {
    const std::size_t close = authority.find(']');
    if (close != std::string::npos) return authority.substr(1, close - 1);
  }
  const std::size_t colon = authority.rfind(':');
  if (colon == std::string::npos ||
      authority.find(':') != colon) {  // none, or a bare IPv6 literal
    return authority;
  }
  return authority.substr(0, colon);
}

}  // namespace

std::shared_ptr<GrpcConnectionDriver> GrpcConnectionDriver::Create(
    const ConnectionPoolOptions& options) {
  std::shared_ptr<GrpcConnectionDriver> driver(
      new GrpcConnectionDriver(options));
  // Started under mu_, and Loop takes mu_ first: the thread can touch
  // nothing (thread_ included) before thread_ is assigned.
  MutexLock lock(&driver->mu_);
  driver->thread_ = std::thread([self = driver] { self->Loop(); });
  return driver;
}

GrpcConnectionDriver::GrpcConnectionDriver(const ConnectionPoolOptions& options)
    : options_(options), nonce_(++g_pool_nonce) {
  credentials_ = options.credentials != nullptr
                     ? options.credentials
                     : grpc::InsecureChannelCredentials();
}

GrpcConnectionDriver::~GrpcConnectionDriver() {
  // Only reached once the thread has left Loop (it holds a reference), and
  // after Shutdown, which joined or detached it.
  if (thread_.joinable()) thread_.detach();
}

void GrpcConnectionDriver::Shutdown() {
  bool on_loop_thread;
  {
    MutexLock lock(&mu_);
    if (shutting_down_) return;
    shutting_down_ = true;
    MaybeShutdownQueueLocked();
    // loop_thread_ is set by the thread itself before it runs any
    // callback, so a callback dropping the pool always sees its own id.
    on_loop_thread = std::this_thread::get_id() == loop_thread_ ||
                     OnDrainHelperThread();  // the loop thread waits for it
  }
  if (on_loop_thread) {
    thread_.detach();
  } else {
    thread_.join();
  }
}

class GrpcConnectionDriver::GrpcLink final
    : public Link,
      public std::enable_shared_from_this<GrpcLink> {
 public:
  GrpcLink(std::shared_ptr<GrpcConnectionDriver> driver, std::uint64_t id,
           std::shared_ptr<grpc::Channel> channel)
      : driver_(std::move(driver)), id_(id), channel_(std::move(channel)) {}

  std::shared_ptr<grpc::Channel> channel() override {
    MutexLock lock(&driver_->mu_);
    return channel_;
  }

  void Close() override {
    std::shared_ptr<grpc::Channel> drop;
    {
      MutexLock lock(&driver_->mu_);
      if (closed_) return;
      closed_ = true;
      drop = std::move(channel_);
      if (health_context_ != nullptr) health_context_->TryCancel();
      if (health_alarm_ != nullptr) health_alarm_->Cancel();
    }
    // Dropping the last reference shuts the channel down, which completes
    // its pending state watch at once.
  }

 private:
  friend class GrpcConnectionDriver;

  // For the driver's methods, which hold driver_->mu_ as their own mu_: tells
  // the analysis that this link's guard is that lock (checked in debug).
  void AssertDriverLockHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK(driver_->mu_) {
    driver_->mu_.AssertHeld();
  }

  // Owned: a link may be closed after the pool is gone (an idle timer that
  // fired during the pool's destruction), and Close takes driver_->mu_.
  const std::shared_ptr<GrpcConnectionDriver> driver_;
  const std::uint64_t id_;
  std::shared_ptr<grpc::Channel> channel_ ABSL_GUARDED_BY(driver_->mu_);
  bool closed_ ABSL_GUARDED_BY(driver_->mu_) = false;
  grpc_connectivity_state last_state_ ABSL_GUARDED_BY(driver_->mu_) =
      GRPC_CHANNEL_IDLE;
  bool health_started_ ABSL_GUARDED_BY(driver_->mu_) = false;
  std::unique_ptr<grpc::ClientContext> health_context_
      ABSL_GUARDED_BY(driver_->mu_);
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> health_call_
      ABSL_GUARDED_BY(driver_->mu_);
  grpc::ByteBuffer health_read_ ABSL_GUARDED_BY(driver_->mu_);
  grpc::Status health_status_ ABSL_GUARDED_BY(driver_->mu_);
  // The watch's request write and its end (`Finish`) come back in either
  // order, and gRPC completes the write into the call object: the call is
  // dropped once both are back (`EndHealthCallLocked`).
  bool health_write_pending_ ABSL_GUARDED_BY(driver_->mu_) = false;
  bool health_finished_ ABSL_GUARDED_BY(driver_->mu_) = false;
  // Watches ended in a row without an answer; sets the retry delay.
  int health_failures_ ABSL_GUARDED_BY(driver_->mu_) = 0;
  // Set while waiting to restart the watch.
  std::unique_ptr<grpc::Alarm> health_alarm_ ABSL_GUARDED_BY(driver_->mu_);
};

std::shared_ptr<Link> GrpcConnectionDriver::Open(std::uint64_t id,
                                                 const Endpoint& endpoint) {
  const std::string& address = endpoint.address;
  grpc::ChannelArguments args = options_.channel_args;
  if (!endpoint.authority.empty()) {
    // The name the server is known by, though the channel dials an address:
    // as :authority, and for TLS the host part as the name to verify
    // (unless the user set that override themselves).
    args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, endpoint.authority);
    if (!HasArg(args, GRPC_SSL_TARGET_NAME_OVERRIDE_ARG)) {
      args.SetSslTargetNameOverride(HostOf(endpoint.authority));
    }
  }
  // Own subchannel per connection: a local pool plus an argument that
  // differs per connection, so no two channels share a transport.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetString("tether.connection_id", absl::StrCat(nonce_, ".", id));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS,
              options_.keepalive_time == absl::InfiniteDuration()
                  ? INT_MAX
                  : static_cast<int>(
                        absl::ToInt64Milliseconds(options_.keepalive_time)));
  args.SetInt(
      GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
      static_cast<int>(absl::ToInt64Milliseconds(options_.keepalive_timeout)));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS,
              options_.keepalive_permit_without_calls ? 1 : 0);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // gRPC's own reconnects follow the pool's probe schedule (its default,
  // 1 s growing to 120 s, would keep a connection down long after its
  // server came back). Its connect timeout (MIN_RECONNECT_BACKOFF) stays.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
              Millis(options_.probe_initial_backoff));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
              Millis(options_.probe_max_backoff));
  std::shared_ptr<grpc::Channel> channel;
  if (options_.interceptor_factories.empty()) {
    channel = grpc::CreateCustomChannel(address, credentials_, args);
  } else {
    // gRPC owns one set of factories per channel: give it forwarders to
    // the user's shared ones.
    std::vector<
        std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
        factories;
    for (const auto& f : options_.interceptor_factories) {
      factories.push_back(std::make_unique<SharedInterceptorFactory>(f));
    }
    channel = grpc::experimental::CreateCustomChannelWithInterceptors(
        address, credentials_, args, std::move(factories));
  }
  auto link = std::make_shared<GrpcLink>(shared_from_this(), id, channel);
  MutexLock lock(&mu_);
  link->AssertDriverLockHeld();
  if (shutting_down_) {
    link->closed_ = true;
    return link;
  }
  // Start connecting now (make before break), then watch from IDLE: if the
  // channel is already CONNECTING the watch fires at once and reports it.
  channel->GetState(/*try_to_connect=*/true);
  link->last_state_ = GRPC_CHANNEL_IDLE;
  channel->NotifyOnStateChange(GRPC_CHANNEL_IDLE, DeadlineAfter(kWatchPeriod),
                               &cq_, new Op{link, OpKind::kWatch});
  return link;
}

void GrpcConnectionDriver::Loop() {
  {
    // Waits for Create to finish assigning thread_ (it holds mu_).
    MutexLock lock(&mu_);
    loop_thread_ = std::this_thread::get_id();
  }
  void* tag = nullptr;
  bool ok = false;
  while (cq_.Next(&tag, &ok)) {
    std::unique_ptr<Op> op(static_cast<Op*>(tag));
    std::shared_ptr<GrpcLink> link;
    OpKind kind;
    {
      // Ops are written under mu_; reading them under it too makes the
      // hand-off through the queue visible to TSan even when gRPC itself is
      // not instrumented.
      MutexLock lock(&mu_);
      link = std::move(op->link);
      kind = op->kind;
    }
    if (kind == OpKind::kWatch) {
      OnWatch(link, ok);
    } else {
      OnHealth(link, kind, ok);
    }
  }
}

void GrpcConnectionDriver::OnWatch(const std::shared_ptr<GrpcLink>& link,
                                   bool ok) {
  std::vector<LinkState> reports;
  {
    MutexLock lock(&mu_);
    link->AssertDriverLockHeld();
    if (link->closed_ || shutting_down_ || link->channel_ == nullptr) return;
    const grpc_connectivity_state now = link->channel_->GetState(false);
    if (ok && now == link->last_state_ && now == GRPC_CHANNEL_READY) {
      // The state changed and came back before we looked: the old transport
      // is gone, so report the departure from READY as well.
      reports.push_back(LinkState::kIdle);
    }
    if (now != link->last_state_ || !reports.empty()) {
      reports.push_back(FromGrpc(now));
    }
    link->last_state_ = now;
    if (now == GRPC_CHANNEL_READY && options_.health_check &&
        !link->health_started_) {
      StartHealthLocked(link);
    }
    if (now != GRPC_CHANNEL_SHUTDOWN) {
      link->channel_->NotifyOnStateChange(now, DeadlineAfter(kWatchPeriod),
                                          &cq_, new Op{link, OpKind::kWatch});
    }
  }
  if (reports.empty()) return;
  if (auto core = core_.lock()) {
    for (LinkState s : reports) core->OnLinkState(link->id_, s);
  }
}

void GrpcConnectionDriver::StartHealthLocked(
    const std::shared_ptr<GrpcLink>& link) {
  link->AssertDriverLockHeld();
  link->health_started_ = true;
  link->health_write_pending_ = false;
  link->health_finished_ = false;
  ++active_health_;
  link->health_context_ = std::make_unique<grpc::ClientContext>();
  grpc::GenericStub stub(link->channel_);
  link->health_call_ = stub.PrepareCall(link->health_context_.get(),
                                        "/grpc.health.v1.Health/Watch", &cq_);
  link->health_call_->StartCall(new Op{link, OpKind::kHealthStart});
}

void GrpcConnectionDriver::ScheduleHealthRetryLocked(
    const std::shared_ptr<GrpcLink>& link) {
  link->AssertDriverLockHeld();
  // The probe schedule: initial x 1.6^n up to max, +-20 %.
  const int n = std::min(link->health_failures_, 40);
  link->health_failures_ = n + 1;
  absl::Duration d = options_.probe_initial_backoff * std::pow(1.6, n);
  if (d > options_.probe_max_backoff) d = options_.probe_max_backoff;
  d *= absl::Uniform(gen_, 0.8, 1.2);
  ++active_health_;
  link->health_alarm_ = std::make_unique<grpc::Alarm>();
  link->health_alarm_->Set(&cq_, DeadlineAfter(d),
                           new Op{link, OpKind::kHealthRetry});
}

int GrpcConnectionDriver::EndHealthCallLocked(
    const std::shared_ptr<GrpcLink>& link,
    std::unique_ptr<grpc::GenericClientAsyncReaderWriter>& drop_call,
    std::unique_ptr<grpc::ClientContext>& drop_context) {
  link->AssertDriverLockHeld();
  int reported = -1;
  // The watch ended. UNIMPLEMENTED: the server has no health service,
  // which counts as serving for good. Anything else (a proxy's idle
  // timeout, the server restarting its health service, the
  // connection ending) leaves the last answer standing and restarts
  // the watch after a backoff, or on the next READY if the connection
  // has left READY by then (the state watch covers a departure).
  drop_call = std::move(link->health_call_);
  drop_context = std::move(link->health_context_);
  --active_health_;
  if (link->health_status_.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    reported = 1;
  } else if (!link->closed_ && !shutting_down_) {
    ScheduleHealthRetryLocked(link);
  }
  MaybeShutdownQueueLocked();
  return reported;
}

void GrpcConnectionDriver::OnHealth(const std::shared_ptr<GrpcLink>& link,
                                    OpKind kind, bool ok) {
  int reported = -1;  // -1 none, 1 serving, 0 not serving
  std::unique_ptr<grpc::ClientContext> drop_context;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> drop_call;
  {
    MutexLock lock(&mu_);
    link->AssertDriverLockHeld();
    grpc::GenericClientAsyncReaderWriter* call = link->health_call_.get();
    switch (kind) {
      case OpKind::kHealthStart:
        if (ok) {
          health::v1::HealthCheckRequest request;
          request.set_service(options_.health_service);
          grpc::Slice slice(request.SerializeAsString());
          grpc::ByteBuffer buffer(&slice, 1);
          link->health_write_pending_ = true;
          call->WriteLast(buffer, grpc::WriteOptions(),
                          new Op{link, OpKind::kHealthWrite});
          call->Read(&link->health_read_, new Op{link, OpKind::kHealthRead});
        } else {
          call->Finish(&link->health_status_,
                       new Op{link, OpKind::kHealthFinish});
        }
        break;
      case OpKind::kHealthWrite:
        // A failed write is followed by a failed read, which finishes.
        link->health_write_pending_ = false;
        if (link->health_finished_) {
          reported = EndHealthCallLocked(link, drop_call, drop_context);
        }
        break;
      case OpKind::kHealthRead:
        if (ok) {
          grpc::Slice slice;
          std::string bytes;
          if (link->health_read_.DumpToSingleSlice(&slice).ok()) {
            bytes.assign(reinterpret_cast<const char*>(slice.begin()),
                         slice.size());
          }
          // A malformed answer reports nothing (the last one stands).
          health::v1::HealthCheckResponse response;
          if (response.ParseFromString(bytes)) {
            if (response.status() == health::v1::HealthCheckResponse::SERVING) {
              reported = 1;
            }
            if (response.status() ==
                health::v1::HealthCheckResponse::NOT_SERVING) {
              reported = 0;
            }
          }
          link->health_failures_ = 0;  // the watch works
          call->Read(&link->health_read_, new Op{link, OpKind::kHealthRead});
        } else {
          call->Finish(&link->health_status_,
                       new Op{link, OpKind::kHealthFinish});
        }
        break;
      case OpKind::kHealthFinish:
        link->health_finished_ = true;
        if (!link->health_write_pending_) {
          reported = EndHealthCallLocked(link, drop_call, drop_context);
        }
        break;
      case OpKind::kHealthRetry: {
        std::unique_ptr<grpc::Alarm> fired = std::move(link->health_alarm_);
        --active_health_;
        if (ok && !link->closed_ && !shutting_down_ &&
            link->channel_ != nullptr &&
            link->channel_->GetState(false) == GRPC_CHANNEL_READY) {
          StartHealthLocked(link);
        } else {
          link->health_started_ = false;  // OnWatch starts it when READY
        }
        MaybeShutdownQueueLocked();
        break;
      }
      case OpKind::kWatch:
        break;
    }
  }
  if (reported < 0) return;
  if (auto core = core_.lock()) core->OnLinkHealth(link->id_, reported == 1);
}

}  // namespace internal
}  // namespace tether
