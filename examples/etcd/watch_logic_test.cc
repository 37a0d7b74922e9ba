// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "examples/etcd/watch_logic.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether {
namespace examples {
namespace etcd {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

void AddEvent(etcdserverpb::WatchResponse& r, mvccpb::Event::EventType type,
              const std::string& key, std::int64_t rev) {
  mvccpb::Event* e = r.add_events();
  e->set_type(type);
  e->mutable_kv()->set_key(key);
  e->mutable_kv()->set_mod_revision(rev);
}

TEST(PrefixEndTest, IncrementsTheLastByteBelowFF) {
  EXPECT_EQ(PrefixEnd("/a/"), "/a0");
  EXPECT_EQ(PrefixEnd("ab"), "ac");
  EXPECT_EQ(PrefixEnd(std::string("a\xff", 2)), "b");
  EXPECT_EQ(PrefixEnd(std::string("\xff\xff", 2)), std::string(1, '\0'));
  EXPECT_EQ(PrefixEnd(""), std::string(1, '\0'));
}

TEST(ParseEndpointsTest, AcceptsAListAndRejectsBadEntries) {
  auto ok = ParseEndpoints("127.0.0.1:1,127.0.0.1:2");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_THAT(*ok, ElementsAre("127.0.0.1:1", "127.0.0.1:2"));
  EXPECT_FALSE(ParseEndpoints("").ok());
  EXPECT_FALSE(ParseEndpoints("a:1,,b:2").ok());
  EXPECT_FALSE(ParseEndpoints("a:1,a:1").ok());
  EXPECT_FALSE(ParseEndpoints("nohost").ok());
  EXPECT_FALSE(ParseEndpoints("a:").ok());
  EXPECT_FALSE(ParseEndpoints(":1").ok());
}

TEST(ClassifyTest, CreatedIsControlEvenWithAHeaderRevision) {
  etcdserverpb::WatchResponse r;
  r.set_created(true);
  r.mutable_header()->set_revision(500);  // the store's revision, not ours
  EXPECT_EQ(Classify(r).kind, ResponseKind::kControl);
}

TEST(ClassifyTest, EventsGiveTheirRevisionRange) {
  etcdserverpb::WatchResponse r;
  r.mutable_header()->set_revision(99);
  AddEvent(r, mvccpb::Event::PUT, "a", 10);
  AddEvent(r, mvccpb::Event::PUT, "b", 10);  // one txn, two keys
  AddEvent(r, mvccpb::Event::DELETE, "a", 14);
  ResponseKind k = Classify(r);
  EXPECT_EQ(k.kind, ResponseKind::kEvents);
  EXPECT_EQ(k.first, 10);
  EXPECT_EQ(k.last, 14);
}

TEST(ClassifyTest, NoEventsNotCreatedIsProgress) {
  etcdserverpb::WatchResponse r;
  r.mutable_header()->set_revision(42);
  ResponseKind k = Classify(r);
  EXPECT_EQ(k.kind, ResponseKind::kProgress);
  EXPECT_EQ(k.last, 42);
}

TEST(ClassifyTest, CanceledWithCompactRevisionMeansResync) {
  etcdserverpb::WatchResponse r;
  r.set_canceled(true);
  r.set_compact_revision(77);
  EXPECT_EQ(Classify(r).kind, ResponseKind::kCompacted);
  r.set_compact_revision(0);
  r.set_cancel_reason("permission denied");
  EXPECT_EQ(Classify(r).kind, ResponseKind::kCanceled);
}

TEST(TrimTest, RemovesEventsAtOrBelowTheLastDelivered) {
  etcdserverpb::WatchResponse r;
  AddEvent(r, mvccpb::Event::PUT, "a", 5);
  AddEvent(r, mvccpb::Event::PUT, "b", 6);
  AddEvent(r, mvccpb::Event::PUT, "c", 6);
  AddEvent(r, mvccpb::Event::PUT, "d", 9);
  TrimEventsAtOrBelow(r, 6);
  ASSERT_EQ(r.events_size(), 1);
  EXPECT_EQ(r.events(0).kv().key(), "d");
  TrimEventsAtOrBelow(r, 9);
  EXPECT_EQ(r.events_size(), 0);
}

TEST(CreateWatchRequestTest, WatchesThePrefixFromTheRevision) {
  etcdserverpb::WatchRequest r = CreateWatchRequest("/p/", 8, true);
  ASSERT_TRUE(r.has_create_request());
  EXPECT_EQ(r.create_request().key(), "/p/");
  EXPECT_EQ(r.create_request().range_end(), "/p0");
  EXPECT_EQ(r.create_request().start_revision(), 8);
  EXPECT_TRUE(r.create_request().progress_notify());
}

TEST(KeyStateTest, ListingThenEventsThenSkipsCoveredOnes) {
  KeyState state;
  Listing listing;
  listing.revision = 10;
  listing.keys = {{"a", 3}, {"b", 10}};
  state.Reset(listing);
  etcdserverpb::WatchResponse r;
  AddEvent(r, mvccpb::Event::PUT, "b", 10);  // covered by the listing
  AddEvent(r, mvccpb::Event::PUT, "c", 11);
  AddEvent(r, mvccpb::Event::PUT, "d", 11);  // same txn as "c"
  AddEvent(r, mvccpb::Event::DELETE, "a", 12);
  EXPECT_EQ(state.ApplyBatch(r), 3);
  EXPECT_EQ(state.revision(), 12);
  EXPECT_THAT(state.keys(),
              ElementsAre(Pair("b", 10), Pair("c", 11), Pair("d", 11)));
  // The same batch again (a replay) changes nothing.
  EXPECT_EQ(state.ApplyBatch(r), 0);
  state.Advance(20);
  EXPECT_EQ(state.revision(), 20);
  state.Advance(15);  // never backwards
  EXPECT_EQ(state.revision(), 20);
}

}  // namespace
}  // namespace etcd
}  // namespace examples
}  // namespace tether
