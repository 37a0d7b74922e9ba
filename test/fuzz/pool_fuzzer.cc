// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Fuzzes the connection pool's logic (`internal::PoolCore`) through its
// `ConnectionDriver` seam: the fuzzer's driver opens fake links, and the
// script sends picks and releases (from a few drain listeners), connectivity
// states (IDLE/CONNECTING/READY/TRANSIENT_FAILURE/SHUTDOWN), health answers,
// drain-end and unannounced-end reports (strong, weak, stalled; attributed
// to a stream or not), availability registrations and clock advances
// (which run probe, probation and idle timers). Listeners react to drain
// notices by releasing and picking again from inside the notice, as streams
// do. The options (endpoints, health checks, probation, balancing) come from
// the first bytes. After every step the harness checks the pool's contract
// (see `Check`, `DoPick`, and the observer and driver checks).
//
// Single-threaded and deterministic.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "connections/pool_core.h"
#include "test/fuzz/fuzz_input.h"
#include "tether/connection_pool.h"
#include "tether/testing/fake_clock.h"
#include "tether/transport.h"

namespace tether {
namespace fuzz {
namespace {

using internal::LinkState;
using internal::PoolCore;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "pool_fuzzer: invariant violated: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

class Link final : public internal::Link {
 public:
  std::shared_ptr<grpc::Channel> channel() override { return nullptr; }
  void Close() override { ++closes; }
  int closes = 0;
};

// Opens fake links; checks the probe pace: of three opens in a row to one
// group, the first and the last are at least probe_initial_backoff *
// (1 - 20 %) apart (40 ms with the defaults; two may come at once).
class Driver final : public internal::ConnectionDriver {
 public:
  explicit Driver(Clock* clock) : clock_(clock) {}
  std::shared_ptr<internal::Link> Open(std::uint64_t id,
                                       const Endpoint& endpoint) override {
    const std::string& address = endpoint.address;
    if (links.count(id)) Fail(absl::StrCat("connection id ", id, " reused"));
    const absl::Time now = clock_->Now();
    std::vector<absl::Time>& opens = opens_[address];
    if (opens.size() >= 2 &&
        now - opens[opens.size() - 2] < absl::Milliseconds(40)) {
      Fail(absl::StrCat("three opens to ", address, " within ",
                        absl::FormatDuration(now - opens[opens.size() - 2]),
                        " (probe backoff)"));
    }
    opens.push_back(now);
    auto link = std::make_shared<Link>();
    links[id] = link;
    group_of[id] = address;
    return link;
  }
  std::map<std::uint64_t, std::shared_ptr<Link>> links;
  std::map<std::uint64_t, std::string> group_of;

 private:
  Clock* const clock_;
  std::map<std::string, std::vector<absl::Time>> opens_;
};

// The pool's events as its observer saw them.
class Events final : public ConnectionObserver {
 public:
  void OnConnectionOpened(std::uint64_t id, absl::string_view) override {
    if (!opened.insert(id).second) Fail(absl::StrCat("opened twice: ", id));
  }
  void OnConnectionReady(std::uint64_t id) override {
    if (!ready.insert(id).second) {
      Fail(absl::StrCat("first READY reported twice: ", id));
    }
    if (retired.count(id)) Fail(absl::StrCat("READY after retired: ", id));
  }
  void OnConnectionDraining(std::uint64_t id, absl::string_view) override {
    if (!draining.insert(id).second) {
      Fail(absl::StrCat("draining reported twice: ", id));
    }
  }
  void OnConnectionSuspect(std::uint64_t id, const absl::Status&) override {
    if (!suspect.insert(id).second) {
      Fail(absl::StrCat("suspect reported twice without a restore: ", id));
    }
    if (draining.count(id)) Fail(absl::StrCat("draining made suspect: ", id));
  }
  void OnConnectionRestored(std::uint64_t id) override {
    if (suspect.erase(id) != 1) {
      Fail(absl::StrCat("restored, but not suspect: ", id));
    }
    if (draining.count(id)) Fail(absl::StrCat("draining restored: ", id));
  }
  void OnConnectionRetired(std::uint64_t id) override {
    if (!opened.count(id)) Fail(absl::StrCat("retired, never opened: ", id));
    if (!retired.insert(id).second) Fail(absl::StrCat("retired twice: ", id));
  }
  std::set<std::uint64_t> opened, ready, draining, retired;
  std::set<std::uint64_t> suspect;  // suspect now (not since restored)
};

class Harness;

// A stream's side of the pool: holds picks and is told of drains.
class Listener final : public ConnectionSource::DrainListener {
 public:
  Listener(Harness* h, int index) : h_(h), index_(index) {}
  void OnConnectionDraining(std::uint64_t connection_id,
                            absl::string_view why) override;
  void OnConnectionAvailable() override;
  std::map<std::uint64_t, int> held;  // picks per connection
  std::set<std::uint64_t> told;
  bool registered = false;  // NotifyWhenAvailable, not yet told

 private:
  Harness* const h_;
  const int index_;
};

// The endpoints that sets given by the fuzzer are made of.
const char* const kEndpoints[] = {"10.0.0.1:1", "10.0.0.2:1", "10.0.0.3:1"};

class Harness {
 public:
  explicit Harness(FuzzInput& in) : in_(in) {}

  // Told that a connection is usable: it must be so, and only once per
  // registration.
  void OnAvailable(Listener& l) {
    if (!l.registered) Fail("told of availability without a registration");
    l.registered = false;
    if (core_->Stats().ready == 0) {
      Fail("told of availability with no READY usable connection");
    }
  }

  void Run() {
    ConnectionPoolOptions o;
    const std::uint8_t b = in_.Byte();
    if (b & 1) {
      o.addresses = {"10.0.0.1:1", "10.0.0.2:1"};
    } else {
      o.target = "fuzz:///svc";
    }
    o.max_connections = 1 + in_.Byte() % 4;
    o.idle_timeout =
        (b & 2) ? absl::InfiniteDuration() : absl::Seconds(1 + in_.Byte() % 30);
    o.health_check = (b & 4) != 0;
    o.suspect_after_ends = 1 + in_.Byte() % 3;
    o.suspect_probation =
        (b & 8) ? absl::InfiniteDuration() : absl::Seconds(1 + in_.Byte() % 60);
    o.balancing = static_cast<EndpointBalancing>((b >> 4) % 3);
    o.clock = clock_;
    o.observer = events_;
    if (!Validate(o).ok()) Fail(Validate(o).ToString());
    max_connections_ = static_cast<std::size_t>(o.max_connections);
    // The configured ones plus kEndpoints (the first two are the addresses).
    groups_ = o.addresses.empty() ? 4 : 3;
    core_ = PoolCore::Create(o, &driver_);
    core_->Start();
    for (int i = 0; i < 4; ++i) {
      listeners_.push_back(std::make_shared<Listener>(this, i));
    }
    Check();
    int steps = 0;
    while (!in_.empty() && steps++ < 500) {
      Step();
      Check();
    }
    // Release everything, run the idle timers out, shut down.
    for (auto& l : listeners_) {
      auto held = l->held;
      for (auto& [id, n] : held) {
        for (int k = 0; k < n; ++k) Release(*l, id);
      }
    }
    for (int i = 0; i < 100 && clock_->AdvanceToNextTimer(); ++i) {
    }
    Check();
    if (core_->Stats().picks != 0) Fail("picks left after releasing all");
    core_->Shutdown();
    for (auto& [id, link] : driver_.links) {
      if (link->closes != 1) {
        Fail(absl::StrCat("connection ", id, " closed ", link->closes,
                          " times by shutdown"));
      }
    }
    if (core_->Pick(listeners_[0]).ok()) Fail("pick after shutdown");
  }

  // Inside a drain notice: maybe move (release, pick again) at once.
  void OnTold(Listener& l, std::uint64_t id) {
    if (!l.told.insert(id).second) {
      Fail(absl::StrCat("listener told twice about connection ", id));
    }
    if (l.held[id] == 0) {
      Fail(absl::StrCat("listener told about connection ", id,
                        " it holds no pick on"));
    }
    const std::uint8_t b = in_.Byte();
    if (b & 1) DoPick(l);
    if (b & 2) Release(l, id);
  }

 private:
  void DoPick(Listener& l) {
    absl::StatusOr<ConnectionPick> pick = core_->Pick(
        std::static_pointer_cast<ConnectionSource::DrainListener>(Self(l)));
    if (!pick.ok()) return;
    const std::uint64_t id = pick->connection_id;
    if (id == 0) Fail("pick returned connection id 0");
    if (!core_->IsOpen(id) || events_->retired.count(id)) {
      Fail(absl::StrCat("pick returned connection ", id, " that is not open"));
    }
    if (events_->draining.count(id)) {
      Fail(absl::StrCat("pick returned draining connection ", id));
    }
    if (events_->suspect.count(id)) {
      // Only as a last resort: no connection that is neither draining nor
      // suspect exists (and none could be opened).
      // Others that could take it: neither draining nor suspect, and to an
      // endpoint that is not missing from the last answer.
      std::set<std::string> missing;
      for (const EndpointStats& e : core_->Endpoints()) {
        if (e.missing) missing.insert(e.address);
      }
      std::size_t others = 0;
      for (auto& [other, link] : driver_.links) {
        if (!events_->retired.count(other) && !events_->draining.count(other) &&
            !events_->suspect.count(other) &&
            !missing.count(driver_.group_of[other])) {
          ++others;
        }
      }
      if (others != 0) {
        Fail(absl::StrCat("pick returned suspect connection ", id, " while ",
                          others, " other(s) could take it"));
      }
      if (!core_->IsConnected(id)) {
        Fail(absl::StrCat("pick returned suspect connection ", id,
                          " that is not READY"));
      }
    }
    ++l.held[id];
  }

  std::shared_ptr<Listener> Self(Listener& l) {
    for (auto& p : listeners_) {
      if (p.get() == &l) return p;
    }
    Fail("unknown listener");
  }

  void Release(Listener& l, std::uint64_t id) {
    auto it = l.held.find(id);
    if (it == l.held.end() || it->second == 0) return;
    --it->second;
    core_->Release(
        id, std::static_pointer_cast<ConnectionSource::DrainListener>(Self(l)));
  }

  std::uint64_t AnyId() {
    // Known ids plus one never opened.
    const std::uint64_t n = driver_.links.size() + 1;
    return 1 + in_.Byte() % n;
  }

  void Step() {
    const std::uint8_t op = in_.Byte() % 15;
    switch (op) {
      case 0:
      case 1:
        DoPick(*listeners_[in_.Byte() % listeners_.size()]);
        return;
      case 2: {
        Listener& l = *listeners_[in_.Byte() % listeners_.size()];
        std::vector<std::uint64_t> ids;
        for (auto& [id, n] : l.held) {
          if (n > 0) ids.push_back(id);
        }
        if (ids.empty()) return;
        Release(l, ids[in_.Byte() % ids.size()]);
        return;
      }
      case 3:
      case 4: {
        const LinkState states[] = {
            LinkState::kIdle, LinkState::kConnecting, LinkState::kReady,
            LinkState::kTransientFailure, LinkState::kShutdown};
        const std::uint64_t id = AnyId();
        core_->OnLinkState(id, states[in_.Byte() % 5]);
        return;
      }
      case 5:
        core_->OnLinkHealth(AnyId(), (in_.Byte() & 1) != 0);
        return;
      case 6:
        core_->ReportDrainEnd(
            AnyId(), (in_.Byte() & 1)
                         ? absl::UnavailableError("fuzz: shutting down")
                         : absl::CancelledError("fuzz: cancelled by server"));
        return;
      case 7: {
        const absl::Duration d[] = {absl::ZeroDuration(), absl::Seconds(1),
                                    absl::Seconds(10), absl::Minutes(1)};
        clock_->AdvanceBy(d[in_.Byte() % 4]);
        return;
      }
      case 8:
        clock_->AdvanceToNextTimer();
        return;
      case 9:
        (void)core_->Stats();
        return;
      case 10: {
        // A stream's unannounced end: release (maybe), then report.
        Listener& l = *listeners_[in_.Byte() % listeners_.size()];
        const std::uint8_t how = in_.Byte();
        std::uint64_t id = AnyId();
        if (how & 1) {
          for (auto& [held_id, n] : l.held) {
            if (n > 0) {
              id = held_id;
              Release(l, id);
              break;
            }
          }
        }
        ConnectionSource::EndReport r;
        r.status = absl::UnavailableError("fuzz: ended");
        r.before_first_message = (how & 2) != 0;
        r.stalled = (how & 4) != 0;
        core_->ReportUnannouncedEnd(id, r);
        return;
      }
      case 11: {
        Listener& l = *listeners_[in_.Byte() % listeners_.size()];
        l.registered = true;
        core_->NotifyWhenAvailable(
            std::static_pointer_cast<ConnectionSource::DrainListener>(Self(l)));
        return;
      }
      case 12: {
        const absl::Duration d[] = {absl::Milliseconds(1),
                                    absl::Milliseconds(50),
                                    absl::Milliseconds(300)};
        clock_->AdvanceBy(d[in_.Byte() % 3]);
        return;
      }
      case 13: {
        // A new endpoint set (a source's answer, or SetEndpoints): a
        // non-empty subset of three addresses.
        const std::uint8_t b = in_.Byte();
        std::vector<Endpoint> set;
        for (int i = 0; i < 3; ++i) {
          if (b & (1 << i)) set.push_back({kEndpoints[i], ""});
        }
        if (set.empty()) set.push_back({kEndpoints[0], ""});
        core_->SetEndpoints(set, (b & 8) ? PoolCore::Removal::kAtOnce
                                         : PoolCore::Removal::kConfirmed);
        return;
      }
      case 14:
        core_->OnEndpointsError(absl::NotFoundError("fuzz: NXDOMAIN"));
        return;
    }
  }

  void Check() {
    ConnectionPoolStats s = core_->Stats();
    std::size_t held = 0;
    for (auto& l : listeners_) {
      for (auto& [id, n] : l->held) held += static_cast<std::size_t>(n);
    }
    if (s.picks != held) {
      Fail(absl::StrCat("stats.picks ", s.picks, " but listeners hold ", held));
    }
    const std::size_t live = events_->opened.size() - events_->retired.size();
    if (s.open != live) {
      Fail(absl::StrCat("stats.open ", s.open,
                        " but opened - retired = ", live));
    }
    if (s.total_opened != driver_.links.size() ||
        s.total_opened != events_->opened.size()) {
      Fail(absl::StrCat("stats.total_opened ", s.total_opened, ", driver ",
                        driver_.links.size(), ", observer ",
                        events_->opened.size()));
    }
    if (s.ready + s.draining + s.suspect > s.open) {
      Fail(absl::StrCat("ready ", s.ready, " + draining ", s.draining,
                        " + suspect ", s.suspect, " > open ", s.open));
    }
    // Connections per group within max_connections.
    std::map<std::string, std::size_t> per_group;
    for (auto& [id, link] : driver_.links) {
      const bool retired = events_->retired.count(id) > 0;
      if (retired != (link->closes > 0)) {
        Fail(absl::StrCat("connection ", id, (retired ? " retired" : " open"),
                          " but closed ", link->closes, " times"));
      }
      if (link->closes > 1) {
        Fail(absl::StrCat("connection ", id, " closed twice"));
      }
      if (core_->IsOpen(id) == retired) {
        Fail(absl::StrCat("IsOpen(", id, ") disagrees with the observer"));
      }
      if (!retired) ++per_group[driver_.group_of[id]];
    }
    for (auto& [group, n] : per_group) {
      if (n > max_connections_) {
        Fail(absl::StrCat(n, " open connections to ", group, ", max ",
                          max_connections_));
      }
    }
    // A held pick keeps its connection open.
    for (auto& l : listeners_) {
      for (auto& [id, n] : l->held) {
        if (n > 0 && events_->retired.count(id)) {
          Fail(absl::StrCat("connection ", id, " retired with ", n,
                            " pick(s) held"));
        }
      }
    }
    if (per_group.size() > groups_) Fail("more groups than configured");
    // Every connection that is not draining goes to an endpoint of the set.
    std::set<std::string> leaving;
    for (const EndpointStats& e : core_->Endpoints()) {
      if (e.leaving) leaving.insert(e.address);
    }
    for (auto& [id, link] : driver_.links) {
      if (events_->retired.count(id) == 0 && events_->draining.count(id) == 0 &&
          leaving.count(driver_.group_of[id]) != 0) {
        Fail(absl::StrCat("connection ", id, " to leaving endpoint ",
                          driver_.group_of[id], " is not draining"));
      }
    }
  }

  FuzzInput& in_;
  std::shared_ptr<fakes::FakeClock> clock_ =
      std::make_shared<fakes::FakeClock>();
  std::shared_ptr<Events> events_ = std::make_shared<Events>();
  Driver driver_{clock_.get()};
  std::shared_ptr<PoolCore> core_;
  std::vector<std::shared_ptr<Listener>> listeners_;
  std::size_t max_connections_ = 0;
  std::size_t groups_ = 0;
};

void Listener::OnConnectionDraining(std::uint64_t connection_id,
                                    absl::string_view) {
  h_->OnTold(*this, connection_id);
  (void)index_;
}

void Listener::OnConnectionAvailable() { h_->OnAvailable(*this); }

}  // namespace
}  // namespace fuzz
}  // namespace tether

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  tether::fuzz::FuzzInput in(data, size);
  tether::fuzz::Harness h(in);
  h.Run();
  return 0;
}
