// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// KeyWatcher against a real 3-member etcd 3.4 cluster on loopback: rolling
// restarts, kill -9 of the member under the watch, compaction while the
// watch is cut off, and the etcd_watch CLI. Label: etcd.
#include "examples/etcd/key_watcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "examples/etcd/etcd_client.h"
#include "examples/etcd/etcd_cluster.h"
#include "examples/etcd/etcd_writer.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "support/fault_proxy.h"

namespace tether {
namespace examples {
namespace etcd {
namespace {

constexpr absl::Duration kWait = absl::Seconds(60);

struct Seen {
  std::int64_t revision;
  std::string key;
  bool put;
  absl::Time at;  // when the watcher delivered it
};

// Records what a KeyWatcher delivers; waits on it.
class Collector {
 public:
  void OnEvent(const mvccpb::Event& e) {
    absl::MutexLock lock(&mu_);
    events_.push_back(Seen{e.kv().mod_revision(), e.kv().key(),
                           e.type() == mvccpb::Event::PUT, absl::Now()});
  }
  void OnResync(const Listing&) {
    absl::MutexLock lock(&mu_);
    ++resyncs_;
  }
  void OnDone(const absl::Status& s) {
    absl::MutexLock lock(&mu_);
    done_ = true;
    status_ = s;
  }
  // Waits until every key in `keys` was delivered (or the watch ended).
  bool WaitForKeys(const std::vector<WrittenKey>& keys, absl::Duration t) {
    absl::MutexLock lock(&mu_);
    auto all = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      if (done_) return true;
      std::set<std::string> seen;
      for (const Seen& s : events_) seen.insert(s.key);
      for (const WrittenKey& k : keys) {
        if (seen.count(k.key) == 0) return false;
      }
      return true;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&all), t) && !done_;
  }
  bool WaitForResyncs(int n, absl::Duration t) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return done_ || resyncs_ >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), t) && resyncs_ >= n;
  }
  std::vector<Seen> events() {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  bool done() {
    absl::MutexLock lock(&mu_);
    return done_;
  }
  absl::Status status() {
    absl::MutexLock lock(&mu_);
    return status_;
  }

 private:
  absl::Mutex mu_;
  std::vector<Seen> events_ ABSL_GUARDED_BY(mu_);
  int resyncs_ ABSL_GUARDED_BY(mu_) = 0;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

std::unique_ptr<KeyWatcher> StartWatcher(KeyWatcherOptions options,
                                         Collector* c) {
  auto w = KeyWatcher::Start(
      std::move(options), [c](const mvccpb::Event& e) { c->OnEvent(e); },
      [c](const Listing& l) { c->OnResync(l); },
      [c](const absl::Status& s) { c->OnDone(s); });
  EXPECT_TRUE(w.ok()) << w.status();
  return w.ok() ? *std::move(w) : nullptr;
}

// Every written put delivered exactly once, at its revision, in revision
// order, and nothing else.
void ExpectExactlyOnceInOrder(const std::vector<Seen>& events,
                              const std::vector<WrittenKey>& written) {
  std::map<std::string, std::int64_t> want;
  for (const WrittenKey& k : written) want[k.key] = k.revision;
  std::map<std::string, std::int64_t> got;
  std::int64_t last = 0;
  int out_of_order = 0;
  int duplicates = 0;
  for (const Seen& s : events) {
    if (s.revision <= last) ++out_of_order;
    last = s.revision;
    if (!got.emplace(s.key, s.revision).second) ++duplicates;
  }
  EXPECT_EQ(duplicates, 0);
  EXPECT_EQ(out_of_order, 0);
  EXPECT_EQ(events.size(), written.size());
  EXPECT_EQ(got, want);
}

// Waits until the watcher's view covers etcd's current listing, then
// compares them.
void ExpectStateEqualsEtcd(KeyWatcher& w, EtcdClient& client,
                           const std::string& prefix) {
  auto listing = client.List(prefix, absl::Now() + kWait);
  ASSERT_TRUE(listing.ok()) << listing.status();
  absl::Time deadline = absl::Now() + kWait;
  Listing state = w.State();
  while (state.revision < listing->revision && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));  // polls a condition, bounded
    state = w.State();
  }
  EXPECT_GE(state.revision, listing->revision);
  EXPECT_EQ(state.keys, listing->keys);
  EXPECT_FALSE(listing->keys.empty());
}

EtcdClusterOptions FastProgress() {
  EtcdClusterOptions o;
  o.progress_notify_interval = absl::Milliseconds(500);
  return o;
}

// The watcher the cluster tests start: every member, stalls detected.
KeyWatcherOptions WatchOptions(EtcdCluster& c, const std::string& prefix) {
  KeyWatcherOptions options;
  options.endpoints = c.client_addresses();
  options.prefix = prefix;
  options.stall_timeout = absl::Seconds(3);
  return options;
}

// The member that holds the watch stream (found from etcd's gauge).
int WatchedMember(EtcdCluster& c) {
  absl::Time deadline = absl::Now() + kWait;
  while (absl::Now() < deadline) {
    auto members = c.MembersWithWatchStreams();
    EXPECT_TRUE(members.ok()) << members.status();
    if (!members.ok()) return -1;
    if (members->size() == 1) return (*members)[0];
    absl::SleepFor(absl::Milliseconds(20));  // polls the gauge, bounded
  }
  ADD_FAILURE() << "no single member holds the watch";
  return -1;
}

TEST(KeyWatcherTest, RollingRestartDeliversEveryPutOnceInOrder) {
  auto cluster = EtcdCluster::Start(FastProgress());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EtcdCluster& c = **cluster;
  EtcdClient client(c.client_addresses());
  const std::string prefix = "/roll/";
  // Something to list first.
  ASSERT_TRUE(client.Put(prefix + "before", "x", absl::Now() + kWait).ok());

  Collector collected;
  KeyWatcherOptions options = WatchOptions(c, prefix);
  auto watcher = StartWatcher(options, &collected);
  ASSERT_NE(watcher, nullptr);
  ASSERT_EQ(watcher->State().keys.size(), 1u);

  EtcdWriter writer(&client, prefix, 1000, absl::Milliseconds(5));
  writer.Start();
  ASSERT_TRUE(writer.WaitForWritten(50, kWait));
  ASSERT_TRUE(c.RollingRestart().ok());  // while the writer runs
  ASSERT_TRUE(writer.Join().ok());
  std::vector<WrittenKey> written = writer.written();
  ASSERT_EQ(written.size(), 1000u);

  ASSERT_TRUE(collected.WaitForKeys(written, kWait)) << collected.status();
  ExpectExactlyOnceInOrder(collected.events(), written);
  ExpectStateEqualsEtcd(*watcher, client, prefix);
  EXPECT_EQ(watcher->resyncs(), 0);
  EXPECT_FALSE(collected.done()) << collected.status();
  EXPECT_GE(watcher->stats().attempts, 2u);  // it did move
}

TEST(KeyWatcherTest, KillNineOfTheWatchedMember) {
  auto cluster = EtcdCluster::Start(FastProgress());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EtcdCluster& c = **cluster;
  EtcdClient client(c.client_addresses());
  const std::string prefix = "/kill/";

  Collector collected;
  KeyWatcherOptions options = WatchOptions(c, prefix);
  auto watcher = StartWatcher(options, &collected);
  ASSERT_NE(watcher, nullptr);

  EtcdWriter writer(&client, prefix, 400, absl::Milliseconds(5));
  writer.Start();
  ASSERT_TRUE(writer.WaitForWritten(50, kWait));
  const int victim = WatchedMember(c);
  ASSERT_GE(victim, 0);
  ASSERT_TRUE(c.Kill(victim).ok());
  ASSERT_TRUE(writer.WaitForWritten(250, kWait));
  ASSERT_TRUE(c.Restart(victim).ok());
  ASSERT_TRUE(writer.Join().ok());
  std::vector<WrittenKey> written = writer.written();
  ASSERT_EQ(written.size(), 400u);

  ASSERT_TRUE(collected.WaitForKeys(written, kWait)) << collected.status();
  ExpectExactlyOnceInOrder(collected.events(), written);
  ExpectStateEqualsEtcd(*watcher, client, prefix);
  EXPECT_EQ(watcher->resyncs(), 0);
}

// kill -9 of each member in turn, then members replaced by new ones on new
// addresses (member remove + add) until the only original member left is
// killed too: the watch follows the member list, and every put arrives once,
// in order.
TEST(KeyWatcherTest, KillNineOfEachMemberThenReplacedMembers) {
  auto cluster = EtcdCluster::Start(FastProgress());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EtcdCluster& c = **cluster;
  EtcdClient client(c.client_addresses());
  const std::string prefix = "/members/";

  Collector collected;
  KeyWatcherOptions options = WatchOptions(c, prefix);
  options.member_sync_interval = absl::Seconds(1);
  auto watcher = StartWatcher(options, &collected);
  ASSERT_NE(watcher, nullptr);

  // Puts all through the kills and (while they last) the replacements.
  EtcdWriter writer(&client, prefix, 1000, absl::Milliseconds(5));
  writer.Start();
  ASSERT_TRUE(writer.WaitForWritten(50, kWait));
  for (int i = 0; i < c.size(); ++i) {
    ASSERT_TRUE(c.Kill(i).ok());
    ASSERT_TRUE(c.Restart(i).ok());  // waits until the cluster serves
  }
  // Replace the member under the watch, then another one: two of the three
  // members now have addresses the watcher was never given.
  const int first = WatchedMember(c);
  ASSERT_GE(first, 0);
  const int second = (first + 1) % c.size();
  const int last_original = (first + 2) % c.size();
  const std::string gone = c.client_address(first);
  absl::Status replaced = c.Replace(first);
  ASSERT_TRUE(replaced.ok()) << replaced;
  client.SetEndpoints(c.client_addresses());
  replaced = c.Replace(second);
  ASSERT_TRUE(replaced.ok()) << replaced;
  client.SetEndpoints(c.client_addresses());
  // The watcher learns the new members from the member list.
  std::vector<std::string> want = c.client_addresses();
  std::sort(want.begin(), want.end());
  absl::Time deadline = absl::Now() + kWait;
  std::vector<std::string> got;
  while (absl::Now() < deadline) {
    got = watcher->endpoints();
    std::sort(got.begin(), got.end());
    if (got == want) break;
    absl::SleepFor(absl::Milliseconds(20));  // polls the pool, bounded
  }
  EXPECT_EQ(got, want);
  ASSERT_TRUE(writer.Join().ok());
  // Kill the last member it was given: only the new ones can serve it.
  ASSERT_TRUE(c.Kill(last_original).ok());
  EtcdWriter after(&client, prefix + "after/", 100, absl::ZeroDuration());
  after.Start();
  ASSERT_TRUE(after.Join().ok()) << "writes need 2 of the 3 members";
  std::vector<WrittenKey> written = writer.written();
  ASSERT_EQ(written.size(), 1000u);
  for (const WrittenKey& k : after.written()) written.push_back(k);

  ASSERT_TRUE(collected.WaitForKeys(written, kWait)) << collected.status();
  ExpectExactlyOnceInOrder(collected.events(), written);
  EXPECT_EQ(watcher->resyncs(), 0);
  EXPECT_FALSE(collected.done()) << collected.status();
  EXPECT_THAT(watcher->endpoints(), ::testing::Not(::testing::Contains(gone)));
}

// Two members frozen (SIGSTOP) long enough for the third to lose its leader:
// every member then refuses the watch ("no leader") or says nothing, so the
// pool suspects all three. Then kill -9 of each member in turn (the last one
// down for 6 s): the watch must find a live member soon after each kill.
// With the pool's default suspicion (30 s) and reopen delays up to 10 s, the
// watch kept going back to the killed member's address, the only one not
// under suspicion, and delivered puts 4.7-6.6 s late here (5.6-9.7 s in
// etcd_side_by_side --faults=freeze,kill); with KeyWatcher's 3 s and 1 s,
// 12-602 ms. About 25 s.
TEST(KeyWatcherTest, KillNineOfEachMemberAfterTwoWereFrozen) {
  auto cluster = EtcdCluster::Start(FastProgress());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EtcdCluster& c = **cluster;
  EtcdClient client(c.client_addresses());
  const std::string prefix = "/frozen/";

  Collector collected;
  auto watcher = StartWatcher(WatchOptions(c, prefix), &collected);
  ASSERT_NE(watcher, nullptr);

  // Puts until stopped after the faults.
  EtcdWriter writer(&client, prefix, 100000, absl::Milliseconds(10));
  writer.Start();
  ASSERT_TRUE(writer.WaitForWritten(50, kWait));
  c.Signal(1, SIGSTOP);
  c.Signal(2, SIGSTOP);
  // No leader meanwhile (etcd's election timeout is 1 s), and time for the
  // watch to try every member (its stall_timeout is 3 s): waiting on the
  // clock is the fault here.
  absl::SleepFor(absl::Seconds(8));
  c.Signal(1, SIGCONT);
  c.Signal(2, SIGCONT);
  ASSERT_TRUE(c.WaitServing(kWait).ok());
  const absl::Time thawed = absl::Now();
  for (int i = 0; i < c.size(); ++i) {
    ASSERT_TRUE(c.Kill(i).ok());
    // The member stays down a while; the last one longer than a late
    // delivery would take.
    absl::SleepFor(absl::Seconds(i + 1 < c.size() ? 1 : 6));
    ASSERT_TRUE(c.Restart(i).ok());
  }
  // A few puts after the last restart, then no more.
  ASSERT_TRUE(writer.WaitForWritten(
      static_cast<int>(writer.written().size()) + 20, kWait));
  writer.Stop();
  ASSERT_TRUE(writer.Join().ok());
  std::vector<WrittenKey> written = writer.written();

  ASSERT_TRUE(collected.WaitForKeys(written, kWait)) << collected.status();
  const std::vector<Seen> events = collected.events();
  ExpectExactlyOnceInOrder(events, written);
  // Put acknowledged -> delivered, for the puts acknowledged after the thaw
  // (the kills). Tens of ms when a live member is found at once; the bound
  // leaves room for a loaded machine and the watch's 1 s reopen cap.
  std::map<std::string, absl::Time> delivered;
  for (const Seen& e : events) delivered.emplace(e.key, e.at);
  absl::Duration worst = absl::ZeroDuration();
  for (const WrittenKey& k : written) {
    if (k.acked < thawed) continue;
    worst = std::max(worst, delivered.at(k.key) - k.acked);
  }
  std::printf("[figure] frozen, then kill -9 of each member: longest put -> "
              "event %s\n",
              absl::FormatDuration(worst).c_str());
  EXPECT_LT(worst, absl::Seconds(3)) << "a put delivered late after a kill";
  EXPECT_EQ(watcher->resyncs(), 0);
  EXPECT_FALSE(collected.done()) << collected.status();
}

TEST(KeyWatcherTest, CompactionWhileCutOffResyncsOnce) {
  auto cluster = EtcdCluster::Start(FastProgress());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EtcdCluster& c = **cluster;
  EtcdClient client(c.client_addresses());
  const std::string prefix = "/compact/";

  // The watcher reaches member 0 only through the proxy.
  support::FaultProxy proxy;
  ASSERT_TRUE(proxy.Start().ok());
  ASSERT_TRUE(proxy.SetBackend(c.client_address(0)).ok());

  EtcdWriter first(&client, prefix + "a/", 50, absl::ZeroDuration());
  first.Start();
  ASSERT_TRUE(first.Join().ok());

  Collector collected;
  KeyWatcherOptions options;
  options.endpoints = {proxy.address()};
  options.prefix = prefix;
  // Only through the proxy: the member list would name the members.
  options.member_sync_interval = absl::ZeroDuration();
  auto watcher = StartWatcher(options, &collected);
  ASSERT_NE(watcher, nullptr);
  EXPECT_EQ(watcher->State().keys.size(), 50u);

  EtcdWriter second(&client, prefix + "b/", 50, absl::ZeroDuration());
  second.Start();
  ASSERT_TRUE(second.Join().ok());
  ASSERT_TRUE(collected.WaitForKeys(second.written(), kWait));

  // Cut the watch off: no backend, every connection reset.
  proxy.ClearBackends();
  proxy.Reset(support::Select::All());
  // Meanwhile: more puts, deletes, and a compaction past all of them.
  EtcdWriter third(&client, prefix + "c/", 50, absl::ZeroDuration());
  third.Start();
  ASSERT_TRUE(third.Join().ok());
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(
        client.Delete(first.written()[i].key, absl::Now() + kWait).ok());
  }
  auto now = client.List(prefix, absl::Now() + kWait);
  ASSERT_TRUE(now.ok()) << now.status();
  ASSERT_TRUE(client.Compact(now->revision, absl::Now() + kWait).ok());

  // Back: the watch resumes from a compacted revision -> one resync.
  ASSERT_TRUE(proxy.SetBackend(c.client_address(0)).ok());
  ASSERT_TRUE(collected.WaitForResyncs(1, kWait)) << collected.status();
  ExpectStateEqualsEtcd(*watcher, client, prefix);

  // And it keeps watching.
  EtcdWriter fourth(&client, prefix + "d/", 20, absl::ZeroDuration());
  fourth.Start();
  ASSERT_TRUE(fourth.Join().ok());
  ASSERT_TRUE(collected.WaitForKeys(fourth.written(), kWait));
  ExpectStateEqualsEtcd(*watcher, client, prefix);
  EXPECT_EQ(watcher->resyncs(), 1);
  EXPECT_EQ(watcher->stats().resyncs, 1u);
  EXPECT_FALSE(collected.done()) << collected.status();
  // None of the puts made while cut off came as events (the listing had
  // them); every later one did.
  std::set<std::string> keys;
  for (const Seen& s : collected.events()) keys.insert(s.key);
  for (const WrittenKey& k : third.written()) EXPECT_EQ(keys.count(k.key), 0u);
  for (const WrittenKey& k : fourth.written()) {
    EXPECT_EQ(keys.count(k.key), 1u);
  }
}

TEST(KeyWatcherTest, RejectsBadOptions) {
  KeyWatcherOptions o;
  EXPECT_EQ(Validate(o).code(), absl::StatusCode::kInvalidArgument);
  o.endpoints = {"127.0.0.1:1", "127.0.0.1:1"};
  EXPECT_EQ(Validate(o).code(), absl::StatusCode::kInvalidArgument);
  o.endpoints = {"127.0.0.1:1"};
  EXPECT_TRUE(Validate(o).ok());
  o.stall_timeout = absl::Microseconds(10);
  EXPECT_EQ(Validate(o).code(), absl::StatusCode::kInvalidArgument);
  o.stall_timeout = absl::Hours(25);
  EXPECT_EQ(Validate(o).code(), absl::StatusCode::kInvalidArgument);
  o.stall_timeout = absl::InfiniteDuration();
  EXPECT_EQ(Validate(o).code(), absl::StatusCode::kInvalidArgument);
  o.stall_timeout = absl::ZeroDuration();
  o.give_up_after = absl::ZeroDuration();
  EXPECT_EQ(Validate(o).code(), absl::StatusCode::kInvalidArgument);
  o.give_up_after = absl::InfiniteDuration();
  EXPECT_TRUE(Validate(o).ok());
  o.list_timeout = absl::ZeroDuration();
  EXPECT_EQ(Validate(o).code(), absl::StatusCode::kInvalidArgument);
  o.list_timeout = absl::Hours(2);
  EXPECT_EQ(Validate(o).code(), absl::StatusCode::kInvalidArgument);
}

// --- The CLI. ---------------------------------------------------------------

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int CountLines(const std::string& path) {
  std::string all = ReadFile(path);
  return static_cast<int>(std::count(all.begin(), all.end(), '\n'));
}

TEST(EtcdWatchCliTest, PrintsEventsStateAndOneJsonLine) {
  auto cluster = EtcdCluster::Start(FastProgress());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EtcdCluster& c = **cluster;
  EtcdClient client(c.client_addresses());
  const std::string prefix = "/cli/";
  ASSERT_TRUE(client.Put(prefix + "listed", "x", absl::Now() + kWait).ok());

  char dir_template[] = "/tmp/etcd-watch-cli-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string events = dir + "/events", state = dir + "/state",
                    out = dir + "/stdout";
  std::vector<std::string> args = {
      TETHER_ETCD_WATCH_BINARY, "--endpoints=" + c.endpoints(),
      "--prefix=" + prefix, "--duration=120", "--stall-timeout-ms=3000",
      "--events-out=" + events, "--state-out=" + state};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int out_fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(out_fd, 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(out_fd, 1);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(out_fd);
  struct Reaper {
    pid_t pid;
    ~Reaper() {
      if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
      }
    }
  } reaper{pid};

  // Wait until the watch is up: probe keys until one arrives as an event
  // (a probe put before the CLI listed the prefix is in its listing, not an
  // event; events come in order, so once one arrived every earlier one that
  // was not listed did too).
  absl::Time deadline = absl::Now() + kWait;
  int probes = 0;
  while (CountLines(events) < 1 && absl::Now() < deadline) {
    ASSERT_TRUE(client.Put(absl::StrCat(prefix, "probe", probes++), "1",
                           absl::Now() + kWait).ok());
    absl::Time probe_deadline = absl::Now() + absl::Seconds(1);
    while (CountLines(events) < 1 && absl::Now() < probe_deadline) {
      absl::SleepFor(absl::Milliseconds(10));  // polls the file, bounded
    }
  }
  const int before = CountLines(events);
  ASSERT_GE(before, 1) << "etcd_watch delivered nothing";
  EtcdWriter writer(&client, prefix, 100, absl::ZeroDuration());
  writer.Start();
  ASSERT_TRUE(writer.Join().ok());
  while (CountLines(events) < before + 100 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(CountLines(events), before + 100);
  kill(pid, SIGTERM);
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  reaper.pid = -1;
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);

  std::vector<std::string> lines =
      absl::StrSplit(ReadFile(out), '\n', absl::SkipEmpty());
  ASSERT_FALSE(lines.empty());
  // The last line is one JSON object.
  google::protobuf::Struct json;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(lines.back(), &json).ok())
      << lines.back();
  const auto& f = json.fields();
  auto number = [&f](const std::string& name) {
    auto it = f.find(name);
    return it == f.end() ? -1.0 : it->second.number_value();
  };
  EXPECT_EQ(number("events"), static_cast<double>(before + 100));
  EXPECT_EQ(number("duplicates"), 0);
  EXPECT_EQ(number("out_of_order"), 0);
  EXPECT_EQ(number("resyncs"), 0);
  EXPECT_EQ(number("errors"), 0);
  EXPECT_GE(number("max_stall_ms"), 0);
  EXPECT_GT(number("last_revision"), 0);
  EXPECT_EQ(f.at("error").string_value(), "");

  // Events: "<rev> PUT <key>", the writer's revisions.
  std::vector<std::string> event_lines =
      absl::StrSplit(ReadFile(events), '\n', absl::SkipEmpty());
  std::vector<WrittenKey> written = writer.written();
  ASSERT_EQ(event_lines.size(), static_cast<std::size_t>(before) + 100);
  for (std::size_t i = 0; i < written.size(); ++i) {
    EXPECT_EQ(event_lines[before + i],
              absl::StrCat(written[i].revision, " PUT ", written[i].key));
  }
  // State: "<key> <rev>" sorted, equal to etcd's.
  auto listing = client.List(prefix, absl::Now() + kWait);
  ASSERT_TRUE(listing.ok());
  std::string want;
  for (const auto& [key, rev] : listing->keys) {
    absl::StrAppend(&want, key, " ", rev, "\n");
  }
  EXPECT_EQ(ReadFile(state), want);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

TEST(EtcdWatchCliTest, BadFlagsExitTwo) {
  for (std::vector<std::string> args :
       {std::vector<std::string>{"--prefix=/p/"},
        std::vector<std::string>{"--endpoints=127.0.0.1:1"},
        std::vector<std::string>{"--endpoints=127.0.0.1:1", "--prefix=/p/",
                                 "--duration=0"},
        std::vector<std::string>{"--endpoints=127.0.0.1:1", "--prefix=/p/",
                                 "--stall-timeout-ms=-1"}}) {
    args.insert(args.begin(), TETHER_ETCD_WATCH_BINARY);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int null_fd = open("/dev/null", O_WRONLY);
      dup2(null_fd, 1);
      dup2(null_fd, 2);
      execv(argv[0], argv.data());
      _exit(127);
    }
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    ASSERT_TRUE(WIFEXITED(st));
    EXPECT_EQ(WEXITSTATUS(st), 2) << args[1];
  }
}

}  // namespace
}  // namespace etcd
}  // namespace examples
}  // namespace tether
