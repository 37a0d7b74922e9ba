// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_TESTING_FAKE_CONNECTION_SOURCE_H_
#define TETHER_TESTING_FAKE_CONNECTION_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "gtest/gtest.h"
#include "tether/transport.h"

namespace tether {
namespace fakes {

// A `ConnectionSource` whose connections exist only in the test.
//
// Connection ids start at 1. `Pick` returns the current connection until it
// drains or becomes suspect; then the next pick opens a new id (one new
// connection for any number of streams that move at once). The test drains a
// connection with `Drain` (a GOAWAY, or health NOT_SERVING) and inspects what
// the streams did: `picks()`, `suspects()`, `held(id)`.
//
// Thread safety: all methods may be called concurrently. Listeners are called
// with no lock held.
class FakeConnectionSource final : public ConnectionSource {
 public:
  absl::StatusOr<ConnectionPick> Pick(
      std::weak_ptr<DrainListener> listener) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!fail_picks_.empty()) {
      absl::Status s = fail_picks_.front();
      fail_picks_.pop_front();
      return s;
    }
    if (draining_.count(current_) || suspects_.count(current_)) {
      current_ = ++last_id_;
    }
    picks_.push_back(current_);
    holders_[current_].push_back(std::move(listener));
    ConnectionPick pick;
    pick.connection_id = current_;
    return pick;
  }

  void Release(std::uint64_t connection_id,
               const std::weak_ptr<DrainListener>& listener) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto& v = holders_[connection_id];
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!it->owner_before(listener) && !listener.owner_before(*it)) {
        v.erase(it);
        ++releases_;
        return;
      }
    }
    ADD_FAILURE() << "FakeConnectionSource: Release of connection "
                  << connection_id << " without a matching Pick";
  }

  void ReportDrainEnd(std::uint64_t connection_id,
                      const absl::Status& status) override {
    std::lock_guard<std::mutex> lock(mu_);
    drain_reports_.push_back({connection_id, status});
    if (!draining_.count(connection_id)) suspects_.insert(connection_id);
  }

  // --- Test side ----------------------------------------------------------

  // Marks `connection_id` draining and tells every stream holding a pick on
  // it, as a GOAWAY (or a health NOT_SERVING) would.
  void Drain(std::uint64_t connection_id, absl::string_view why = "GOAWAY") {
    std::vector<std::weak_ptr<DrainListener>> holders;
    {
      std::lock_guard<std::mutex> lock(mu_);
      draining_.insert(connection_id);
      holders = holders_[connection_id];
    }
    for (auto& w : holders) {
      if (auto l = w.lock()) l->OnConnectionDraining(connection_id, why);
    }
  }

  // Says whether `connection_id` is connected (READY); every connection is
  // unless the test says otherwise. A stream counts a silent attempt as
  // healthy only on a connected connection.
  void SetConnected(std::uint64_t connection_id, bool connected) {
    std::lock_guard<std::mutex> lock(mu_);
    if (connected) {
      not_connected_.erase(connection_id);
    } else {
      not_connected_.insert(connection_id);
    }
  }
  bool IsConnected(std::uint64_t connection_id) override {
    std::lock_guard<std::mutex> lock(mu_);
    return not_connected_.count(connection_id) == 0;
  }

  // Streams waiting out a backoff ask to be told when a connection is
  // usable again; `Recover()` tells them (once each), as a pool does when
  // the dependency comes back after an outage.
  void NotifyWhenAvailable(std::weak_ptr<DrainListener> listener) override {
    std::lock_guard<std::mutex> lock(mu_);
    waiting_.push_back(std::move(listener));
  }
  void Recover() {
    std::vector<std::weak_ptr<DrainListener>> waiting;
    {
      std::lock_guard<std::mutex> lock(mu_);
      waiting.swap(waiting_);
    }
    for (auto& w : waiting) {
      if (auto l = w.lock()) l->OnConnectionAvailable();
    }
  }
  // How many registrations `Recover()` would tell now.
  std::size_t waiting_for_recovery() const {
    std::lock_guard<std::mutex> lock(mu_);
    return waiting_.size();
  }
  // Every `ReportUnannouncedEnd`, in order (evidence a stream gave).
  std::vector<std::pair<std::uint64_t, EndReport>> end_reports() const {
    std::lock_guard<std::mutex> lock(mu_);
    return end_reports_;
  }
  void ReportUnannouncedEnd(std::uint64_t connection_id,
                            const EndReport& report) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      end_reports_.push_back({connection_id, report});
    }
    ReportDrainEnd(connection_id, report.status);
  }

  // The answers of `SpreadShare`, in order, one per ask (as a pool's even
  // spread would); once they run out (or never set), no answer, and
  // streams draw their points at random.
  void SetSpreadShares(std::vector<double> shares) {
    std::lock_guard<std::mutex> lock(mu_);
    spread_shares_.Set(std::move(shares));
  }
  absl::optional<double> SpreadShare(std::uint64_t /*connection_id*/) override {
    std::lock_guard<std::mutex> lock(mu_);
    return spread_shares_.Next();
  }
  std::size_t spread_asks() const {
    std::lock_guard<std::mutex> lock(mu_);
    return spread_shares_.asks;
  }

  // The answers of `ReopenShare`, the same way (as a pool's herd spread
  // would); without them streams draw their reopen delays at random.
  void SetReopenShares(std::vector<double> shares) {
    std::lock_guard<std::mutex> lock(mu_);
    reopen_shares_.Set(std::move(shares));
  }
  absl::optional<double> ReopenShare(std::uint64_t /*connection_id*/) override {
    std::lock_guard<std::mutex> lock(mu_);
    return reopen_shares_.Next();
  }
  std::size_t reopen_asks() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reopen_shares_.asks;
  }

  // The next `Pick` fails with `status` (e.g. UNAVAILABLE "failed to
  // connect"); queue several calls for several picks.
  void FailNextPick(absl::Status status) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_picks_.push_back(std::move(status));
  }

  // Connection ids of every successful pick, in order.
  std::vector<std::uint64_t> picks() const {
    std::lock_guard<std::mutex> lock(mu_);
    return picks_;
  }
  // The connection the next `Pick` returns unless it is draining or suspect
  // (then the next pick opens a new one).
  std::uint64_t current() const {
    std::lock_guard<std::mutex> lock(mu_);
    return current_;
  }
  std::set<std::uint64_t> suspects() const {
    std::lock_guard<std::mutex> lock(mu_);
    return suspects_;
  }
  bool draining(std::uint64_t id) const {
    std::lock_guard<std::mutex> lock(mu_);
    return draining_.count(id) > 0;
  }
  // Picks on `connection_id` not yet released.
  std::size_t held(std::uint64_t connection_id) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = holders_.find(connection_id);
    return it == holders_.end() ? 0 : it->second.size();
  }
  std::size_t releases() const {
    std::lock_guard<std::mutex> lock(mu_);
    return releases_;
  }
  std::vector<std::pair<std::uint64_t, absl::Status>> drain_reports() const {
    std::lock_guard<std::mutex> lock(mu_);
    return drain_reports_;
  }

 private:
  mutable std::mutex mu_;
  std::uint64_t current_ = 1;
  std::uint64_t last_id_ = 1;
  std::vector<std::uint64_t> picks_;
  std::map<std::uint64_t, std::vector<std::weak_ptr<DrainListener>>> holders_;
  std::set<std::uint64_t> draining_;
  std::set<std::uint64_t> suspects_;
  std::set<std::uint64_t> not_connected_;
  std::vector<std::weak_ptr<DrainListener>> waiting_;
  std::vector<std::pair<std::uint64_t, EndReport>> end_reports_;
  std::deque<absl::Status> fail_picks_;
  std::vector<std::pair<std::uint64_t, absl::Status>> drain_reports_;
  std::size_t releases_ = 0;
  // Scripted answers to one of the share questions, and how often it came.
  struct Shares {
    std::deque<double> left;
    std::size_t asks = 0;
    void Set(std::vector<double> shares) {
      left.assign(shares.begin(), shares.end());
    }
    absl::optional<double> Next() {
      ++asks;
      if (left.empty()) return absl::nullopt;
      const double share = left.front();
      left.pop_front();
      return share;
    }
  };
  Shares spread_shares_;
  Shares reopen_shares_;
};

// The status gRPC gives an attempt that could not connect at all.
inline absl::Status ConnectFailure() {
  return absl::UnavailableError(
      "failed to connect to all addresses; last error: UNAVAILABLE: "
      "Connection refused (fake)");
}

}  // namespace fakes
}  // namespace tether

#endif  // TETHER_TESTING_FAKE_CONNECTION_SOURCE_H_
