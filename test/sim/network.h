// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// The simulated network and fleet: replicas that serve feeds, the
// connections a pool opens to them (through the pool core's driver seam),
// and the calls (attempts) that run on those connections.
//
// Topologies, as clients meet them:
//   - kHeadless: one endpoint per replica (a headless Service's DNS
//     records); the endpoint list changes with each rollout, racing the
//     replica's shutdown;
//   - kService: one virtual address; each connection lands on a random
//     replica when it connects (kube-proxy), and reconnects elsewhere;
//   - kProxy: one address, an L7 proxy: its connection never drains; each
//     call goes to a random replica, and a replica's GOAWAY stops at the
//     proxy (its calls just end).
//
// Faults a replica can meet: shutdown graceful (GOAWAY, calls end at the
// grace deadline), cancel-first (calls end before the GOAWAY reaches the
// client), abrupt (the connection drops), unready (health NOT_SERVING
// first); black hole (accepts calls, never answers); pause (stops sending
// for a while); shed (ends calls UNAVAILABLE after delivering); pushback
// (ends calls with `grpc-retry-pushback-ms`); slow (high latency).
#ifndef TETHER_TEST_SIM_NETWORK_H_
#define TETHER_TEST_SIM_NETWORK_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "connections/pool_core.h"
#include "test/sim/feed.h"
#include "test/sim/world.h"
#include "tether/transport.h"

namespace tether {
namespace sim {

enum class Topology { kHeadless, kService, kProxy };
const char* TopologyName(Topology t);

enum class ShutdownKind { kGraceful, kCancelFirst, kAbrupt, kUnready };
const char* ShutdownName(ShutdownKind k);

enum class Fault { kBlackHole, kPause, kSlow };

class Network;

// One attempt, both sides: what the server sends (with the call's latency)
// and what the stream sees, as gRPC's callback API shows it: messages one
// at a time, only while the stream reads; the end after every message in
// flight; a cancel that completes later (a message already on its way may
// still arrive in between, when `deliver_after_cancel`).
class Call final : public Attempt, public std::enable_shared_from_this<Call> {
 public:
  Call(Network* net, std::uint64_t id, Feed* feed, int replica,
       std::uint64_t link, absl::Duration latency, bool deliver_after_cancel,
       std::shared_ptr<AttemptListener<SimMsg>> listener,
       std::shared_ptr<BidiWrites<SimWrite>> writes);

  // Server side.
  // Opens the call at `after` (none: from the start): sends the backlog.
  void Open(bool has_after, std::uint64_t after);
  // A new log entry; sent if the call is open and the replica sends.
  void Offer(const SimMsg& m);
  // Sends the log from the last entry sent (after a pause).
  void CatchUp();
  // Ends the call from the server's side (the status reaches the client
  // after the messages in flight).
  void ServerEnd(absl::Status status, Metadata trailers = {});

  // Stream side.
  void Resume() override;
  void Cancel() override;

  std::uint64_t id() const { return id_; }
  int replica() const { return replica_; }
  std::uint64_t link() const { return link_; }
  Feed* feed() const { return feed_; }
  bool server_open() const { return server_open_; }
  bool done() const { return done_; }
  bool bidi() const { return writes_ != nullptr; }
  std::uint64_t writes_received() const { return writes_received_; }
  absl::Time started() const { return started_; }

 private:
  friend class Network;
  // Whether the server sends now (open; its replica neither black-holed
  // nor paused).
  bool Sending() const;
  void WakeWrites();
  void Send(const SimMsg& m);
  void Arrive(SimMsg m);
  void ArriveEnd(absl::Status status, Metadata trailers);
  void Pump();
  void PumpWrites();
  void OnWrite(const SimWrite& w);

  Network* const net_;
  const std::uint64_t id_;
  Feed* const feed_;
  const int replica_;
  const std::uint64_t link_;
  const absl::Duration latency_;
  const bool deliver_after_cancel_;
  const absl::Time started_;
  // The call lives until its stream has seen its end, as a gRPC reactor
  // does, whoever holds the handle.
  std::shared_ptr<Call> keep_alive_;
  std::shared_ptr<AttemptListener<SimMsg>> listener_;
  std::shared_ptr<BidiWrites<SimWrite>> writes_;

  // Server side.
  bool server_open_ = false;   // opened and not ended by either side
  bool server_ended_ = false;  // the server sent its end (or saw a cancel)
  std::uint64_t sent_ = 0;  // the last position sent
  bool has_sent_ = false;
  // Stream side.
  std::deque<SimMsg> inbox_;
  bool reading_ = true;
  bool pumping_ = false;
  bool cancel_requested_ = false;
  bool end_arrived_ = false;
  absl::Status end_status_;
  Metadata end_trailers_;
  bool done_ = false;
  // Writes (bidi).
  bool writing_ = false;
  bool half_closed_ = false;
  std::uint64_t writes_received_ = 0;
};

// A replica of the service.
struct Replica {
  int id = 0;
  std::string address;
  bool accepting = false;  // takes new connections and calls
  bool gone = false;       // shut down for good
  bool registered = false; // in the endpoint list (headless) / the proxy
  bool leaving = false;    // picked for replacement
  // What a new call gets while it shuts down.
  absl::Status refusal = absl::UnavailableError("server is shutting down");
  // Faults in force.
  bool black_hole = false;
  bool paused = false;
  bool slow = false;
  std::vector<std::weak_ptr<Call>> calls;
};

// A connection the pool opened.
struct LinkRec {
  std::uint64_t id = 0;
  std::string address;
  int replica = -1;  // where it is connected (kProxy: none)
  internal::LinkState state = internal::LinkState::kIdle;
  bool closed = false;
  bool goaway = false;
};

// The fleet and the wire. Implements the pool core's driver: connections
// are records here, their state changes reach the core from the clock.
class Network final : public internal::ConnectionDriver {
 public:
  struct Options {
    Topology topology = Topology::kHeadless;
    int replicas = 3;
    bool health_check = false;
    // Chance that starting a call takes a few simulated milliseconds
    // during which other events run (gRPC's StartCall on a busy machine):
    // a stream may then see its new attempt cancelled, and a newer one
    // start, before the first attempt's start returns.
    double slow_start = 0;
  };
  Network(World& world, Options options);

  // Wires the core (after `PoolCore::Create`, before `Start`).
  void set_core(std::shared_ptr<internal::PoolCore> core) {
    core_ = std::move(core);
  }
  // Runs after every call into the core (the source's Flush).
  void set_after_core(std::function<void()> fn) { after_core_ = std::move(fn); }
  // Told of every call started, and of every end a stream is told.
  void set_on_call(std::function<void(Call&)> fn) { on_call_ = std::move(fn); }
  void set_on_end(
      std::function<void(Call&, const absl::Status&, const Metadata&)> fn) {
    on_end_ = std::move(fn);
  }
  // Told of every app write a server receives (bidi).
  void set_on_write(std::function<void(Call&, std::uint64_t id)> fn) {
    on_write_ = std::move(fn);
  }
  // The endpoints a client resolves now.
  std::vector<std::string> Addresses() const;

  std::shared_ptr<internal::Link> Open(std::uint64_t id,
                                       const Endpoint& endpoint) override;

  // Starts a call for `feed` on connection `link` (see Call).
  std::shared_ptr<Call> StartCall(
      Feed* feed, std::uint64_t link, bool has_after, std::uint64_t after,
      std::shared_ptr<AttemptListener<SimMsg>> listener,
      std::shared_ptr<BidiWrites<SimWrite>> writes);

  // A new log entry of `feed`: offered to its open calls.
  void Publish(Feed& feed, const SimMsg& m);

  // A rollout step: shuts `replica` down (`kind`, calls end after `grace`
  // when graceful), starts its replacement (a new address) after
  // `startup`, and takes the old record out of the endpoint list after
  // `dns_delay` (negative: the record goes first, the shutdown follows).
  void Replace(int replica, ShutdownKind kind, absl::Duration grace,
               absl::Duration startup, absl::Duration dns_delay);
  void Shutdown(int replica, ShutdownKind kind, absl::Duration grace);
  // Picks `replica` for a replacement that starts soon (no other rollout
  // step picks it meanwhile).
  void MarkLeaving(int replica) {
    replicas_[static_cast<std::size_t>(replica)].leaving = true;
  }
  void SetFault(int replica, Fault fault, bool on);
  // Ends the replica's open calls with `status` (shed load; pushback).
  void EndCalls(int replica, const absl::Status& status,
                const Metadata& trailers);
  // Takes every replica down abruptly (an outage: no replacement starts)
  // or, after, starts a fresh fleet.
  void Outage(bool down);
  // Forgets finished calls now and then.
  void Sweep();

  // Replicas that take calls now.
  std::vector<int> Accepting() const;
  const std::vector<Replica>& replicas() const { return replicas_; }
  // The oldest replica that serves and is not being replaced; -1: none.
  int OldestServing() const;
  World& world() { return world_; }
  absl::Duration LatencyFor(int replica);
  std::uint64_t calls_started() const { return next_call_ - 1; }
  // Every call ever started whose stream has not seen its end: what a
  // destroyed stream must have cancelled.
  std::vector<std::shared_ptr<Call>> UnfinishedCalls();

  // A connection's new state, to the core.
  void Report(std::uint64_t link, internal::LinkState state);
  // The core closed connection `id`.
  void Close(std::uint64_t id);

 private:
  friend class Call;
  int AddReplica();
  void PublishEndpoints();
  LinkRec* FindLink(std::uint64_t id);
  void OnWriteReceived(Call& call, std::uint64_t id);
  template <class F>
  void ForCalls(int replica, F&& f);
  // The replica's connections go IDLE (GOAWAY), after a network delay.
  void Goaway(int replica);
  // Connects `link` now if it can (kHeadless: its replica accepts;
  // kService: any replica accepts); false when the connect fails.
  bool Connect(LinkRec& link);
  void Forget(const std::shared_ptr<Call>& call);

  World& world_;
  const Options options_;
  std::shared_ptr<internal::PoolCore> core_;
  std::vector<Replica> replicas_;
  std::map<std::uint64_t, LinkRec> links_;
  std::uint64_t next_call_ = 1;
  std::vector<std::weak_ptr<Call>> all_calls_;
  std::size_t sweep_at_ = 1024;
  int next_address_ = 1;
  bool outage_ = false;
  std::function<void()> after_core_;
  std::function<void(Call&, std::uint64_t)> on_write_;
  std::function<void(Call&)> on_call_;
  std::function<void(Call&, const absl::Status&, const Metadata&)> on_end_;
};

// The pool core as the streams' `ConnectionSource`, made deterministic:
// the core tells many draining listeners from helper threads; here each
// stream's listener is a proxy that only records the notice, and the
// simulation hands the notices to the streams in a fixed order (by
// connection, then stream), each after a small delay of the network.
// Also checks that no pick returns a connection the pool announced as
// draining.
class SimSource final : public ConnectionSource {
 public:
  SimSource(World& world, std::shared_ptr<internal::PoolCore> core);

  absl::StatusOr<ConnectionPick> Pick(
      std::weak_ptr<DrainListener> listener) override;
  void Release(std::uint64_t connection_id,
               const std::weak_ptr<DrainListener>& listener) override;
  void ReportDrainEnd(std::uint64_t connection_id,
                      const absl::Status& status) override;
  void ReportUnannouncedEnd(std::uint64_t connection_id,
                            const EndReport& report) override;
  void NotifyWhenAvailable(std::weak_ptr<DrainListener> listener) override;
  bool IsConnected(std::uint64_t connection_id) override;

  // The pool observer's word that `id` drains.
  void MarkDraining(std::uint64_t id);
  // Hands the recorded notices to the streams (in a fixed order). Call
  // after anything that may have reached the core.
  void Flush();
  const std::shared_ptr<internal::PoolCore>& core() const { return core_; }

 private:
  class Proxy;
  struct Notice {
    std::uint64_t connection_id;  // 0: OnConnectionAvailable
    std::uint64_t stream;         // the proxy's ordinal
    std::string why;
    std::weak_ptr<DrainListener> target;
  };
  std::shared_ptr<Proxy> ProxyFor(const std::weak_ptr<DrainListener>& l);
  void Record(Notice n);

  World& world_;
  const std::shared_ptr<internal::PoolCore> core_;
  std::map<std::weak_ptr<DrainListener>, std::shared_ptr<Proxy>,
           std::owner_less<std::weak_ptr<DrainListener>>>
      proxies_;
  std::uint64_t next_proxy_ = 1;
  std::set<std::uint64_t> draining_;
  std::mutex mu_;  // guards notices_ (helper threads of the core record)
  std::vector<Notice> notices_;
  std::size_t prune_at_ = 1024;
};

}  // namespace sim
}  // namespace tether

#endif  // TETHER_TEST_SIM_NETWORK_H_
