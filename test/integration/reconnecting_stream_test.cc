// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// ReconnectingStream against real gRPC servers on 127.0.0.1, one channel.
// Every wait is on an event with a generous deadline; nothing sleeps.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "test/integration/stream_test_util.h"
#include "test/support/test_server.h"

namespace tether {
namespace testsupport {
namespace {

constexpr absl::Duration kWait = absl::Seconds(30);

// Short backoff so the tests move quickly. While a server is down, gRPC's own
// channel backoff fails calls at once (TRANSIENT_FAILURE), so a fast backoff
// burns attempts quickly: the attempt budget is raised to match, and the
// time budget (2 min) bounds the wait.
ReconnectingStreamOptions FastOptions() {
  ReconnectingStreamOptions o;
  o.max_attempts_without_progress = 1000;
  ExponentialBackoffOptions b;
  b.initial_delay = absl::Milliseconds(20);
  b.max_delay = absl::Milliseconds(200);
  o.backoff = *ExponentialBackoff::Create(b);
  return o;
}

TEST(StreamIntegration, SixteenStreamsSurviveServerReplacedOnSamePort) {
  TestServerOptions a_opts;
  a_opts.name = "A";
  TestServer a(a_opts);
  ASSERT_TRUE(a.Start().ok());
  auto channel =
      grpc::CreateChannel(a.address(), grpc::InsecureChannelCredentials());

  constexpr int kStreams = 16;
  std::vector<std::unique_ptr<Collector>> collectors;
  std::vector<std::unique_ptr<SeqStream>> streams;
  for (int i = 0; i < kStreams; ++i) {
    collectors.push_back(std::make_unique<Collector>());
    auto s = SeqStream::Start(channel, WatchSpec(absl::StrCat("k", i)),
                              FastOptions(), collectors.back()->MessageFn(),
                              collectors.back()->DoneFn());
    ASSERT_TRUE(s.ok()) << s.status();
    streams.push_back(*std::move(s));
  }
  for (auto& c : collectors) ASSERT_TRUE(c->WaitForMoreFrom("A", 5, kWait));

  // A drains for 1 s (GOAWAY now, streams cut at the deadline) and stops;
  // B takes over the same port.
  a.ShutdownAsync(absl::Seconds(1));
  ASSERT_TRUE(a.WaitForStopped(kWait));
  TestServerOptions b_opts;
  b_opts.name = "B";
  b_opts.port = a.port();
  TestServer b(b_opts);
  ASSERT_TRUE(b.Start().ok());

  for (auto& c : collectors) {
    ASSERT_TRUE(c->WaitForMoreFrom("B", 5, kWait))
        << (c->done() ? c->done()->ToString() : "no message from B in time");
  }
  for (int i = 0; i < kStreams; ++i) {
    EXPECT_EQ(collectors[i]->out_of_order(), 0) << "stream " << i;
    EXPECT_FALSE(collectors[i]->done().has_value()) << "stream " << i;
    // The streams still run (B sends every 5 ms): compare at a moment when
    // no message is between the stream and the collector.
    StreamStats stats;
    EXPECT_TRUE(collectors[i]->WaitForStatsToAgree(
        [&] { return streams[i]->stats(); }, kWait, &stats))
        << "stream " << i << ": stats say " << stats.messages_delivered
        << " messages up to seq " << stats.last_delivered_seq
        << ", the app got " << collectors[i]->count() << " up to seq "
        << collectors[i]->last();
  }
  // Every reopen on B resumed after what its stream had delivered.
  for (std::uint64_t after : b.after_seqs()) EXPECT_GT(after, 0u);
  streams.clear();
}

TEST(StreamIntegration, StreamsGoOnWhenTheServerEndsThemEveryFewMessages) {
  TestServerOptions o;
  o.name = "flaky";
  o.tick = absl::Milliseconds(1);
  o.end_every_n = 4;
  TestServer server(o);
  ASSERT_TRUE(server.Start().ok());
  auto channel =
      grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  constexpr int kStreams = 4;
  std::vector<std::unique_ptr<Collector>> collectors;
  std::vector<std::unique_ptr<SeqStream>> streams;
  for (int i = 0; i < kStreams; ++i) {
    collectors.push_back(std::make_unique<Collector>());
    streams.push_back(*SeqStream::Start(
        channel, WatchSpec(absl::StrCat("k", i)), FastOptions(),
        collectors.back()->MessageFn(), collectors.back()->DoneFn()));
  }
  for (auto& c : collectors) ASSERT_TRUE(c->WaitForMoreFrom("", 40, kWait));
  for (int i = 0; i < kStreams; ++i) {
    EXPECT_EQ(collectors[i]->out_of_order(), 0);
    EXPECT_FALSE(collectors[i]->done().has_value());
    // At least 10 attempts were needed for 40 messages, 4 per attempt.
    EXPECT_GE(streams[i]->stats().attempts, 10u);
    EXPECT_EQ(streams[i]->stats().duplicates_dropped, 0u);
  }
}

TEST(StreamIntegration, PermanentErrorEndsTheStreamAfterOneAttempt) {
  TestServerOptions o;
  o.permanent_status = grpc::Status(grpc::StatusCode::NOT_FOUND, "no key");
  TestServer server(o);
  ASSERT_TRUE(server.Start().ok());
  auto channel =
      grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  Collector c;
  auto stream = *SeqStream::Start(channel, WatchSpec("k"), FastOptions(),
                                  c.MessageFn(), c.DoneFn());
  ASSERT_TRUE(c.WaitForDone(kWait));
  EXPECT_EQ(c.done()->code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(c.done()->message(), "no key");
  EXPECT_EQ(c.count(), 0);
  EXPECT_EQ(server.stats().watches_started, 1);
  EXPECT_EQ(stream->stats().attempts, 1u);
}

TEST(StreamIntegration, BlockingReaderAndCancel) {
  TestServer server;
  ASSERT_TRUE(server.Start().ok());
  auto channel =
      grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  auto stream = *SeqStream::Open(channel, WatchSpec("k"), FastOptions());
  tether::test::Event e;
  for (std::uint64_t i = 1; i <= 20; ++i) {
    ASSERT_TRUE(stream->Read(&e));
    EXPECT_EQ(e.seq(), i);
  }
  stream->Cancel();
  while (stream->Read(&e)) {
  }
  EXPECT_EQ(stream->Finish().code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(server.WaitForOpenStreams(0, kWait));
}

TEST(StreamIntegration, DestroyingStreamsWithCallsInFlightIsClean) {
  TestServerOptions o;
  o.tick = absl::ZeroDuration();  // as fast as flow control allows
  TestServer server(o);
  ASSERT_TRUE(server.Start().ok());
  auto channel =
      grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  for (int round = 0; round < 5; ++round) {
    std::vector<std::unique_ptr<Collector>> collectors;
    std::vector<std::unique_ptr<SeqStream>> streams;
    for (int i = 0; i < 8; ++i) {
      collectors.push_back(std::make_unique<Collector>());
      streams.push_back(*SeqStream::Start(
          channel, WatchSpec(absl::StrCat("k", i)), FastOptions(),
          collectors.back()->MessageFn(), collectors.back()->DoneFn()));
    }
    for (auto& c : collectors) ASSERT_TRUE(c->WaitForMoreFrom("", 10, kWait));
    streams.clear();  // collectors die right after: no callback may follow
  }
  EXPECT_TRUE(server.WaitForOpenStreams(0, kWait));
}

}  // namespace
}  // namespace testsupport
}  // namespace tether
