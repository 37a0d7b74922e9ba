// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Positions against real gRPC servers on 127.0.0.1: a sparse, batched server
// stream with progress notices and a bidi stream survive a graceful
// shutdown (a real GOAWAY) with every item exactly once, and a resync the
// server triggers (a resume below its compaction point).
#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <map>
#include <set>
#include <atomic>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "positions.grpc.pb.h"
#include "test/support/position_server.h"
#include "tether/connection_pool.h"
#include "tether/reconnecting_bidi_stream.h"
#include "tether/reconnecting_stream.h"

namespace tether {
namespace {

using tether::test::PosEvent;
using tether::test::PosRequest;
using testsupport::PositionServer;
using testsupport::PosNextItem;

constexpr absl::Duration kWait = absl::Seconds(30);

Position PositionOf(const PosEvent& e) {
  if (e.items_size() > 0) {
    return Position::Items(e.items(0), e.items(e.items_size() - 1));
  }
  if (e.progress() > 0) return Position::Progress(e.progress());
  return Position::None();
}

std::atomic<int> g_trims{0};

void Trim(PosEvent& e, std::uint64_t last) {
  ++g_trims;
  google::protobuf::RepeatedField<std::uint64_t> kept;
  for (std::uint64_t i : e.items()) {
    if (i > last) kept.Add(i);
  }
  e.mutable_items()->Swap(&kept);
}

ReconnectingStreamOptions Options() {
  ReconnectingStreamOptions o;
  o.migration_handoff_timeout = absl::Seconds(2);
  return o;
}

// Checks every delivered item: exactly the next one of the sequence (none
// lost, none twice, in order), except right after a resync (a new
// baseline).
class Items {
 public:
  void On(PosEvent&& e) {
    std::lock_guard<std::mutex> l(mu_);
    for (std::uint64_t i : e.items()) {
      if (last_ != 0 && i != PosNextItem(last_) && !rebased_) ++bad_;
      rebased_ = false;
      last_ = i;
      ++count_;
      ++by_server_[e.server()];
      last_server_ = e.server();
    }
    if (e.ack() > 0) acks_.push_back(e.ack());
    if (e.progress() > 0) ++progress_seen_;
    cv_.notify_all();
  }
  void Done(const absl::Status& s) {
    std::lock_guard<std::mutex> l(mu_);
    done_ = true;
    status_ = s;
    cv_.notify_all();
  }
  // The next item may start a new baseline (after a resync).
  void Rebase() {
    std::lock_guard<std::mutex> l(mu_);
    rebased_ = true;
  }
  bool WaitMoreFrom(const std::string& server, int n) {
    std::unique_lock<std::mutex> l(mu_);
    const int start = by_server_[server];
    return cv_.wait_for(l, absl::ToChronoNanoseconds(kWait), [&] {
      return done_ || by_server_[server] >= start + n;
    }) && !done_;
  }
  bool WaitMore(int n) {
    std::unique_lock<std::mutex> l(mu_);
    const int start = count_;
    return cv_.wait_for(l, absl::ToChronoNanoseconds(kWait),
                        [&] { return done_ || count_ >= start + n; }) &&
           !done_;
  }
  std::string LastServer() {
    std::lock_guard<std::mutex> l(mu_);
    return by_server_.empty() ? "" : last_server_;
  }
  int bad() {
    std::lock_guard<std::mutex> l(mu_);
    return bad_;
  }
  std::uint64_t last() {
    std::lock_guard<std::mutex> l(mu_);
    return last_;
  }
  std::vector<std::uint64_t> acks() {
    std::lock_guard<std::mutex> l(mu_);
    return acks_;
  }
  bool done() {
    std::lock_guard<std::mutex> l(mu_);
    return done_;
  }


 private:
  std::string last_server_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t last_ = 0;
  bool rebased_ = false;
  int count_ = 0;
  int bad_ = 0;
  int progress_seen_ = 0;
  std::map<std::string, int> by_server_;
  std::vector<std::uint64_t> acks_;
  bool done_ = false;
  absl::Status status_;
};

std::shared_ptr<ConnectionPool> Pool(const std::vector<std::string>& addrs) {
  ConnectionPoolOptions o;
  o.addresses = addrs;
  auto pool = ConnectionPool::Create(std::move(o));
  EXPECT_TRUE(pool.ok()) << pool.status();
  return pool.ok() ? *pool : nullptr;
}

using Watch = ReconnectingStream<PosRequest, PosEvent>;
using Chat = ReconnectingBidiStream<PosRequest, PosEvent>;

Watch::Spec WatchSpec() {
  Watch::Spec spec;
  spec.start = [](const std::shared_ptr<grpc::Channel>& ch,
                  grpc::ClientContext* ctx, const PosRequest* req,
                  grpc::ClientReadReactor<PosEvent>* r) {
    tether::test::PosStream::NewStub(ch)->async()->Watch(ctx, req, r);
  };
  spec.position_of = PositionOf;
  spec.spacing = PositionSpacing::kSparse;
  spec.trim_delivered = Trim;
  spec.resume_after = [](PosRequest& r, std::uint64_t after) {
    r.set_after(after);
  };
  return spec;
}

Chat::Spec ChatSpec() {
  Chat::Spec spec;
  spec.start = [](const std::shared_ptr<grpc::Channel>& ch,
                  grpc::ClientContext* ctx,
                  grpc::ClientBidiReactor<PosRequest, PosEvent>* r) {
    tether::test::PosStream::NewStub(ch)->async()->Chat(ctx, r);
  };
  spec.open_requests = [](const ResumeState& s) {
    PosRequest open;
    open.set_open(true);
    if (s.has_position) open.set_after(s.last);
    return std::vector<PosRequest>{open};
  };
  spec.acknowledges = [](const PosRequest& w, const PosEvent& e) {
    return e.ack() == w.write_id();
  };
  spec.position_of = PositionOf;
  spec.spacing = PositionSpacing::kSparse;
  spec.trim_delivered = Trim;
  return spec;
}

// Which server the stream is on now: the one whose items arrive.
std::string OnServer(Items& items) {
  items.WaitMore(3);
  return items.LastServer();
}

TEST(PositionsIntegration, SparseBatchedStreamSurvivesAGracefulShutdown) {
  PositionServer a("A"), b("B");
  ASSERT_TRUE(a.Start().ok());
  ASSERT_TRUE(b.Start().ok());
  auto pool = Pool({a.address(), b.address()});
  ASSERT_NE(pool, nullptr);
  Items items;
  auto s = Watch::Start(
      pool, WatchSpec(), Options(), [&](PosEvent&& e) { items.On(std::move(e)); },
      [&](const absl::Status& st) { items.Done(st); });
  ASSERT_TRUE(s.ok()) << s.status();
  auto stream = *std::move(s);
  ASSERT_TRUE(items.WaitMore(30));
  const std::string from = OnServer(items);
  PositionServer& old = from == "A" ? a : b;
  const std::string to = from == "A" ? "B" : "A";
  const int trims = g_trims.load();
  old.Shutdown(absl::Seconds(10));  // GOAWAY; returns once the stream left
  ASSERT_TRUE(items.WaitMoreFrom(to, 30));
  EXPECT_EQ(items.bad(), 0);
  // The new attempt's first batch straddled the position: trimmed.
  EXPECT_GT(g_trims.load(), trims);
  EXPECT_GE(stream->stats().migrations, 1u);
  EXPECT_GE(stream->stats().last_delivered_seq, items.last());
  // The new attempt resumed after what the old one delivered.
  PositionServer& now = from == "A" ? b : a;
  ASSERT_FALSE(now.opens().empty());
  EXPECT_GT(now.opens().back(), 0u);
  stream.reset();
}

TEST(PositionsIntegration, BidiStreamSurvivesAGracefulShutdown) {
  PositionServer a("A"), b("B");
  ASSERT_TRUE(a.Start().ok());
  ASSERT_TRUE(b.Start().ok());
  auto pool = Pool({a.address(), b.address()});
  ASSERT_NE(pool, nullptr);
  Items items;
  Chat::Spec spec = ChatSpec();
  // Each attempt says which it is; the servers record it.
  spec.configure_attempt = [](grpc::ClientContext& ctx,
                              const AttemptInfo& info) {
    ctx.AddMetadata("x-attempt",
                    absl::StrCat(info.attempt, ":",
                                 AttemptReasonName(info.reason), ":",
                                 info.resumed ? "resumed" : "fresh"));
  };
  auto s = Chat::Start(
      pool, std::move(spec), Options(),
      [&](PosEvent&& e) { items.On(std::move(e)); },
      [&](const absl::Status& st) { items.Done(st); });
  ASSERT_TRUE(s.ok()) << s.status();
  auto stream = *std::move(s);
  ASSERT_TRUE(items.WaitMore(30));
  std::uint64_t id = 0;
  for (; id < 20; ) {
    PosRequest w;
    w.set_write_id(id + 1);
    if (stream->Write(w).ok()) ++id;
  }
  const std::string from = OnServer(items);
  PositionServer& old = from == "A" ? a : b;
  const std::string to = from == "A" ? "B" : "A";
  const int trims = g_trims.load();
  old.Shutdown(absl::Seconds(10));
  for (; id < 40; ) {
    PosRequest w;
    w.set_write_id(id + 1);
    if (stream->Write(w).ok()) ++id;
  }
  ASSERT_TRUE(items.WaitMoreFrom(to, 30));
  // Every write is acknowledged in the end (replayed where needed).
  // Checked at each delivery (a batch every 2 ms), within the deadline.
  bool empty = false;
  const absl::Time deadline = absl::Now() + kWait;
  while (!empty && absl::Now() < deadline) {
    empty = stream->outbox_size() == 0;
    if (!empty && !items.WaitMore(1)) break;
  }
  EXPECT_TRUE(empty);
  EXPECT_EQ(items.bad(), 0);
  EXPECT_GT(g_trims.load(), trims);
  EXPECT_GE(stream->stats().migrations, 1u);
  std::set<std::uint64_t> received;
  for (std::uint64_t w : a.write_ids()) received.insert(w);
  for (std::uint64_t w : b.write_ids()) received.insert(w);
  EXPECT_EQ(received.size(), 40u);
  // configure_attempt reached the server on every attempt: the first on the
  // old server, a migration that resumed on the new one.
  const std::vector<std::string> old_tags = old.chat_attempt_tags();
  ASSERT_FALSE(old_tags.empty());
  EXPECT_EQ(old_tags.front(), "1:first:fresh");
  const std::vector<std::string> new_tags =
      (from == "A" ? b : a).chat_attempt_tags();
  ASSERT_FALSE(new_tags.empty());
  EXPECT_THAT(new_tags.back(), ::testing::HasSubstr(":migration:resumed"));
  stream.reset();
}

TEST(PositionsIntegration, ResyncTriggeredByTheServer) {
  PositionServer a("A");
  ASSERT_TRUE(a.Start().ok());
  auto channel =
      grpc::CreateChannel(a.address(), grpc::InsecureChannelCredentials());
  Items items;
  std::atomic<int> resyncs{0};
  Watch::Spec spec = WatchSpec();
  spec.resync_on_end = [](const absl::Status& st) {
    return st.code() == absl::StatusCode::kOutOfRange;
  };
  std::atomic<std::uint64_t> compact_at{0};
  spec.resync = [&](ResyncDone done) {
    // A real app lists the current state here (blocking is fine).
    ++resyncs;
    items.Rebase();
    done(compact_at.load() - 1);
  };
  auto s = Watch::Start(
      channel, std::move(spec), Options(),
      [&](PosEvent&& e) { items.On(std::move(e)); },
      [&](const absl::Status& st) { items.Done(st); });
  ASSERT_TRUE(s.ok()) << s.status();
  auto stream = *std::move(s);
  ASSERT_TRUE(items.WaitMore(10));
  compact_at = (items.last() / 10 + 100) * 10 + 1;
  a.Compact(compact_at);
  a.EndAllCalls();  // the reopen resumes below the compaction point
  ASSERT_TRUE(items.WaitMore(10))
      << "resyncs " << resyncs.load() << " attempts "
      << stream->stats().attempts << " done " << items.done() << " opens "
      << a.opens().size();
  EXPECT_EQ(resyncs.load(), 1);
  EXPECT_EQ(stream->stats().resyncs, 1u);
  EXPECT_GE(items.last(), compact_at.load());
  EXPECT_EQ(items.bad(), 0);
  stream.reset();
}

// A mass compaction: every watch must list again at once. With a 1 s
// `resync_jitter` the listings start as a ramp over the window (without it,
// all within a few ms), and every watch resumes past the compaction point.
TEST(PositionsIntegration, AMassCompactionListsAsARamp) {
  PositionServer a("A");
  ASSERT_TRUE(a.Start().ok());
  auto channel =
      grpc::CreateChannel(a.address(), grpc::InsecureChannelCredentials());
  constexpr int kWatches = 20;
  constexpr absl::Duration kJitter = absl::Seconds(1);
  std::mutex mu;
  std::vector<absl::Time> listed;
  std::atomic<std::uint64_t> compact_at{0};
  std::vector<std::unique_ptr<Items>> items;
  std::vector<std::unique_ptr<Watch>> watches;
  for (int i = 0; i < kWatches; ++i) items.push_back(std::make_unique<Items>());
  for (int i = 0; i < kWatches; ++i) {
    Watch::Spec spec = WatchSpec();
    spec.resync_on_end = [](const absl::Status& st) {
      return st.code() == absl::StatusCode::kOutOfRange;
    };
    Items* mine = items[i].get();
    spec.resync = [&mu, &listed, &compact_at, mine](ResyncDone done) {
      {
        std::lock_guard<std::mutex> l(mu);
        listed.push_back(absl::Now());
      }
      mine->Rebase();
      done(compact_at.load() - 1);
    };
    ReconnectingStreamOptions o = Options();
    o.resync_jitter = kJitter;
    auto s = Watch::Start(
        channel, std::move(spec), o,
        [mine](PosEvent&& e) { mine->On(std::move(e)); },
        [mine](const absl::Status& st) { mine->Done(st); });
    ASSERT_TRUE(s.ok()) << s.status();
    watches.push_back(*std::move(s));
  }
  for (auto& it : items) ASSERT_TRUE(it->WaitMore(10));
  std::uint64_t newest = 0;
  for (auto& it : items) newest = std::max(newest, it->last());
  compact_at = (newest / 10 + 100) * 10 + 1;
  a.Compact(compact_at);
  const absl::Time compacted = absl::Now();
  a.EndAllCalls();  // every reopen resumes below the compaction point
  for (int i = 0; i < kWatches; ++i) {
    ASSERT_TRUE(items[i]->WaitMore(10)) << "watch " << i;
    EXPECT_GE(items[i]->last(), compact_at.load()) << "watch " << i;
    EXPECT_EQ(items[i]->bad(), 0) << "watch " << i;
    EXPECT_EQ(watches[i]->stats().resyncs, 1u) << "watch " << i;
  }
  watches.clear();
  std::lock_guard<std::mutex> l(mu);
  ASSERT_EQ(listed.size(), static_cast<std::size_t>(kWatches));
  std::sort(listed.begin(), listed.end());
  const absl::Duration span = listed.back() - listed.front();
  // 20 points drawn in 1 s: the chance that they fall within 300 ms is
  // below 1e-9; without the jitter the span is a few ms.
  EXPECT_GE(span, absl::Milliseconds(300));
  EXPECT_LE(listed.front() - compacted, kJitter);
  std::printf(
      "[figure] %d watches compacted at once, resync_jitter 1 s: listings "
      "from %.0f ms to %.0f ms after the compaction\n",
      kWatches, absl::ToDoubleMilliseconds(listed.front() - compacted),
      absl::ToDoubleMilliseconds(listed.back() - compacted));
}

TEST(PositionsIntegration, BidiResyncOnACompactedMessage) {
  PositionServer a("A");
  ASSERT_TRUE(a.Start().ok());
  auto channel =
      grpc::CreateChannel(a.address(), grpc::InsecureChannelCredentials());
  Items items;
  std::atomic<int> resyncs{0};
  std::atomic<std::uint64_t> compact_at{0};
  Chat::Spec spec = ChatSpec();
  spec.resync_on_message = [](const PosEvent& e) { return e.compacted() > 0; };
  spec.resync = [&](ResyncDone done) {
    ++resyncs;
    items.Rebase();
    done(compact_at.load() - 1);
  };
  auto s = Chat::Start(
      channel, std::move(spec), Options(),
      [&](PosEvent&& e) { items.On(std::move(e)); },
      [&](const absl::Status& st) { items.Done(st); });
  ASSERT_TRUE(s.ok()) << s.status();
  auto stream = *std::move(s);
  ASSERT_TRUE(items.WaitMore(10));
  compact_at = (items.last() / 10 + 100) * 10 + 1;
  a.Compact(compact_at);
  a.EndAllCalls();
  ASSERT_TRUE(items.WaitMore(10));
  EXPECT_EQ(resyncs.load(), 1);
  EXPECT_EQ(stream->stats().resyncs, 1u);
  EXPECT_GE(items.last(), compact_at.load());
  EXPECT_EQ(items.bad(), 0);
  stream.reset();
}

}  // namespace
}  // namespace tether
