// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_TESTING_FAKE_UNARY_TRANSPORT_H_
#define TETHER_TESTING_FAKE_UNARY_TRANSPORT_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "gtest/gtest.h"
#include "tether/clock.h"
#include "tether/unary_call.h"

namespace tether {
namespace fakes {

// A `UnaryAttemptFactory` whose calls the test answers: each reply queued
// with `Expect` answers the next call at once (on the calling thread); a
// call with no reply queued stays pending until `Complete`. It records what
// the caller asked for: each call's request, attempt information,
// connection, deadline and start time (on the transport's clock, if given).
//
// Thread safety: all methods may be called concurrently; the caller's
// callback runs with no lock held.
//
//   auto unary = std::make_shared<FakeUnaryTransport<Req, Resp>>(clock);
//   unary->Expect(FakeUnaryTransport<Req, Resp>::Fail(
//       absl::UnavailableError("busy"), {{"grpc-retry-pushback-ms", "200"}}));
//   unary->Expect(FakeUnaryTransport<Req, Resp>::Ok(Resp{...}));
//   auto caller = UnaryCaller<Req, Resp>::Create(source, unary, options);
template <class Request, class Response>
class FakeUnaryTransport final : public UnaryAttemptFactory<Request, Response> {
 public:
  using Done = typename UnaryAttemptFactory<Request, Response>::Done;

  // One attempt's answer.
  struct Reply {
    absl::Status status;
    Response response;
    Metadata trailers = {};
  };
  static Reply Ok(Response response) {
    return Reply{absl::OkStatus(), std::move(response), {}};
  }
  static Reply Fail(absl::Status status, Metadata trailers = {}) {
    return Reply{std::move(status), Response(), std::move(trailers)};
  }

  // What the caller asked for in one attempt.
  struct CallRecord {
    Request request;
    AttemptInfo info;
    std::uint64_t connection_id = 0;
    absl::Duration timeout;  // the attempt's deadline, from its start
    absl::Time started_at = absl::InfinitePast();
    bool done = false;
  };

  explicit FakeUnaryTransport(std::shared_ptr<Clock> clock = nullptr)
      : clock_(std::move(clock)) {}

  // The next call without a reply of its own answers with `reply`.
  void Expect(Reply reply) {
    std::lock_guard<std::mutex> lock(mu_);
    replies_.push_back(std::move(reply));
  }

  // Answers pending call `i` (0-based). Returns false if there is no such
  // call or it was answered already.
  bool Complete(std::size_t i, Reply reply) {
    Done done;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (i >= calls_.size() || calls_[i].done) return false;
      calls_[i].done = true;
      done = std::move(pending_[i]);
    }
    done(reply.status, std::move(reply.response), reply.trailers);
    return true;
  }

  std::size_t call_count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_.size();
  }
  CallRecord call(std::size_t i) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (i >= calls_.size()) {
      ADD_FAILURE() << "FakeUnaryTransport: no call " << i << " (only "
                    << calls_.size() << " were made)";
      return CallRecord();
    }
    return calls_[i];
  }
  // Replies queued with `Expect` that no call has used yet.
  std::size_t pending_replies() const {
    std::lock_guard<std::mutex> lock(mu_);
    return replies_.size();
  }

  void Call(const ConnectionPick& connection, const AttemptInfo& info,
            const Request& request, absl::Duration timeout,
            Done done) override {
    absl::optional<Reply> reply;
    {
      std::lock_guard<std::mutex> lock(mu_);
      CallRecord rec;
      rec.request = request;
      rec.info = info;
      rec.connection_id = connection.connection_id;
      rec.timeout = timeout;
      if (clock_) rec.started_at = clock_->Now();
      if (!replies_.empty()) {
        reply = std::move(replies_.front());
        replies_.pop_front();
        rec.done = true;
      }
      calls_.push_back(std::move(rec));
      pending_.push_back(reply ? Done() : std::move(done));
    }
    if (reply) done(reply->status, std::move(reply->response), reply->trailers);
  }

 private:
  const std::shared_ptr<Clock> clock_;
  mutable std::mutex mu_;
  std::deque<Reply> replies_;
  std::vector<CallRecord> calls_;
  std::vector<Done> pending_;
};

}  // namespace fakes
}  // namespace tether

#endif  // TETHER_TESTING_FAKE_UNARY_TRANSPORT_H_
