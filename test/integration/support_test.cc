// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Tests of the integration-test support code (TestServer, FaultProxy) against
// real sockets on 127.0.0.1. Waits are on events with generous deadlines.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "seqstream.grpc.pb.h"
#include "seqstream.pb.h"
#include "support/fault_proxy.h"
#include "test/support/test_server.h"

namespace tether {
namespace testsupport {
namespace {

using ::testing::ElementsAre;
using ::tether::test::Event;
using ::tether::test::PingReply;
using ::tether::test::PingRequest;
using ::tether::test::SeqStream;
using ::tether::test::WatchRequest;

constexpr absl::Duration kWait = absl::Seconds(10);

std::chrono::system_clock::time_point DeadlineIn(absl::Duration d) {
  return std::chrono::system_clock::now() + absl::ToChronoNanoseconds(d);
}

// A channel with its own subchannel (so it has its own TCP connection).
std::shared_ptr<grpc::Channel> NewChannel(const std::string& target) {
  static int counter = 0;
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("tether.test.channel_id", ++counter);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(),
                                   args);
}

// One Watch call through the sync API, with a 10 s deadline.
struct Watch {
  Watch(SeqStream::Stub* stub, std::uint64_t after_seq,
        const std::string& key = "k", bool wait_for_ready = false) {
    context.set_deadline(DeadlineIn(kWait));
    context.set_wait_for_ready(wait_for_ready);
    WatchRequest request;
    request.set_key(key);
    request.set_after_seq(after_seq);
    reader = stub->Watch(&context, request);
  }
  // Reads `n` events (fails the test if the stream ends first).
  std::vector<Event> Read(int n) {
    std::vector<Event> events;
    Event e;
    for (int i = 0; i < n && reader->Read(&e); ++i) events.push_back(e);
    EXPECT_EQ(events.size(), static_cast<std::size_t>(n));
    return events;
  }
  // Reads until the stream ends; returns its status.
  grpc::Status Drain(int* count = nullptr) {
    Event e;
    int n = 0;
    while (reader->Read(&e)) ++n;
    if (count != nullptr) *count = n;
    return reader->Finish();
  }

  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<Event>> reader;
};

TestServerOptions Named(const std::string& name,
                        absl::Duration tick = absl::Milliseconds(1)) {
  TestServerOptions o;
  o.name = name;
  o.tick = tick;
  return o;
}

TEST(TestServerTest, StreamsGapFreeSequenceFromOne) {
  TestServerOptions options = Named("s1", absl::ZeroDuration());
  options.payload_bytes = 7;
  TestServer server(options);
  ASSERT_TRUE(server.Start().ok());
  EXPECT_NE(server.port(), 0);
  EXPECT_TRUE(server.running());
  auto stub = SeqStream::NewStub(NewChannel(server.address()));

  Watch watch(stub.get(), 0, "key-1");
  std::vector<Event> events = watch.Read(500);
  ASSERT_EQ(events.size(), 500u);
  for (std::size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].seq(), i + 1);
    EXPECT_EQ(events[i].key(), "key-1");
    EXPECT_EQ(events[i].server(), "s1");
    EXPECT_EQ(events[i].payload().size(), 7u);
  }
  watch.context.TryCancel();
  EXPECT_EQ(watch.Drain().error_code(), grpc::StatusCode::CANCELLED);

  EXPECT_TRUE(server.WaitForOpenStreams(0, kWait));
  TestServerStats stats = server.stats();
  EXPECT_EQ(stats.watches_started, 1);
  EXPECT_EQ(stats.watches_ended, 1);
  EXPECT_EQ(stats.watches_failed_before_first, 0);
  EXPECT_GE(stats.messages_sent, 500);
  EXPECT_THAT(stats.after_seqs, ElementsAre(0u));
}

TEST(TestServerTest, ResumesAfterGivenSeq) {
  TestServer server(Named("s1"));
  ASSERT_TRUE(server.Start().ok());
  auto stub = SeqStream::NewStub(NewChannel(server.address()));
  {
    Watch watch(stub.get(), 41);
    std::vector<Event> events = watch.Read(3);
    ASSERT_EQ(events.size(), 3u);
    EXPECT_EQ(events[0].seq(), 42u);
    EXPECT_EQ(events[1].seq(), 43u);
    EXPECT_EQ(events[2].seq(), 44u);
    watch.context.TryCancel();
    watch.Drain();
  }
  {
    Watch watch(stub.get(), 1000);
    std::vector<Event> events = watch.Read(1);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].seq(), 1001u);
    watch.context.TryCancel();
    watch.Drain();
  }
  EXPECT_TRUE(server.WaitForWatches(2, kWait));
  EXPECT_THAT(server.after_seqs(), ElementsAre(41u, 1000u));
}

TEST(TestServerTest, EndEveryNEndsEachStreamAfterNMessages) {
  TestServerOptions options = Named("s1");
  options.end_every_n = 5;
  options.end_status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "bye");
  TestServer server(options);
  ASSERT_TRUE(server.Start().ok());
  auto stub = SeqStream::NewStub(NewChannel(server.address()));

  std::uint64_t after = 0;
  for (int round = 0; round < 3; ++round) {
    Watch watch(stub.get(), after);
    std::vector<Event> events;
    Event e;
    while (watch.reader->Read(&e)) events.push_back(e);
    grpc::Status status = watch.reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_EQ(status.error_message(), "bye");
    ASSERT_EQ(events.size(), 5u);
    EXPECT_EQ(events.front().seq(), after + 1);
    EXPECT_EQ(events.back().seq(), after + 5);
    after = events.back().seq();
  }
  EXPECT_THAT(server.after_seqs(), ElementsAre(0u, 5u, 10u));
  EXPECT_EQ(server.stats().watches_failed_before_first, 0);

  // Changed at run time: now every 2.
  server.SetEndEveryN(2, grpc::Status(grpc::StatusCode::ABORTED, "two"));
  Watch watch(stub.get(), 0);
  int count = 0;
  EXPECT_EQ(watch.Drain(&count).error_code(), grpc::StatusCode::ABORTED);
  EXPECT_EQ(count, 2);
}

TEST(TestServerTest, PermanentStatusFailsEveryWatchAndPingAtOnce) {
  TestServerOptions options = Named("s1");
  options.permanent_status =
      grpc::Status(grpc::StatusCode::NOT_FOUND, "no such key");
  TestServer server(options);
  ASSERT_TRUE(server.Start().ok());
  auto stub = SeqStream::NewStub(NewChannel(server.address()));

  for (int i = 0; i < 3; ++i) {
    Watch watch(stub.get(), 7);
    int count = -1;
    grpc::Status status = watch.Drain(&count);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_EQ(status.error_message(), "no such key");
    EXPECT_EQ(count, 0);
  }
  grpc::ClientContext ping_context;
  ping_context.set_deadline(DeadlineIn(kWait));
  PingRequest ping;
  PingReply reply;
  EXPECT_EQ(stub->Ping(&ping_context, ping, &reply).error_code(),
            grpc::StatusCode::NOT_FOUND);

  EXPECT_TRUE(server.WaitForFailedWatches(3, kWait));
  EXPECT_EQ(server.stats().messages_sent, 0);

  // Turned off: streams flow again and Ping answers.
  server.SetPermanentStatus(grpc::Status::OK);
  Watch watch(stub.get(), 7);
  std::vector<Event> events = watch.Read(1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].seq(), 8u);
  watch.context.TryCancel();
  watch.Drain();
  grpc::ClientContext ping_context2;
  ping_context2.set_deadline(DeadlineIn(kWait));
  ASSERT_TRUE(stub->Ping(&ping_context2, ping, &reply).ok());
  EXPECT_EQ(reply.server(), "s1");
  EXPECT_EQ(server.stats().pings, 2);
}

TEST(TestServerTest, GracefulShutdownSendsGoawayButStreamRunsToDeadline) {
  TestServer server(Named("s1", absl::Milliseconds(5)));
  ASSERT_TRUE(server.Start().ok());
  auto channel = NewChannel(server.address());
  auto stub = SeqStream::NewStub(channel);
  Watch watch(stub.get(), 0);
  ASSERT_EQ(watch.Read(3).size(), 3u);
  ASSERT_EQ(channel->GetState(false), GRPC_CHANNEL_READY);

  const absl::Duration grace = absl::Seconds(1);
  absl::Time start = absl::Now();
  server.ShutdownAsync(grace);
  // The GOAWAY moves the channel out of READY long before the deadline.
  ASSERT_TRUE(
      channel->WaitForStateChange(GRPC_CHANNEL_READY, DeadlineIn(kWait)));
  absl::Duration to_goaway = absl::Now() - start;
  EXPECT_LT(to_goaway, absl::Milliseconds(500));
  EXPECT_NE(channel->GetState(false), GRPC_CHANNEL_READY);

  // ... while the stream keeps going, gap-free.
  std::vector<Event> more = watch.Read(20);
  ASSERT_EQ(more.size(), 20u);
  EXPECT_EQ(more.front().seq(), 4u);
  EXPECT_EQ(more.back().seq(), 23u);

  int rest = 0;
  grpc::Status status = watch.Drain(&rest);
  absl::Duration lasted = absl::Now() - start;
  EXPECT_FALSE(status.ok());
  EXPECT_GE(lasted, grace - absl::Milliseconds(200));
  EXPECT_GT(rest, 0);
  EXPECT_TRUE(server.WaitForStopped(kWait));
  EXPECT_FALSE(server.running());
}

TEST(TestServerTest, CancelFirstDrainFailsNewStreamsBeforeFirstMessage) {
  TestServer server(Named("s1", absl::Milliseconds(5)));
  ASSERT_TRUE(server.Start().ok());
  auto channel = NewChannel(server.address());
  auto stub = SeqStream::NewStub(channel);
  Watch open(stub.get(), 0);
  ASSERT_EQ(open.Read(2).size(), 2u);

  server.CancelFirstDrain(/*window=*/absl::Seconds(1));
  grpc::Status status = open.Drain();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(status.error_message(), "server is shutting down");
  // No GOAWAY yet: the channel still looks healthy.
  EXPECT_EQ(channel->GetState(false), GRPC_CHANNEL_READY);

  // A reopen lands on the same connection and fails before its first message.
  Watch reopen(stub.get(), 2);
  int count = -1;
  status = reopen.Drain(&count);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(status.error_message(), "server is shutting down");
  EXPECT_EQ(count, 0);
  EXPECT_TRUE(server.WaitForFailedWatches(1, kWait));
  EXPECT_THAT(server.after_seqs(), ElementsAre(0u, 2u));

  EXPECT_TRUE(server.WaitForStopped(kWait));
  EXPECT_EQ(server.stats().open_streams, 0);
}

TEST(TestServerTest, KillEndsStreamsAtOnceAndRestartsOnSamePort) {
  TestServer server(Named("s1"));
  ASSERT_TRUE(server.Start().ok());
  const int port = server.port();
  auto stub = SeqStream::NewStub(NewChannel(server.address()));
  Watch watch(stub.get(), 0);
  ASSERT_EQ(watch.Read(2).size(), 2u);

  server.Kill();
  EXPECT_FALSE(server.running());
  EXPECT_FALSE(watch.Drain().ok());

  ASSERT_TRUE(server.Start().ok());
  EXPECT_EQ(server.port(), port);
  // The same channel reconnects to the restarted server.
  Watch again(stub.get(), 10, "k", /*wait_for_ready=*/true);
  std::vector<Event> events = again.Read(2);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].seq(), 11u);
  again.context.TryCancel();
  again.Drain();
  EXPECT_THAT(server.after_seqs(), ElementsAre(0u, 10u));
  EXPECT_EQ(server.Start().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(TestServerTest, InvalidOptionsAreRejected) {
  TestServerOptions options;
  options.tick = absl::Milliseconds(-1);
  TestServer server(options);
  EXPECT_EQ(server.Start().code(), absl::StatusCode::kInvalidArgument);
  TestServerOptions bad_port;
  bad_port.port = 70000;
  TestServer server2(bad_port);
  EXPECT_EQ(server2.Start().code(), absl::StatusCode::kInvalidArgument);
}

// grpc.health.v1.Health/Check through the generic stub; returns the
// HealthCheckResponse.status enum (1 SERVING, 2 NOT_SERVING), or -1.
int HealthCheck(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(kWait));
  // HealthCheckRequest{service: ""} encodes to no bytes.
  grpc::Slice empty(std::string{});
  grpc::ByteBuffer request(&empty, 1);
  grpc::ByteBuffer response;
  grpc::Status status;
  // The completion-queue API keeps everything on this thread.
  grpc::CompletionQueue cq;
  auto rpc = stub.PrepareUnaryCall(&context, "/grpc.health.v1.Health/Check",
                                   request, &cq);
  rpc->StartCall();
  int tag = 1;
  rpc->Finish(&response, &status, &tag);
  void* got = nullptr;
  bool ok = false;
  if (!cq.Next(&got, &ok) || got != &tag || !ok) return -1;
  cq.Shutdown();
  while (cq.Next(&got, &ok)) {
  }
  if (!status.ok()) return -1;
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return -1;
  std::string bytes;
  for (const auto& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  // Field 1, varint: 0x08 <value>.
  if (bytes.size() != 2 || bytes[0] != 0x08) return -1;
  return bytes[1];
}

TEST(TestServerTest, HealthServiceFollowsSetServing) {
  TestServer server(Named("s1"));
  ASSERT_TRUE(server.Start().ok());
  auto channel = NewChannel(server.address());
  EXPECT_EQ(HealthCheck(channel), 1);
  server.SetServing(false);
  EXPECT_EQ(HealthCheck(channel), 2);
  server.SetServing(true);
  EXPECT_EQ(HealthCheck(channel), 1);
}

TEST(FaultProxyGrpcTest, RoutesNewConnectionsToCurrentBackendOnly) {
  TestServer a(Named("a", absl::Milliseconds(2)));
  TestServer b(Named("b", absl::Milliseconds(2)));
  ASSERT_TRUE(a.Start().ok());
  ASSERT_TRUE(b.Start().ok());
  support::FaultProxy proxy;
  ASSERT_TRUE(proxy.Start().ok());
  ASSERT_TRUE(proxy.SetBackend(a.address()).ok());
  EXPECT_THAT(proxy.backends(), ElementsAre(a.address()));

  auto stub1 = SeqStream::NewStub(NewChannel(proxy.address()));
  Watch w1(stub1.get(), 0);
  std::vector<Event> e1 = w1.Read(3);
  ASSERT_EQ(e1.size(), 3u);
  EXPECT_EQ(e1[0].server(), "a");
  EXPECT_TRUE(proxy.WaitForLiveConnectionsTo(a.address(), 1, kWait));

  ASSERT_TRUE(proxy.SetBackend(b.address()).ok());
  auto stub2 = SeqStream::NewStub(NewChannel(proxy.address()));
  Watch w2(stub2.get(), 0);
  std::vector<Event> e2 = w2.Read(3);
  ASSERT_EQ(e2.size(), 3u);
  EXPECT_EQ(e2[0].server(), "b");

  // The old stream stays on a, gap-free.
  std::vector<Event> e1b = w1.Read(10);
  ASSERT_EQ(e1b.size(), 10u);
  for (std::size_t i = 0; i < e1b.size(); ++i) {
    EXPECT_EQ(e1b[i].server(), "a");
    EXPECT_EQ(e1b[i].seq(), 4 + i);
  }
  EXPECT_EQ(proxy.LiveConnectionsTo(a.address()), 1);
  EXPECT_EQ(proxy.LiveConnectionsTo(b.address()), 1);
  EXPECT_EQ(proxy.TotalConnectionsTo(b.address()), 1);
  EXPECT_EQ(proxy.live_connections(), 2);
  EXPECT_EQ(proxy.total_accepted(), 2);
  EXPECT_EQ(a.stats().watches_started, 1);
  EXPECT_EQ(b.stats().watches_started, 1);

  EXPECT_EQ(proxy.Close(support::Select::All()), 2);
  EXPECT_EQ(w1.Drain().error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(w2.Drain().error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(proxy.WaitForLiveConnectionsTo(a.address(), 0, kWait));
  EXPECT_TRUE(proxy.WaitForLiveConnectionsTo(b.address(), 0, kWait));
  EXPECT_TRUE(a.WaitForOpenStreams(0, kWait));
  EXPECT_TRUE(b.WaitForOpenStreams(0, kWait));
  proxy.Stop();
}

}  // namespace
}  // namespace testsupport
}  // namespace tether
