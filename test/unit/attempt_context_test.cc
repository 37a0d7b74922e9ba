// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Per-attempt information, the full end of an attempt (trailers, error
// details) and the parsing of server pushback (gRFC A6; what a pushback does
// to a stream of either kind: pushback_test.cc), on the fakes and a fake
// clock.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/cord.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/unit/stream_fixture.h"
#include "tether/classification.h"
#include "tether/connection_pool.h"
#include "tether/generated_method.h"
#include "tether/reconnecting_stream.h"

namespace tether {
namespace stream_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class AttemptContextTest : public StreamFixture {
 protected:
  AttemptContextTest() {
    ExponentialBackoffOptions b;
    b.initial_delay = absl::Milliseconds(100);
    b.jitter = Jitter::kNone;
    options_.backoff = std::shared_ptr<const BackoffPolicy>(
        ExponentialBackoff::Create(b).value());
  }

  Stream::Spec Spec() {
    Stream::Spec spec;
    spec.attempt_factory = transport_;
    // No explicit return type: a callable returning std::uint64_t is
    // accepted as a `sequence_of`.
    spec.sequence_of = [](const Resp& r) { return r.seq; };
    spec.resume_after = [](Req& r, std::uint64_t seq) { r.after = seq; };
    return spec;
  }
  std::unique_ptr<Stream> StartStream(Stream::Spec spec) {
    return Start(std::move(spec));
  }
};

// Both kinds of stream tell each attempt the same: its number, why it
// started, where it resumes, and on which connection.
template <class Kind>
class AttemptInfoTest : public EachKind<Kind> {};
TYPED_TEST_SUITE(AttemptInfoTest, StreamKinds, StreamKindNames);

TYPED_TEST(AttemptInfoTest, EachAttemptKnowsItsNumberReasonPositionConnection) {
  using Script = typename TestFixture::Script;
  auto fake = this->fake();
  fake->Expect(
      Script().Messages({M(1), M(2)}).Finish(absl::UnavailableError("bye")));
  fake->Expect(Script().Message(M(3)).GoawayAfter(1));
  fake->Expect(Script().Message(M(4)));
  auto stream = this->StartDefault();
  this->clock_->RunDue();
  ASSERT_EQ(fake->attempt_count(), 3u);
  const std::vector<AttemptInfo> infos = fake->infos();
  ASSERT_EQ(infos.size(), 3u);
  EXPECT_EQ(infos[0].attempt, 1u);
  EXPECT_EQ(infos[0].reason, AttemptReason::kFirst);
  EXPECT_FALSE(infos[0].resumed);
  EXPECT_EQ(infos[0].connection_id, 1u);
  EXPECT_EQ(infos[1].attempt, 2u);
  EXPECT_EQ(infos[1].reason, AttemptReason::kReopen);
  EXPECT_TRUE(infos[1].resumed);
  EXPECT_EQ(infos[1].resume_after_seq, 2u);
  EXPECT_EQ(infos[2].attempt, 3u);
  EXPECT_EQ(infos[2].reason, AttemptReason::kMigration);
  EXPECT_EQ(infos[2].resume_after_seq, 3u);
  // The GOAWAY moved the stream to a new connection.
  EXPECT_NE(infos[2].connection_id, infos[1].connection_id);
  EXPECT_EQ(infos[2].connection_id, fake->attempt(2)->connection_id());
  EXPECT_THAT(this->got(), ElementsAre(1, 2, 3, 4));
}

TEST_F(AttemptContextTest, ClassifierSeesTrailersAndErrorDetails) {
  std::mutex mu;
  std::vector<AttemptEnd> seen;
  options_.classifier = [&](const AttemptEnd& end) {
    std::lock_guard<std::mutex> l(mu);
    seen.push_back(end);
    // An app-specific rule keyed on a trailer: a quota that will not
    // reset soon is permanent.
    auto it = end.trailing_metadata.find("x-quota");
    if (it != end.trailing_metadata.end() && it->second == "exhausted") {
      return EndClass::kPermanent;
    }
    return DefaultClassify(end);
  };
  absl::Status with_details = absl::ResourceExhaustedError("quota");
  with_details.SetPayload(kStatusDetailsPayloadUrl,
                          absl::Cord("serialized-google.rpc.Status"));
  transport_->Expect(Transport::Script().Message(M(1)).Finish(
      with_details, {{"x-quota", "exhausted"}, {"x-other", "1"}}));
  auto stream = StartStream(Spec());
  clock_->RunDue();
  ASSERT_EQ(done().size(), 1u);
  EXPECT_EQ(done()[0].code(), absl::StatusCode::kResourceExhausted);
  // The final status keeps the details for the app.
  EXPECT_TRUE(done()[0].GetPayload(kStatusDetailsPayloadUrl).has_value());
  std::lock_guard<std::mutex> l(mu);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].error_details, "serialized-google.rpc.Status");
  EXPECT_EQ(seen[0].trailing_metadata.count("x-other"), 1u);
  EXPECT_TRUE(seen[0].received_messages);
  EXPECT_FALSE(seen[0].pushback.present);
  EXPECT_EQ(transport_->attempt_count(), 1u);
}

TEST(RetryPushbackTest, ParsesGrfcA6Values) {
  EXPECT_FALSE(ParseRetryPushback({}).present);
  EXPECT_FALSE(ParseRetryPushback({{"x-other", "5"}}).present);
  RetryPushback ok = ParseRetryPushback({{"grpc-retry-pushback-ms", "250"}});
  EXPECT_TRUE(ok.present);
  EXPECT_FALSE(ok.stop);
  EXPECT_EQ(ok.delay, absl::Milliseconds(250));
  EXPECT_EQ(ParseRetryPushback({{"grpc-retry-pushback-ms", " 12 "}}).delay,
            absl::Milliseconds(12));
  for (const char* bad : {"-1", "-9223372036854775808", "abc", "", "1.5", "+5",
                          "99999999999999999999", "12ms"}) {
    RetryPushback p = ParseRetryPushback({{"grpc-retry-pushback-ms", bad}});
    EXPECT_TRUE(p.present) << bad;
    EXPECT_TRUE(p.stop) << bad;
  }
  // Two values that agree are one; two that disagree are malformed.
  EXPECT_FALSE(ParseRetryPushback({{"grpc-retry-pushback-ms", "5"},
                                   {"grpc-retry-pushback-ms", "5"}})
                   .stop);
  EXPECT_TRUE(ParseRetryPushback({{"grpc-retry-pushback-ms", "5"},
                                  {"grpc-retry-pushback-ms", "6"}})
                  .stop);
}

TEST(RetryPushbackTest, MakeAttemptEndFillsDetailsAndPushback) {
  absl::Status s = absl::UnavailableError("x");
  s.SetPayload(kStatusDetailsPayloadUrl, absl::Cord("bytes"));
  AttemptEnd end = MakeAttemptEnd(s, {{"grpc-retry-pushback-ms", "3"}});
  EXPECT_EQ(end.error_details, "bytes");
  EXPECT_EQ(end.pushback.delay, absl::Milliseconds(3));
  EXPECT_EQ(end.status, s);
}

TEST(CertificateFailureTest, HandshakeRefusalsArePermanent) {
  AttemptEnd end;
  end.status = absl::UnavailableError(
      "failed to connect to all addresses; last error: UNKNOWN: "
      "ipv4:127.0.0.1:1: Ssl handshake failed: SSL_ERROR_SSL: "
      "error:1000007d:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED");
  EXPECT_TRUE(IsCertificateFailure(end.status));
  EXPECT_EQ(DefaultClassify(end), EndClass::kPermanent);
  // What gRPC 1.51 on Debian 12 (OpenSSL 3) says for an unknown CA or an
  // expired certificate (seen in tls_test.cc).
  end.status = absl::UnavailableError(
      "failed to connect to all addresses; last error: UNKNOWN: "
      "ipv4:127.0.0.1:40585: Ssl handshake failed: SSL_ERROR_SSL: "
      "error:0A000086:SSL routines::certificate verify failed");
  EXPECT_EQ(DefaultClassify(end), EndClass::kPermanent);
  // A refused client certificate looks like any closed connection.
  end.status = absl::UnavailableError(
      "failed to connect to all addresses; last error: UNAVAILABLE: "
      "ipv4:127.0.0.1:36045: Socket closed");
  EXPECT_EQ(DefaultClassify(end), EndClass::kDrain);
  end.status = absl::UnavailableError(
      "failed to connect to all addresses; last error: UNAVAILABLE: "
      "ipv4:127.0.0.1:1: Connection refused");
  EXPECT_FALSE(IsCertificateFailure(end.status));
  EXPECT_EQ(DefaultClassify(end), EndClass::kDrain);
  // Only UNAVAILABLE: the same words in another code are left alone.
  end.status = absl::InternalError("CERTIFICATE_VERIFY_FAILED");
  EXPECT_FALSE(IsCertificateFailure(end.status));
}

TEST(InterceptorOptionsTest, NullFactoryIsRejected) {
  ConnectionPoolOptions o;
  o.addresses = {"127.0.0.1:1"};
  o.interceptor_factories.push_back(nullptr);
  auto pool = ConnectionPool::Create(std::move(o));
  EXPECT_EQ(pool.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(pool.status().message()),
              HasSubstr("interceptor_factories"));
}

struct ProtoLike {
  std::uint64_t seq() const { return seq_; }
  std::uint64_t seq_ = 0;
};

TEST(SequenceFromTest, ReadsTheGetterZeroIncluded) {
  auto seq = SequenceFrom(&ProtoLike::seq);
  EXPECT_EQ(seq(ProtoLike{7}), absl::optional<std::uint64_t>(7));
  EXPECT_EQ(seq(ProtoLike{0}), absl::optional<std::uint64_t>(0));
  EXPECT_EQ(seq(ProtoLike{~std::uint64_t{0}}),
            absl::optional<std::uint64_t>(~std::uint64_t{0}));
}

// A stream numbered from 0: 0 is delivered as the first position, a reopen
// resumes after it, and the server's replay of 0 is a duplicate.
TEST(SequenceFromTest, AStreamNumberedFromZeroResumesAfterZero) {
  auto clock = std::make_shared<fakes::FakeClock>();
  auto source = std::make_shared<fakes::FakeConnectionSource>();
  auto transport =
      std::make_shared<fakes::FakeTransport<Req, ProtoLike>>(source, clock);
  transport->Expect({{ProtoLike{0}}, {}, absl::UnavailableError("gone")});
  transport->Expect({{ProtoLike{0}, ProtoLike{1}}, {}, absl::OkStatus()});
  ReconnectingStream<Req, ProtoLike>::Spec spec;
  spec.attempt_factory = transport;
  spec.sequence_of = SequenceFrom(&ProtoLike::seq);
  spec.resume_after = [](Req& r, std::uint64_t after) { r.after = after; };
  ReconnectingStreamOptions options;
  options.clock = clock;
  options.random_seed = 7;
  std::vector<std::uint64_t> got;
  absl::optional<absl::Status> done;
  auto stream = ReconnectingStream<Req, ProtoLike>::Start(
      source, std::move(spec), options,
      [&](ProtoLike&& e) { got.push_back(e.seq()); },
      [&](const absl::Status& s) { done = s; });
  ASSERT_TRUE(stream.ok()) << stream.status();
  clock->AdvanceBy(absl::Seconds(1));
  ASSERT_EQ(transport->attempt_count(), 2u);
  EXPECT_EQ(transport->attempt(1)->request().after, 0u);
  EXPECT_TRUE(transport->infos()[1].resumed);
  EXPECT_THAT(got, ElementsAre(0, 1));
  ASSERT_TRUE(done.has_value());
  EXPECT_TRUE(done->ok()) << *done;
  EXPECT_EQ((*stream)->stats().duplicates_dropped, 1u);
}

}  // namespace
}  // namespace stream_test
}  // namespace tether
