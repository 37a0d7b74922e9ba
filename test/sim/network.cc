// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "test/sim/network.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tether {
namespace sim {

const char* TopologyName(Topology t) {
  switch (t) {
    case Topology::kHeadless:
      return "headless";
    case Topology::kService:
      return "service";
    case Topology::kProxy:
      return "proxy";
  }
  return "?";
}

const char* ShutdownName(ShutdownKind k) {
  switch (k) {
    case ShutdownKind::kGraceful:
      return "graceful";
    case ShutdownKind::kCancelFirst:
      return "cancel-first";
    case ShutdownKind::kAbrupt:
      return "abrupt";
    case ShutdownKind::kUnready:
      return "unready";
  }
  return "?";
}

// --- Call ------------------------------------------------------------------

Call::Call(Network* net, std::uint64_t id, Feed* feed, int replica,
           std::uint64_t link, absl::Duration latency,
           bool deliver_after_cancel,
           std::shared_ptr<AttemptListener<SimMsg>> listener,
           std::shared_ptr<BidiWrites<SimWrite>> writes)
    : net_(net),
      id_(id),
      feed_(feed),
      replica_(replica),
      link_(link),
      latency_(latency),
      deliver_after_cancel_(deliver_after_cancel),
      started_(net->world().Now()),
      listener_(std::move(listener)),
      writes_(std::move(writes)) {}

void Call::Open(bool has_after, std::uint64_t after) {
  server_open_ = true;
  server_ended_ = false;
  has_sent_ = has_after;
  sent_ = after;
  if (has_after && after < feed_->compacted_below) {
    ServerEnd(absl::OutOfRangeError("compacted"));
    return;
  }
  CatchUp();
}

bool Call::Sending() const {
  if (!server_open_ || replica_ < 0) return server_open_;
  const Replica& r = net_->replicas_[static_cast<std::size_t>(replica_)];
  return !r.black_hole && !r.paused;
}

void Call::CatchUp() {
  if (!Sending()) return;
  for (std::size_t i = has_sent_ ? feed_->FirstAfter(sent_) : 0;
       i < feed_->log.size(); ++i) {
    Send(feed_->log[i]);
  }
}

void Call::Offer(const SimMsg& m) {
  if (!Sending()) return;
  if (has_sent_ && m.last <= sent_) return;
  Send(m);
}

void Call::Send(const SimMsg& m) {
  sent_ = m.last;
  has_sent_ = true;
  std::weak_ptr<Call> weak = weak_from_this();
  net_->world().After(latency_, [weak, m] {
    if (auto self = weak.lock()) self->Arrive(m);
  });
}

void Call::ServerEnd(absl::Status status, Metadata trailers) {
  if (server_ended_) return;
  server_open_ = false;
  server_ended_ = true;
  std::weak_ptr<Call> weak = weak_from_this();
  net_->world().After(latency_, [weak, status = std::move(status),
                                 trailers = std::move(trailers)] {
    if (auto self = weak.lock()) self->ArriveEnd(status, trailers);
  });
}

void Call::Arrive(SimMsg m) {
  if (done_) return;
  if (cancel_requested_ && !deliver_after_cancel_) return;
  inbox_.push_back(std::move(m));
  Pump();
}

void Call::ArriveEnd(absl::Status status, Metadata trailers) {
  if (done_ || end_arrived_) return;
  end_arrived_ = true;
  end_status_ = std::move(status);
  end_trailers_ = std::move(trailers);
  Pump();
}

void Call::Pump() {
  if (pumping_) return;
  pumping_ = true;
  std::shared_ptr<Call> self = shared_from_this();
  while (!done_) {
    if (reading_ && !inbox_.empty()) {
      SimMsg m = std::move(inbox_.front());
      inbox_.pop_front();
      reading_ = false;
      const bool more = listener_->OnMessage(std::move(m));
      if (more) reading_ = true;
      continue;
    }
    if (end_arrived_ && inbox_.empty()) {
      done_ = true;
      server_open_ = false;
      std::shared_ptr<AttemptListener<SimMsg>> listener = std::move(listener_);
      if (net_->on_end_) net_->on_end_(*this, end_status_, end_trailers_);
      listener->OnEnd(end_status_, end_trailers_);
      keep_alive_.reset();
      break;
    }
    break;
  }
  pumping_ = false;
}

void Call::Resume() {
  if (done_) return;
  reading_ = true;
  Pump();
}

void Call::Cancel() {
  if (done_ || cancel_requested_) return;
  cancel_requested_ = true;
  server_open_ = false;
  server_ended_ = true;
  if (!deliver_after_cancel_) inbox_.clear();
  std::weak_ptr<Call> weak = weak_from_this();
  net_->world().After(net_->world().rng().Between(absl::ZeroDuration(),
                                                  absl::Milliseconds(3)),
                      [weak] {
                        auto self = weak.lock();
                        if (!self || self->done_) return;
                        self->inbox_.clear();
                        if (!self->end_arrived_) {
                          self->end_arrived_ = true;
                          self->end_status_ =
                              absl::CancelledError("cancelled by the client");
                        }
                        self->Pump();
                      });
}

void Call::WakeWrites() {
  std::weak_ptr<Call> weak = weak_from_this();
  net_->world().After(absl::ZeroDuration(), [weak] {
    if (auto self = weak.lock()) self->PumpWrites();
  });
}

void Call::PumpWrites() {
  if (!writes_ || writing_ || half_closed_) return;
  if (done_) return;
  std::shared_ptr<const SimWrite> w;
  switch (writes_->Take(&w)) {
    case BidiWrites<SimWrite>::Next::kWrite:
      break;
    case BidiWrites<SimWrite>::Next::kWritesDone:
      half_closed_ = true;
      return;
    case BidiWrites<SimWrite>::Next::kNothing:
      return;
  }
  writing_ = true;
  std::weak_ptr<Call> weak = weak_from_this();
  SimWrite copy = *w;
  net_->world().After(latency_, [weak, copy] {
    if (auto self = weak.lock()) self->OnWrite(copy);
  });
  // gRPC's OnWriteDone: the write left for the wire (or the call ended).
  net_->world().After(absl::Microseconds(100), [weak] {
    auto self = weak.lock();
    if (!self) return;
    self->writing_ = false;
    self->writes_->Written(!self->done_);
    self->PumpWrites();
  });
}

void Call::OnWrite(const SimWrite& w) {
  if (!server_open_) return;
  ++writes_received_;
  if (w.open) return;  // the resume position came with the call's start
  net_->OnWriteReceived(*this, w.id);
}

// --- Network ---------------------------------------------------------------

// A connection handed to the core: closing it marks the record.
class SimLink final : public internal::Link {
 public:
  SimLink(Network* net, std::uint64_t id) : net_(net), id_(id) {}
  std::shared_ptr<grpc::Channel> channel() override { return nullptr; }
  void Close() override { net_->Close(id_); }

 private:
  Network* const net_;
  const std::uint64_t id_;
};

Network::Network(World& world, Options options)
    : world_(world), options_(options) {
  for (int i = 0; i < options_.replicas; ++i) {
    Replica& r = replicas_[static_cast<std::size_t>(AddReplica())];
    r.accepting = true;
    r.registered = true;
  }
}

int Network::AddReplica() {
  Replica r;
  r.id = static_cast<int>(replicas_.size());
  r.address = absl::StrCat("10.0.", next_address_ / 250, ".",
                           next_address_ % 250 + 1, ":443");
  ++next_address_;
  replicas_.push_back(std::move(r));
  return static_cast<int>(replicas_.size()) - 1;
}

std::vector<std::string> Network::Addresses() const {
  std::vector<std::string> out;
  switch (options_.topology) {
    case Topology::kHeadless:
      for (const Replica& r : replicas_) {
        if (r.registered) out.push_back(r.address);
      }
      break;
    case Topology::kService:
      out.push_back("10.96.0.10:443");
      break;
    case Topology::kProxy:
      out.push_back("10.96.0.20:443");
      break;
  }
  return out;
}

void Network::PublishEndpoints() {
  if (options_.topology != Topology::kHeadless || !core_) return;
  std::vector<Endpoint> set;
  for (const std::string& a : Addresses()) set.push_back(Endpoint{a, ""});
  world_.Note(absl::StrCat("dns: ", set.size(), " endpoints"));
  core_->SetEndpoints(set, internal::PoolCore::Removal::kAtOnce);
  if (after_core_) after_core_();
}

LinkRec* Network::FindLink(std::uint64_t id) {
  auto it = links_.find(id);
  return it == links_.end() ? nullptr : &it->second;
}

void Network::Close(std::uint64_t id) {
  LinkRec* l = FindLink(id);
  if (l) l->closed = true;
}

std::shared_ptr<internal::Link> Network::Open(std::uint64_t id,
                                              const Endpoint& endpoint) {
  LinkRec& l = links_[id];
  l.id = id;
  l.address = endpoint.address;
  const absl::Duration delay =
      world_.rng().Between(absl::Microseconds(200), absl::Milliseconds(3));
  world_.After(delay, [this, id] {
    LinkRec* link = FindLink(id);
    // Closed, or a call connected it first.
    if (!link || link->closed || link->state == internal::LinkState::kReady) {
      return;
    }
    Report(id, internal::LinkState::kConnecting);
    Report(id, Connect(*link) ? internal::LinkState::kReady
                              : internal::LinkState::kTransientFailure);
  });
  return std::make_shared<SimLink>(this, id);
}

bool Network::Connect(LinkRec& l) {
  l.goaway = false;
  switch (options_.topology) {
    case Topology::kHeadless:
      for (const Replica& r : replicas_) {
        if (r.address == l.address) {
          l.replica = r.id;
          return r.accepting;
        }
      }
      return false;
    case Topology::kService: {
      std::vector<int> up = Accepting();
      if (up.empty()) return false;
      l.replica = up[world_.rng().Below(up.size())];
      return true;
    }
    case Topology::kProxy:
      return true;
  }
  return false;
}

void Network::Report(std::uint64_t link, internal::LinkState state) {
  LinkRec* l = FindLink(link);
  if (!l || l->closed) return;
  l->state = state;
  core_->OnLinkState(link, state);
  if (options_.health_check && state == internal::LinkState::kReady) {
    core_->OnLinkHealth(link, true);
  }
  if (after_core_) after_core_();
}

std::vector<int> Network::Accepting() const {
  std::vector<int> out;
  for (const Replica& r : replicas_) {
    if (r.accepting && !r.gone) out.push_back(r.id);
  }
  return out;
}

int Network::OldestServing() const {
  for (const Replica& r : replicas_) {
    if (r.accepting && !r.gone && !r.leaving) return r.id;
  }
  return -1;
}

absl::Duration Network::LatencyFor(int replica) {
  if (replica >= 0 && replicas_[static_cast<std::size_t>(replica)].slow) {
    return world_.rng().Between(absl::Milliseconds(200), absl::Seconds(2));
  }
  return world_.rng().Between(absl::Microseconds(300),
                              absl::Milliseconds(20));
}

std::shared_ptr<Call> Network::StartCall(
    Feed* feed, std::uint64_t link, bool has_after, std::uint64_t after,
    std::shared_ptr<AttemptListener<SimMsg>> listener,
    std::shared_ptr<BidiWrites<SimWrite>> writes) {
  if (options_.slow_start > 0 && world_.rng().Chance(options_.slow_start)) {
    world_.clock()->AdvanceBy(
        world_.rng().Between(absl::Microseconds(10), absl::Milliseconds(3)));
  }
  LinkRec* l = FindLink(link);
  int replica = -1;
  absl::Status refused;
  if (l == nullptr || l->closed) {
    refused = absl::UnavailableError("connection closed");
  } else if (options_.topology == Topology::kProxy) {
    std::vector<int> up;
    for (int r : Accepting()) {
      if (replicas_[static_cast<std::size_t>(r)].registered) up.push_back(r);
    }
    if (up.empty()) {
      refused = absl::UnavailableError("no healthy upstream");
    } else {
      replica = up[world_.rng().Below(up.size())];
    }
  } else {
    if (l->state != internal::LinkState::kReady || l->goaway) {
      // gRPC reconnects an idle channel when a call starts.
      if (Connect(*l)) {
        Report(link, internal::LinkState::kReady);
      } else {
        refused = absl::UnavailableError(
            "failed to connect to all addresses; last error: UNAVAILABLE: "
            "Connection refused (sim)");
      }
    }
    if (refused.ok()) {
      replica = l->replica;
      const Replica& r = replicas_[static_cast<std::size_t>(replica)];
      if (r.gone) {
        refused = absl::UnavailableError("Socket closed");
      } else if (!r.accepting) {
        refused = r.refusal;
      }
    }
  }
  auto call = std::make_shared<Call>(
      this, next_call_++, feed, refused.ok() ? replica : -1, link,
      LatencyFor(replica), world_.rng().Chance(0.5), std::move(listener),
      std::move(writes));
  call->keep_alive_ = call;
  all_calls_.push_back(call);
  if (on_call_) on_call_(*call);
  if (!refused.ok()) {
    call->ServerEnd(refused);
    return call;
  }
  feed->calls.push_back(call);
  replicas_[static_cast<std::size_t>(replica)].calls.push_back(call);
  call->Open(has_after, after);
  if (call->writes_) {
    std::weak_ptr<Call> weak = call;
    call->writes_->SetWakeup([weak] {
      if (auto c = weak.lock()) c->WakeWrites();
    });
    call->WakeWrites();
  }
  return call;
}

void Network::Publish(Feed& feed, const SimMsg& m) {
  feed.log.push_back(m);
  std::size_t kept = 0;
  for (std::size_t i = 0; i < feed.calls.size(); ++i) {
    std::shared_ptr<Call> c = feed.calls[i].lock();
    if (!c || c->done()) continue;
    feed.calls[kept++] = feed.calls[i];
    c->Offer(m);
  }
  feed.calls.resize(kept);
}

void Network::OnWriteReceived(Call& call, std::uint64_t id) {
  if (on_write_) on_write_(call, id);
}

template <class F>
void Network::ForCalls(int replica, F&& f) {
  Replica& r = replicas_[static_cast<std::size_t>(replica)];
  std::vector<std::shared_ptr<Call>> calls;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < r.calls.size(); ++i) {
    std::shared_ptr<Call> c = r.calls[i].lock();
    if (!c || c->done()) continue;
    r.calls[kept++] = r.calls[i];
    calls.push_back(std::move(c));
  }
  r.calls.resize(kept);
  for (auto& c : calls) f(*c);
}

void Network::EndCalls(int replica, const absl::Status& status,
                       const Metadata& trailers) {
  ForCalls(replica, [&](Call& c) {
    if (c.server_open()) c.ServerEnd(status, trailers);
  });
}

void Network::Goaway(int replica) {
  for (auto& [id, l] : links_) {
    if (l.closed || l.replica != replica || l.goaway) continue;
    if (options_.topology == Topology::kProxy) continue;
    l.goaway = true;
    const std::uint64_t link = id;
    world_.After(
        world_.rng().Between(absl::Microseconds(300), absl::Milliseconds(3)),
        [this, link] { Report(link, internal::LinkState::kIdle); });
  }
}

void Network::Replace(int replica, ShutdownKind kind, absl::Duration grace,
                      absl::Duration startup, absl::Duration dns_delay) {
  Replica& old = replicas_[static_cast<std::size_t>(replica)];
  old.leaving = true;
  const int fresh = AddReplica();
  world_.Note(absl::StrCat("rollout: replica ", replica, " (",
                           replicas_[static_cast<std::size_t>(replica)].address,
                           ") shuts down ", ShutdownName(kind), ", grace ",
                           absl::FormatDuration(grace), "; replica ", fresh,
                           " (", replicas_[static_cast<std::size_t>(fresh)]
                                     .address,
                           ") starts in ", absl::FormatDuration(startup),
                           "; dns ", absl::FormatDuration(dns_delay)));
  world_.After(startup, [this, fresh] {
    Replica& r = replicas_[static_cast<std::size_t>(fresh)];
    if (outage_) {
      r.gone = true;
      return;
    }
    r.accepting = true;
    r.registered = true;
    PublishEndpoints();
  });
  const absl::Duration dereg = std::max(dns_delay, absl::ZeroDuration());
  const absl::Duration stop = std::max(-dns_delay, absl::ZeroDuration());
  world_.After(dereg, [this, replica] {
    replicas_[static_cast<std::size_t>(replica)].registered = false;
    PublishEndpoints();
  });
  world_.After(stop, [this, replica, kind, grace] {
    Shutdown(replica, kind, grace);
  });
}

void Network::Shutdown(int replica, ShutdownKind kind, absl::Duration grace) {
  Replica& r = replicas_[static_cast<std::size_t>(replica)];
  if (r.gone) return;
  r.accepting = false;
  switch (kind) {
    case ShutdownKind::kUnready:
      if (options_.health_check) {
        for (auto& [id, l] : links_) {
          if (!l.closed && l.replica == replica) core_->OnLinkHealth(id, false);
        }
        if (after_core_) after_core_();
      }
      [[fallthrough]];
    case ShutdownKind::kGraceful: {
      // A call that reaches a C++ server between its two GOAWAYs ends
      // CANCELLED, not by the client.
      r.refusal = absl::CancelledError("stream refused: server shutting down");
      Goaway(replica);
      // Behind an L7 proxy the end of a grace period is a reset stream
      // (grpc-go behind nginx: INTERNAL).
      absl::Status end =
          options_.topology == Topology::kProxy && world_.rng().Chance(0.5)
              ? absl::InternalError("RST_STREAM error code 2")
              : absl::UnavailableError("server shutdown: grace period over");
      world_.After(grace, [this, replica, end] {
        EndCalls(replica, end, {});
        replicas_[static_cast<std::size_t>(replica)].gone = true;
      });
      break;
    }
    case ShutdownKind::kCancelFirst: {
      r.refusal = absl::UnavailableError("server is shutting down");
      EndCalls(replica, r.refusal, {});
      world_.After(world_.rng().Between(absl::Milliseconds(20),
                                        absl::Milliseconds(500)),
                   [this, replica] {
                     Goaway(replica);
                     replicas_[static_cast<std::size_t>(replica)].gone = true;
                   });
      break;
    }
    case ShutdownKind::kAbrupt: {
      r.gone = true;
      EndCalls(replica, absl::UnavailableError("Socket closed"), {});
      Goaway(replica);
      break;
    }
  }
}

void Network::SetFault(int replica, Fault fault, bool on) {
  Replica& r = replicas_[static_cast<std::size_t>(replica)];
  switch (fault) {
    case Fault::kBlackHole:
      r.black_hole = on;
      break;
    case Fault::kPause:
      r.paused = on;
      break;
    case Fault::kSlow:
      r.slow = on;
      break;
  }
  if (!on && fault != Fault::kSlow) {
    ForCalls(replica, [](Call& c) { c.CatchUp(); });
  }
}

void Network::Outage(bool down) {
  outage_ = down;
  if (down) {
    for (const Replica& r : replicas_) {
      if (!r.gone) Shutdown(r.id, ShutdownKind::kAbrupt, absl::ZeroDuration());
    }
    for (Replica& r : replicas_) r.registered = false;
    PublishEndpoints();
    return;
  }
  for (int i = 0; i < options_.replicas; ++i) {
    Replica& r = replicas_[static_cast<std::size_t>(AddReplica())];
    r.accepting = true;
    r.registered = true;
  }
  PublishEndpoints();
}

std::vector<std::shared_ptr<Call>> Network::UnfinishedCalls() {
  std::vector<std::shared_ptr<Call>> out;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < all_calls_.size(); ++i) {
    std::shared_ptr<Call> c = all_calls_[i].lock();
    if (!c || c->done()) continue;
    all_calls_[kept++] = all_calls_[i];
    out.push_back(std::move(c));
  }
  all_calls_.resize(kept);
  return out;
}

void Network::Sweep() {
  if (all_calls_.size() > 4 * sweep_at_) {
    UnfinishedCalls();
    sweep_at_ = std::max<std::size_t>(1024, all_calls_.size());
  }
}

// --- SimSource -------------------------------------------------------------

class SimSource::Proxy final : public ConnectionSource::DrainListener {
 public:
  Proxy(SimSource* source, std::uint64_t ordinal,
        std::weak_ptr<DrainListener> target)
      : source_(source), ordinal_(ordinal), target_(std::move(target)) {}
  void OnConnectionDraining(std::uint64_t id, absl::string_view why) override {
    source_->Record(Notice{id, ordinal_, std::string(why), target_});
  }
  void OnConnectionAvailable() override {
    source_->Record(Notice{0, ordinal_, "", target_});
  }

 private:
  SimSource* const source_;
  const std::uint64_t ordinal_;
  const std::weak_ptr<DrainListener> target_;
};

SimSource::SimSource(World& world, std::shared_ptr<internal::PoolCore> core)
    : world_(world), core_(std::move(core)) {}

std::shared_ptr<SimSource::Proxy> SimSource::ProxyFor(
    const std::weak_ptr<DrainListener>& l) {
  auto it = proxies_.find(l);
  if (it != proxies_.end()) return it->second;
  if (proxies_.size() >= prune_at_) {
    for (auto p = proxies_.begin(); p != proxies_.end();) {
      p = p->first.expired() ? proxies_.erase(p) : std::next(p);
    }
    prune_at_ = std::max<std::size_t>(1024, 2 * proxies_.size());
  }
  auto proxy = std::make_shared<Proxy>(this, next_proxy_++, l);
  proxies_.emplace(l, proxy);
  return proxy;
}

absl::StatusOr<ConnectionPick> SimSource::Pick(
    std::weak_ptr<DrainListener> listener) {
  std::shared_ptr<Proxy> proxy = ProxyFor(listener);
  absl::StatusOr<ConnectionPick> pick = core_->Pick(proxy);
  if (pick.ok()) {
    bool draining;
    {
      std::lock_guard<std::mutex> lock(mu_);
      draining = draining_.count(pick->connection_id) > 0;
    }
    if (draining) {
      world_.Fail(absl::StrCat("pool: a pick got connection ",
                               pick->connection_id,
                               " after the pool announced it draining"));
    }
  }
  Flush();
  return pick;
}

void SimSource::Release(std::uint64_t connection_id,
                        const std::weak_ptr<DrainListener>& listener) {
  auto it = proxies_.find(listener);
  if (it == proxies_.end()) {
    world_.Fail(absl::StrCat("pool: Release of connection ", connection_id,
                             " by a stream that never picked"));
    return;
  }
  std::shared_ptr<Proxy> proxy = it->second;
  core_->Release(connection_id, proxy);
  Flush();
}

void SimSource::ReportDrainEnd(std::uint64_t connection_id,
                               const absl::Status& status) {
  core_->ReportDrainEnd(connection_id, status);
  Flush();
}

void SimSource::ReportUnannouncedEnd(std::uint64_t connection_id,
                                     const EndReport& report) {
  core_->ReportUnannouncedEnd(connection_id, report);
  Flush();
}

void SimSource::NotifyWhenAvailable(std::weak_ptr<DrainListener> listener) {
  core_->NotifyWhenAvailable(ProxyFor(listener));
  Flush();
}

bool SimSource::IsConnected(std::uint64_t connection_id) {
  return core_->IsConnected(connection_id);
}

void SimSource::MarkDraining(std::uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  draining_.insert(id);
}

void SimSource::Record(Notice n) {
  std::lock_guard<std::mutex> lock(mu_);
  notices_.push_back(std::move(n));
}

void SimSource::Flush() {
  std::vector<Notice> notices;
  {
    std::lock_guard<std::mutex> lock(mu_);
    notices.swap(notices_);
  }
  if (notices.empty()) return;
  std::sort(notices.begin(), notices.end(),
            [](const Notice& a, const Notice& b) {
              return std::tie(a.connection_id, a.stream) <
                     std::tie(b.connection_id, b.stream);
            });
  for (Notice& n : notices) {
    world_.After(
        world_.rng().Between(absl::Microseconds(50), absl::Milliseconds(2)),
        [n = std::move(n)] {
          std::shared_ptr<DrainListener> l = n.target.lock();
          if (!l) return;
          if (n.connection_id == 0) {
            l->OnConnectionAvailable();
          } else {
            l->OnConnectionDraining(n.connection_id, n.why);
          }
        });
  }
}

}  // namespace sim
}  // namespace tether
