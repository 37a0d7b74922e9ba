// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// gMock matchers for tests of code that uses tether. Part of
// `tether::tether_mocks`.
//
//   using ::tether::fakes::StatusIs;
//   EXPECT_THAT(stream->Finish(), StatusIs(absl::StatusCode::kNotFound));
//   EXPECT_THAT(status, StatusIs(absl::StatusCode::kUnavailable,
//                                ::testing::HasSubstr("breaker")));
//   EXPECT_CALL(*observer, OnAttemptStarted(AllOf(
//       AttemptReasonIs(tether::AttemptReason::kReopen), ResumedAfter(3))));
//   EXPECT_THAT(transport->requests(),
//               ElementsAre(NotResumedRequest(&Req::after),
//                           RequestResumedAfter(&Req::after, 3)));
#ifndef TETHER_TESTING_MATCHERS_H_
#define TETHER_TESTING_MATCHERS_H_

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "gmock/gmock.h"
#include "tether/observer.h"

namespace tether {
namespace fakes {
namespace internal_matchers {

inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <class T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

// Matches an absl::Status or an absl::StatusOr<T> by code and message.
class StatusIsMatcher {
 public:
  using is_gtest_matcher = void;

  StatusIsMatcher(absl::StatusCode code,
                  ::testing::Matcher<const std::string&> message)
      : code_(code), message_(std::move(message)) {}

  template <class T>
  bool MatchAndExplain(const T& value,
                       ::testing::MatchResultListener* listener) const {
    const absl::Status& status = GetStatus(value);
    *listener << "whose status is " << status.ToString();
    if (status.code() != code_) return false;
    const std::string message(status.message());
    ::testing::StringMatchResultListener inner;
    if (!message_.MatchAndExplain(message, &inner)) {
      *listener << ", whose message does not match";
      if (!inner.str().empty()) *listener << " (" << inner.str() << ")";
      return false;
    }
    return true;
  }

  void DescribeTo(std::ostream* os) const {
    *os << "has status code " << absl::StatusCodeToString(code_)
        << " and a message that ";
    message_.DescribeTo(os);
  }
  void DescribeNegationTo(std::ostream* os) const {
    *os << "does not have status code " << absl::StatusCodeToString(code_)
        << " or has a message that ";
    message_.DescribeNegationTo(os);
  }

 private:
  absl::StatusCode code_;
  ::testing::Matcher<const std::string&> message_;
};

// Matches an `AttemptInfo`'s resume position.
class ResumedAfterMatcher {
 public:
  using is_gtest_matcher = void;

  explicit ResumedAfterMatcher(absl::optional<std::uint64_t> seq) : seq_(seq) {}

  bool MatchAndExplain(const AttemptInfo& info,
                       ::testing::MatchResultListener* listener) const {
    Explain(info, listener);
    if (!seq_) return !info.resumed;
    return info.resumed && info.resume_after_seq == *seq_;
  }
  void DescribeTo(std::ostream* os) const {
    if (seq_) {
      *os << "is an attempt resumed after seq " << *seq_;
    } else {
      *os << "is an attempt that does not resume";
    }
  }
  void DescribeNegationTo(std::ostream* os) const {
    if (seq_) {
      *os << "is not an attempt resumed after seq " << *seq_;
    } else {
      *os << "is an attempt that resumes";
    }
  }

 private:
  static void Explain(const AttemptInfo& info,
                      ::testing::MatchResultListener* listener) {
    *listener << "attempt " << info.attempt;
    if (info.resumed) {
      *listener << " resumed after seq " << info.resume_after_seq;
    } else {
      *listener << " does not resume";
    }
  }

  absl::optional<std::uint64_t> seq_;
};

class AttemptReasonIsMatcher {
 public:
  using is_gtest_matcher = void;

  explicit AttemptReasonIsMatcher(AttemptReason reason) : reason_(reason) {}

  bool MatchAndExplain(const AttemptInfo& info,
                       ::testing::MatchResultListener* listener) const {
    *listener << "attempt " << info.attempt << " was started for reason "
              << AttemptReasonName(info.reason);
    return info.reason == reason_;
  }
  void DescribeTo(std::ostream* os) const {
    *os << "is an attempt started for reason " << AttemptReasonName(reason_);
  }
  void DescribeNegationTo(std::ostream* os) const {
    *os << "is an attempt not started for reason "
        << AttemptReasonName(reason_);
  }

 private:
  AttemptReason reason_;
};

// Matches a user's request type through `getter` (a data member pointer, a
// getter member function pointer, or any callable taking the request).
template <class Getter>
class RequestResumedAfterMatcher {
 public:
  using is_gtest_matcher = void;

  RequestResumedAfterMatcher(Getter getter, std::uint64_t seq)
      : getter_(std::move(getter)), seq_(seq) {}

  template <class Request>
  bool MatchAndExplain(const Request& request,
                       ::testing::MatchResultListener* listener) const {
    const auto got = static_cast<std::uint64_t>(std::invoke(getter_, request));
    *listener << "whose resume position is " << got;
    return got == seq_;
  }
  void DescribeTo(std::ostream* os) const {
    if (seq_ == 0) {
      *os << "is a request that does not resume (resume position 0)";
    } else {
      *os << "is a request resuming after seq " << seq_;
    }
  }
  void DescribeNegationTo(std::ostream* os) const {
    *os << "is a request whose resume position is not " << seq_;
  }

 private:
  Getter getter_;
  std::uint64_t seq_;
};

}  // namespace internal_matchers

// Matches an `absl::Status` or `absl::StatusOr<T>` whose code is `code`.
inline internal_matchers::StatusIsMatcher StatusIs(absl::StatusCode code) {
  return internal_matchers::StatusIsMatcher(code,
                                            ::testing::A<const std::string&>());
}

// ... and whose message matches `message` (a matcher of std::string, or a
// string that must equal the message), e.g. `HasSubstr("gave up")`.
template <class MessageMatcher>
internal_matchers::StatusIsMatcher StatusIs(absl::StatusCode code,
                                            MessageMatcher&& message) {
  return internal_matchers::StatusIsMatcher(
      code, ::testing::SafeMatcherCast<const std::string&>(
                ::testing::Matcher<std::string>(
                    std::forward<MessageMatcher>(message))));
}

// Matches an OK `absl::Status` or a `absl::StatusOr<T>` holding a value.
inline internal_matchers::StatusIsMatcher IsOk() {
  return StatusIs(absl::StatusCode::kOk);
}

// Matches an `AttemptInfo` (from `StreamObserver`) whose request resumed
// after sequence number `seq`.
inline internal_matchers::ResumedAfterMatcher ResumedAfter(std::uint64_t seq) {
  return internal_matchers::ResumedAfterMatcher(seq);
}

// Matches an `AttemptInfo` whose request was sent unchanged (no resume).
inline internal_matchers::ResumedAfterMatcher NotResumed() {
  return internal_matchers::ResumedAfterMatcher(absl::nullopt);
}

// Matches an `AttemptInfo` started for `reason` (first, reopen, migration).
inline internal_matchers::AttemptReasonIsMatcher AttemptReasonIs(
    AttemptReason reason) {
  return internal_matchers::AttemptReasonIsMatcher(reason);
}

// Matches an `AttemptInfo` whose attempt ran on connection `id`.
inline auto OnConnection(std::uint64_t id) {
  return ::testing::Field("connection_id", &AttemptInfo::connection_id, id);
}

// Matches a request (as recorded by `FakeTransport::requests()` or
// `FakeAttempt::request()`) whose resume position, read by `getter`, is
// `seq`. `getter` is whatever reads the field your `StreamSpec::resume_after`
// writes: `&WatchRequest::after` for a struct, `&WatchRequest::after_seq` for
// a proto, or a lambda.
template <class Getter>
internal_matchers::RequestResumedAfterMatcher<std::decay_t<Getter>>
RequestResumedAfter(Getter&& getter, std::uint64_t seq) {
  return internal_matchers::RequestResumedAfterMatcher<std::decay_t<Getter>>(
      std::forward<Getter>(getter), seq);
}

// Matches a request whose resume position (read by `getter`) is 0, the
// value of a first request that starts from the beginning.
template <class Getter>
internal_matchers::RequestResumedAfterMatcher<std::decay_t<Getter>>
NotResumedRequest(Getter&& getter) {
  return RequestResumedAfter(std::forward<Getter>(getter), 0);
}

}  // namespace fakes

#ifdef TETHER_DEPRECATED_TESTING_NAMESPACE
// Deprecated: the fakes' old namespace, `tether::testing`. Only on request,
// since any `tether::testing` hides gMock's `::testing` from code inside
// namespace tether (`testing::Return` would then name tether's).
namespace testing = fakes;
#endif
}  // namespace tether

#endif  // TETHER_TESTING_MATCHERS_H_
