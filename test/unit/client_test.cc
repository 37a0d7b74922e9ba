// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Logic tests of tether::Client: its options, and that every stream and
// caller it makes shares its breaker, its clock, its logging and its
// metrics. Fake connections, fake attempts, one FakeClock; no sockets and
// no real pool (gRPC's threads are not TSan-built: the client with a real
// pool is tested in test/integration/client_integration_test.cc).
#include "tether/client.h"

#include <climits>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/unit/stream_fixture.h"
#include "tether/testing/fake_bidi_transport.h"
#include "tether/testing/fake_clock.h"
#include "tether/testing/fake_transport.h"
#include "tether/testing/fake_unary_transport.h"

namespace tether {
namespace {

using ::testing::HasSubstr;

using stream_test::Req;
using stream_test::Resp;

using Transport = fakes::FakeTransport<Req, Resp>;
using Script = Transport::Script;

// Keeps every line the client's logging writes.
class LinesSink final : public LogSink {
 public:
  void Write(LogSeverity /*severity*/, absl::string_view line) override {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.emplace_back(line);
  }
  std::vector<std::string> lines() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

// Options that pass, on fake connections; `pool` only labels the target.
ClientOptions Valid() {
  ClientOptions o;
  o.pool.addresses = {"127.0.0.1:1"};
  o.connections = std::make_shared<fakes::FakeConnectionSource>();
  o.logging = absl::nullopt;
  return o;
}

void ExpectInvalid(const ClientOptions& options, absl::string_view field) {
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(options);
  ASSERT_FALSE(client.ok()) << "accepted; expected an error naming " << field;
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(client.status().message()), HasSubstr(field));
}

TEST(ClientOptionsTest, DefaultsWithATargetAreValid) {
  ClientOptions o = Valid();
  o.pool.addresses.clear();
  o.pool.target = "dns:///ledger.internal:443";
  EXPECT_TRUE(o.pool.health_check);  // on in a client
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->pool(), nullptr);  // fake connections: no pool
  EXPECT_EQ((*client)->connections(), o.connections);
  ASSERT_NE((*client)->breaker(), nullptr);
  EXPECT_EQ((*client)->target_label(), "dns:///ledger.internal:443");
  // The breaker is named after the target, so its errors say which.
  EXPECT_EQ((*client)->breaker()->name(), "dns:///ledger.internal:443");
}

TEST(ClientOptionsTest, AnAddressListIsTheTargetLabel) {
  ClientOptions o = Valid();
  o.pool.addresses = {"10.0.0.7:443", "10.0.0.8:443"};
  o.breaker.name = "ledger";
  auto client = Client::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->target_label(), "10.0.0.7:443,10.0.0.8:443");
  EXPECT_EQ((*client)->breaker()->name(), "ledger");  // a name given is kept
}

TEST(ClientOptionsTest, TheBreakersTheClientWiresMustBeLeftEmpty) {
  auto other = CircuitBreaker::Create(CircuitBreakerOptions()).value();
  ClientOptions o = Valid();
  o.pool.breaker = other;
  ExpectInvalid(o, "ClientOptions.pool.breaker must be empty");
  o = Valid();
  o.streams.breaker = other;
  ExpectInvalid(o, "ClientOptions.streams.breaker must be empty");
  o = Valid();
  o.unary.breaker = other;
  ExpectInvalid(o, "ClientOptions.unary.breaker must be empty");
}

TEST(ClientOptionsTest, AnInvalidPartIsNamed) {
  ClientOptions o = Valid();
  o.connections = nullptr;   // a pool is made, so its options are checked
  o.pool.addresses.clear();  // neither target nor addresses
  ExpectInvalid(o, "ClientOptions.pool: ");
  o.pool.addresses = {"127.0.0.1:1"};
  o.pool.max_connections = 0;
  ExpectInvalid(o, "ClientOptions.pool: ");
  o = Valid();
  o.streams.max_attempts_without_progress = 0;
  ExpectInvalid(o, "ClientOptions.streams: ");
  o = Valid();
  o.streams.max_time_without_progress = absl::ZeroDuration();
  ExpectInvalid(o, "ClientOptions.streams: ");
  o = Valid();
  o.unary.max_attempts = 101;
  ExpectInvalid(o, "ClientOptions.unary: ");
  o = Valid();
  o.breaker.window_size = 0;
  ExpectInvalid(o, "ClientOptions.breaker: ");
  o = Valid();
  o.breaker.window_size = 1000001;
  ExpectInvalid(o, "ClientOptions.breaker: ");
  o = Valid();
  o.logging = LoggingOptions();
  o.logging->max_lines_per_window = 0;
  ExpectInvalid(o, "ClientOptions.logging: ");
}

TEST(ClientOptionsTest, ExtremesThePartsAllowAreAccepted) {
  ClientOptions o = Valid();
  o.streams.max_time_without_progress = absl::InfiniteDuration();
  o.streams.max_attempts_without_progress = INT_MAX;
  o.breaker.window_size = 1000000;
  o.breaker.break_duration = absl::Hours(24);
  o.breaker.max_break_duration = absl::Hours(24);
  o.unary.max_attempts = 100;
  o.unary.overall_timeout = absl::Hours(24);
  o.logging = LoggingOptions();
  o.logging->max_lines_per_window = 1000000;
  auto client = Client::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  o.use_breaker = false;
  o.breaker.window_size = 0;  // not used, so not checked
  client = Client::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->breaker(), nullptr);
}

// A client on fake connections and a fake clock, as an application's unit
// test would make one.
class ClientTest : public ::testing::Test {
 protected:
  ClientTest()
      : clock_(std::make_shared<fakes::FakeClock>()),
        source_(std::make_shared<fakes::FakeConnectionSource>()),
        transport_(std::make_shared<Transport>(source_, clock_)),
        metrics_(std::make_shared<InMemoryMetricsSink>()),
        log_(std::make_shared<LinesSink>()) {
    options_.connections = source_;
    options_.clock = clock_;
    options_.metrics = metrics_;
    options_.logging = LoggingOptions();
    options_.logging->sink = log_;
    options_.breaker.name = "ledger";
    options_.breaker.consecutive_failures = 3;
    options_.breaker.break_duration = absl::Seconds(10);
    options_.breaker.break_jitter = 0;
    options_.streams.random_seed = 7;
    options_.streams.max_time_without_progress = absl::Minutes(5);
    options_.streams.max_attempts_without_progress = 1000;
  }

  ~ClientTest() override {
    streams_.clear();
    clock_->RunDue();  // the cancels complete later, as in gRPC
  }

  ReconnectingStream<Req, Resp>::Spec Spec() {
    ReconnectingStream<Req, Resp>::Spec spec;
    spec.attempt_factory = transport_;
    spec.sequence_of = [](const Resp& r) -> absl::optional<std::uint64_t> {
      return r.seq;
    };
    spec.resume_after = [](Req& r, std::uint64_t seq) { r.after = seq; };
    return spec;
  }

  void Start(Client& client, StreamSettings settings = {}) {
    auto stream = client.Start(
        Spec(), [this](Resp&& r) { got_.push_back(r.seq); },
        [this](const absl::Status& s) { done_.push_back(s); },
        std::move(settings));
    ASSERT_TRUE(stream.ok()) << stream.status();
    streams_.push_back(*std::move(stream));
  }

  std::shared_ptr<fakes::FakeClock> clock_;
  std::shared_ptr<fakes::FakeConnectionSource> source_;
  std::shared_ptr<Transport> transport_;
  std::shared_ptr<InMemoryMetricsSink> metrics_;
  std::shared_ptr<LinesSink> log_;
  ClientOptions options_;
  std::vector<std::unique_ptr<ReconnectingStream<Req, Resp>>> streams_;
  std::vector<std::uint64_t> got_;
  std::vector<absl::Status> done_;
};

// The breaker of the streams is the client's: failures of two streams add
// up in it, and once it is open no stream touches a connection.
TEST_F(ClientTest, EveryStreamSharesTheClientsBreaker) {
  auto client = Client::Create(options_).value();
  EXPECT_EQ(client->pool(), nullptr);
  EXPECT_EQ(client->connections(), source_);
  for (int i = 0; i < 100; ++i) transport_->Expect(Script().ConnectFails());
  Start(*client);
  Start(*client);
  for (int i = 0; i < 20 && client->breaker()->state() != BreakerState::kOpen;
       ++i) {
    clock_->AdvanceBy(absl::Milliseconds(100));
  }
  ASSERT_EQ(client->breaker()->state(), BreakerState::kOpen);
  EXPECT_EQ(client->breaker()->counts().failed, 3u);
  const std::size_t attempts = transport_->attempt_count();
  clock_->AdvanceBy(absl::Seconds(9));  // within the break: no attempt
  EXPECT_EQ(transport_->attempt_count(), attempts);
  EXPECT_TRUE(done_.empty());
}

TEST_F(ClientTest, StreamsLogAndCountUnderTheirMethodAndTheTarget) {
  options_.pool.addresses = {"127.0.0.1:1"};  // only labels the target
  auto client = Client::Create(options_).value();
  transport_->Expect(Script().Message(Resp{1}).Message(Resp{2}));
  StreamSettings settings;
  settings.method = "ledger.v1.Ledger/WatchAccount";
  Start(*client, settings);
  clock_->RunDue();
  EXPECT_EQ(got_, (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(metrics_->Total(MetricId::kAttemptStarted), 1);
  // The target label comes from `pool` also when fake connections replace
  // the pool: a test labels its metrics as production does.
  EXPECT_EQ(metrics_->Value(
                MetricId::kAttemptStarted,
                {"ledger.v1.Ledger/WatchAccount", "127.0.0.1:1", "first"}),
            1);
  bool logged = false;
  for (const std::string& line : log_->lines()) {
    if (line.find("stream ledger.v1.Ledger/WatchAccount#1: attempt 1") !=
        std::string::npos) {
      logged = true;
    }
  }
  EXPECT_TRUE(logged) << "no line for the stream's first attempt";
}

TEST_F(ClientTest, AStreamMayBringItsOwnOptionsButNotItsOwnBreaker) {
  auto client = Client::Create(options_).value();
  StreamSettings settings;
  settings.options = ReconnectingStreamOptions();
  settings.options->breaker =
      CircuitBreaker::Create(CircuitBreakerOptions()).value();
  auto refused = client->Start(
      Spec(), [](Resp&&) {}, [](const absl::Status&) {}, settings);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("StreamSettings.options.breaker must be empty"));

  settings.options->breaker = nullptr;
  settings.options->max_outbox = 0;
  refused = client->Start(
      Spec(), [](Resp&&) {}, [](const absl::Status&) {}, settings);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("StreamSettings.options: "));

  // Valid own options: the stream still gets the client's breaker.
  settings.options->max_outbox = 64;
  settings.options->max_attempts_without_progress = 1000;
  settings.options->max_time_without_progress = absl::Minutes(5);
  for (int i = 0; i < 100; ++i) transport_->Expect(Script().ConnectFails());
  Start(*client, settings);
  for (int i = 0; i < 20 && client->breaker()->state() != BreakerState::kOpen;
       ++i) {
    clock_->AdvanceBy(absl::Milliseconds(100));
  }
  EXPECT_EQ(client->breaker()->state(), BreakerState::kOpen);
}

TEST_F(ClientTest, BidiStreamsAndUnaryCallersShareTheBreakerToo) {
  auto client = Client::Create(options_).value();

  using Bidi = fakes::FakeBidiTransport<Req, Resp>;
  auto bidi = std::make_shared<Bidi>(source_, clock_);
  for (int i = 0; i < 2; ++i) bidi->Expect(Bidi::Script().ConnectFails());
  ReconnectingBidiStream<Req, Resp>::Spec spec;
  spec.attempt_factory = bidi;
  spec.open_requests = [](const ResumeState&) { return std::vector<Req>{}; };
  auto stream = client->Start(
      spec, [](Resp&&) {}, [](const absl::Status&) {});
  ASSERT_TRUE(stream.ok()) << stream.status();
  for (int i = 0; i < 20 && client->breaker()->counts().failed < 2; ++i) {
    clock_->AdvanceBy(absl::Milliseconds(100));
  }
  EXPECT_EQ(client->breaker()->counts().failed, 2u);

  using Unary = fakes::FakeUnaryTransport<Req, Resp>;
  auto unary = std::make_shared<Unary>(clock_);
  unary->Expect(Unary::Fail(absl::InternalError("boom")));
  unary->Expect(Unary::Fail(absl::InternalError("boom")));
  auto caller = client->Unary<Req, Resp>(
      std::shared_ptr<UnaryAttemptFactory<Req, Resp>>(unary));
  ASSERT_TRUE(caller.ok()) << caller.status();
  absl::optional<absl::StatusOr<Resp>> result;
  (*caller)->Call(Req{}, [&](absl::StatusOr<Resp> r) { result = r; });
  for (int i = 0; i < 50 && !result.has_value(); ++i) {
    clock_->AdvanceBy(absl::Milliseconds(100));
  }
  // The third failure in a row (two bidi, then the unary call's first)
  // opened the client's breaker; the call's retry is refused by it.
  ASSERT_TRUE(result.has_value());
  EXPECT_FALSE(result->ok());
  EXPECT_EQ(client->breaker()->state(), BreakerState::kOpen);
  stream->reset();
}

}  // namespace
}  // namespace tether
