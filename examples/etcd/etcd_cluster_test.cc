// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// The etcd cluster fixture itself: starts, serves, survives stops, kills and
// restarts of its members, and finds the member that holds a watch.
#include "examples/etcd/etcd_cluster.h"

#include <signal.h>

#include <memory>
#include <string>

#include "etcd/rpc.grpc.pb.h"
#include "examples/etcd/etcd_client.h"
#include "examples/etcd/watch_logic.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"

namespace tether {
namespace examples {
namespace etcd {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

absl::Time Deadline() { return absl::Now() + absl::Seconds(20); }

TEST(EtcdClusterTest, ServesAndKeepsDataAcrossStopsKillsAndRestarts) {
  auto cluster = EtcdCluster::Start(EtcdClusterOptions());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EtcdCluster& c = **cluster;
  ASSERT_EQ(c.size(), 3);
  EtcdClient client(c.client_addresses());

  auto put = client.Put("/fx/a", "1", Deadline());
  ASSERT_TRUE(put.ok()) << put.status();
  auto again = client.PutIfAbsent("/fx/a", "2", Deadline());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->written);
  EXPECT_EQ(again->revision, put->revision);

  ASSERT_TRUE(c.Stop(0).ok());
  EXPECT_FALSE(c.running(0));
  auto b = client.PutIfAbsent("/fx/b", "1", Deadline());  // fails over
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(b->written);
  EXPECT_GT(b->revision, put->revision);
  ASSERT_TRUE(c.Restart(0).ok());

  ASSERT_TRUE(c.Kill(1).ok());
  ASSERT_TRUE(c.Restart(1).ok());

  auto listing = client.List("/fx/", Deadline());
  ASSERT_TRUE(listing.ok()) << listing.status();
  EXPECT_THAT(listing->keys,
              ElementsAre(Pair("/fx/a", put->revision),
                          Pair("/fx/b", b->revision)));
  EXPECT_GE(listing->revision, b->revision);
  auto del = client.Delete("/fx/a", Deadline());
  ASSERT_TRUE(del.ok()) << del.status();
  EXPECT_TRUE(client.Compact(*del, Deadline()).ok());
  EXPECT_TRUE(client.Compact(*del, Deadline()).ok());  // already: still OK
}

TEST(EtcdClusterTest, FindsTheMemberThatHoldsAWatchStream) {
  auto cluster = EtcdCluster::Start(EtcdClusterOptions());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EtcdCluster& c = **cluster;
  auto none = c.MembersWithWatchStreams();
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());

  auto channel = grpc::CreateChannel(c.client_address(2),
                                     grpc::InsecureChannelCredentials());
  auto stub = etcdserverpb::Watch::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  auto stream = stub->Watch(&context);
  ASSERT_TRUE(stream->Write(CreateWatchRequest("/w/", 0, false)));
  etcdserverpb::WatchResponse created;
  ASSERT_TRUE(stream->Read(&created));
  EXPECT_TRUE(created.created());
  EXPECT_EQ(Classify(created).kind, ResponseKind::kControl);

  auto members = c.MembersWithWatchStreams();
  ASSERT_TRUE(members.ok()) << members.status();
  EXPECT_THAT(*members, ElementsAre(2));
  context.TryCancel();
  stream->Finish().IgnoreError();
}

// The etcd behaviour KeyWatcher's position logic relies on, checked on the
// wire with a plain synchronous bidi call.
TEST(EtcdProtocolTest, CreatedProgressBatchesAndCompaction) {
  EtcdClusterOptions options;
  options.progress_notify_interval = absl::Milliseconds(300);
  auto cluster = EtcdCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EtcdCluster& c = **cluster;
  EtcdClient client(c.client_addresses());
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  auto p1 = client.Put("/proto/a", "1", deadline);
  ASSERT_TRUE(p1.ok()) << p1.status();
  auto p2 = client.Put("/proto/b", "1", deadline);
  ASSERT_TRUE(p2.ok()) << p2.status();

  auto channel = grpc::CreateChannel(c.client_address(0),
                                     grpc::InsecureChannelCredentials());
  auto stub = etcdserverpb::Watch::NewStub(channel);
  {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    auto stream = stub->Watch(&context);
    // From p1: created (store revision in the header, no events), then the
    // old events, then progress notices at the store's revision.
    ASSERT_TRUE(stream->Write(CreateWatchRequest("/proto/", p1->revision,
                                                 true)));
    etcdserverpb::WatchResponse r;
    ASSERT_TRUE(stream->Read(&r));
    EXPECT_TRUE(r.created());
    EXPECT_EQ(r.events_size(), 0);
    EXPECT_EQ(Classify(r).kind, ResponseKind::kControl);
    std::vector<std::int64_t> revisions;
    while (revisions.size() < 2u) {
      ASSERT_TRUE(stream->Read(&r));
      ASSERT_EQ(Classify(r).kind, ResponseKind::kEvents) << r.DebugString();
      for (const auto& e : r.events()) revisions.push_back(e.kv().mod_revision());
    }
    EXPECT_THAT(revisions, ElementsAre(p1->revision, p2->revision));
    ASSERT_TRUE(stream->Read(&r));
    ResponseKind k = Classify(r);
    EXPECT_EQ(k.kind, ResponseKind::kProgress) << r.DebugString();
    EXPECT_EQ(k.last, p2->revision);
    context.TryCancel();
    stream->Finish().IgnoreError();
  }

  // Compact past p2, then watch from p1: created, then canceled with the
  // compact revision.
  auto p3 = client.Put("/proto/c", "1", deadline);
  ASSERT_TRUE(p3.ok());
  ASSERT_TRUE(client.Compact(p3->revision, deadline).ok());
  {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    auto stream = stub->Watch(&context);
    ASSERT_TRUE(stream->Write(CreateWatchRequest("/proto/", p1->revision,
                                                 true)));
    etcdserverpb::WatchResponse r;
    bool compacted = false;
    for (int i = 0; i < 3 && !compacted; ++i) {
      ASSERT_TRUE(stream->Read(&r));
      compacted = Classify(r).kind == ResponseKind::kCompacted;
    }
    EXPECT_TRUE(compacted) << r.DebugString();
    EXPECT_EQ(r.compact_revision(), p3->revision);
    context.TryCancel();
    stream->Finish().IgnoreError();
  }
}

TEST(EtcdClusterTest, MissingBinaryFailsClearly) {
  EtcdClusterOptions options;
  options.etcd_binary = "/nonexistent/etcd";
  auto cluster = EtcdCluster::Start(options);
  ASSERT_FALSE(cluster.ok());
  EXPECT_EQ(cluster.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(cluster.status().message()),
              ::testing::HasSubstr("etcd-server"));
}

TEST(EtcdClusterTest, RejectsBadOptions) {
  EtcdClusterOptions options;
  options.members = 0;
  EXPECT_EQ(EtcdCluster::Start(options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.members = 8;
  EXPECT_EQ(EtcdCluster::Start(options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.members = 3;
  options.start_timeout = absl::ZeroDuration();
  EXPECT_EQ(EtcdCluster::Start(options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace etcd
}  // namespace examples
}  // namespace tether
