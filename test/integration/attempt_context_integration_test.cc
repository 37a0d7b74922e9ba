// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Interceptors on the pool's channels, per-attempt context, trailers, error
// details and server pushback, against real gRPC servers on 127.0.0.1.
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/client_interceptor.h"
#include "gtest/gtest.h"
#include "test/integration/stream_test_util.h"
#include "test/support/test_server.h"
#include "tether/connection_pool.h"
#include "tether/generated_method.h"
#include "tether/observer.h"
#include "tether/reconnecting_stream.h"

namespace tether {
namespace testsupport {
namespace {

constexpr absl::Duration kWait = absl::Seconds(30);

// Adds "x-tether-tag: <tag>" to every call's initial metadata.
class TagInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit TagInterceptor(std::string tag) : tag_(std::move(tag)) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::
                PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"x-tether-tag", tag_});
    }
    methods->Proceed();
  }

 private:
  const std::string tag_;
};

class TagFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override {
    const std::string method = info->method() ? info->method() : "";
    if (method.find("SeqStream") != std::string::npos) ++calls;
    return new TagInterceptor("auth-token-1");
  }
  std::atomic<int> calls{0};
};

class BackoffLog final : public StreamObserver {
 public:
  void OnBackoff(absl::Duration d, const absl::Status&) override {
    std::lock_guard<std::mutex> l(mu_);
    delays_.push_back(d);
  }
  std::vector<absl::Duration> delays() {
    std::lock_guard<std::mutex> l(mu_);
    return delays_;
  }

 private:
  std::mutex mu_;
  std::vector<absl::Duration> delays_;
};

SeqStream::Spec TaggedSpec() {
  SeqStream::Spec spec;
  spec.start = StartWith<tether::test::SeqStream>(
      &tether::test::SeqStream::Stub::async::Watch);
  spec.request.set_key("k");
  spec.sequence_of = SequenceFrom(&tether::test::Event::seq);
  spec.resume_after = [](tether::test::WatchRequest& r, std::uint64_t seq) {
    r.set_after_seq(seq);
  };
  spec.configure_attempt = [](grpc::ClientContext& context,
                              const AttemptInfo& info) {
    context.AddMetadata("x-attempt", std::to_string(info.attempt));
    context.AddMetadata("x-reason",
                        std::string(AttemptReasonName(info.reason)));
    context.AddMetadata("x-resume", std::to_string(info.resume_after_seq));
  };
  return spec;
}

TEST(AttemptContextIntegrationTest,
     InterceptorAndAttemptMetadataReachTheServerOnEveryAttempt) {
  TestServerOptions ao;
  ao.name = "a";
  TestServer a(ao);
  TestServerOptions bo;
  bo.name = "b";
  TestServer b(bo);
  ASSERT_TRUE(a.Start().ok());
  ASSERT_TRUE(b.Start().ok());
  auto factory = std::make_shared<TagFactory>();
  ConnectionPoolOptions po;
  po.addresses = {a.address(), b.address()};
  po.interceptor_factories = {factory};
  auto pool = ConnectionPool::Create(std::move(po));
  ASSERT_TRUE(pool.ok()) << pool.status();

  Collector c;
  auto stream = SeqStream::Start(*pool, TaggedSpec(), {}, c.MessageFn(),
                                 c.DoneFn());
  ASSERT_TRUE(stream.ok()) << stream.status();
  ASSERT_TRUE(c.WaitForMoreFrom("", 5, kWait));
  // GOAWAY from whichever server carries the stream: it migrates.
  TestServer& first = c.last_server() == "a" ? a : b;
  TestServer& second = c.last_server() == "a" ? b : a;
  first.ShutdownAsync(absl::Seconds(5));
  ASSERT_TRUE(c.WaitForMoreFrom(second.name(), 5, kWait));
  EXPECT_EQ(c.out_of_order(), 0);
  (*stream)->Cancel();
  ASSERT_TRUE(c.WaitForDone(kWait));

  std::vector<TestServerStats::Call> calls = first.stats().calls;
  for (const auto& call : second.stats().calls) calls.push_back(call);
  ASSERT_GE(calls.size(), 2u);
  bool saw_migration = false;
  for (const auto& call : calls) {
    EXPECT_EQ(call.method, "Watch");
    ASSERT_EQ(call.metadata.count("x-tether-tag"), 1u);
    EXPECT_EQ(call.metadata.at("x-tether-tag"), "auth-token-1");
    ASSERT_EQ(call.metadata.count("x-attempt"), 1u);
    ASSERT_EQ(call.metadata.count("x-reason"), 1u);
    if (call.metadata.at("x-reason") == "migration") {
      saw_migration = true;
      EXPECT_NE(call.metadata.at("x-attempt"), "1");
      EXPECT_NE(call.metadata.at("x-resume"), "0");
    }
  }
  EXPECT_TRUE(saw_migration);
  // The migrated attempt was made on the second server.
  ASSERT_FALSE(second.stats().calls.empty());
  EXPECT_EQ(second.stats().calls.back().metadata.at("x-reason"), "migration");
  EXPECT_GE(factory->calls.load(), 2);
}

TEST(AttemptContextIntegrationTest, ServerPushbackTrailerReplacesTheBackoff) {
  TestServer server;
  ASSERT_TRUE(server.Start().ok());
  server.SetErrorTrailers({{"grpc-retry-pushback-ms", "300"}});
  server.SetEndEveryN(
      3, grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "slow down"));
  auto log = std::make_shared<BackoffLog>();
  ReconnectingStreamOptions o;
  o.observer = log;
  auto channel = grpc::CreateChannel(server.address(),
                                     grpc::InsecureChannelCredentials());
  Collector c;
  auto stream =
      SeqStream::Start(channel, TaggedSpec(), o, c.MessageFn(), c.DoneFn());
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE(c.WaitForMoreFrom("", 6, kWait));
  std::vector<absl::Duration> delays = log->delays();
  ASSERT_FALSE(delays.empty());
  // Without the trailer the reopen after progress would wait 0-5 ms.
  for (absl::Duration d : delays) EXPECT_EQ(d, absl::Milliseconds(300));
  EXPECT_EQ(c.out_of_order(), 0);
}

TEST(AttemptContextIntegrationTest, NegativePushbackEndsTheStream) {
  TestServer server;
  ASSERT_TRUE(server.Start().ok());
  server.SetErrorTrailers({{"grpc-retry-pushback-ms", "-1"}});
  server.SetEndEveryN(
      2, grpc::Status(grpc::StatusCode::UNAVAILABLE, "do not come back"));
  auto channel = grpc::CreateChannel(server.address(),
                                     grpc::InsecureChannelCredentials());
  Collector c;
  auto stream =
      SeqStream::Start(channel, TaggedSpec(), {}, c.MessageFn(), c.DoneFn());
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE(c.WaitForDone(kWait));
  EXPECT_EQ(c.done()->code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(c.done()->message(), "do not come back");
  EXPECT_EQ(c.count(), 2);
  EXPECT_EQ(server.stats().watches_started, 1);
}

TEST(AttemptContextIntegrationTest, ClassifierGetsErrorDetailsAndTrailers) {
  TestServer server;
  ASSERT_TRUE(server.Start().ok());
  server.SetErrorTrailers({{"x-why", "quota"}});
  server.SetPermanentStatus(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                         "not ready", "details-bytes"));
  std::mutex mu;
  std::vector<AttemptEnd> ends;
  ReconnectingStreamOptions o;
  o.classifier = [&](const AttemptEnd& end) {
    std::lock_guard<std::mutex> l(mu);
    ends.push_back(end);
    return DefaultClassify(end);
  };
  auto channel = grpc::CreateChannel(server.address(),
                                     grpc::InsecureChannelCredentials());
  Collector c;
  auto stream =
      SeqStream::Start(channel, TaggedSpec(), o, c.MessageFn(), c.DoneFn());
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE(c.WaitForDone(kWait));
  EXPECT_EQ(c.done()->code(), absl::StatusCode::kFailedPrecondition);
  absl::optional<absl::Cord> payload =
      c.done()->GetPayload(kStatusDetailsPayloadUrl);
  ASSERT_TRUE(payload.has_value());
  EXPECT_EQ(std::string(*payload), "details-bytes");
  std::lock_guard<std::mutex> l(mu);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].error_details, "details-bytes");
  auto it = ends[0].trailing_metadata.find("x-why");
  ASSERT_NE(it, ends[0].trailing_metadata.end());
  EXPECT_EQ(it->second, "quota");
}

}  // namespace
}  // namespace testsupport
}  // namespace tether
