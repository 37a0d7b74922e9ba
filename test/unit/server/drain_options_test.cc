// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// DrainOptions: the defaults, every field at its extremes, and the hard
// bound they add up to.
#include "tether/server/drain_options.h"

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether {
namespace server {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(DrainOptionsTest, DefaultsAreValidAndBoundedByKubernetesGracePeriod) {
  DrainOptions o;
  EXPECT_TRUE(ValidateDrainOptions(o).ok());
  EXPECT_EQ(HardBound(o), absl::Seconds(21));
  EXPECT_LT(HardBound(o), absl::Seconds(30));
  EXPECT_EQ(o.end_status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(o.end_status.error_message(), "server is draining");
}

struct Case {
  std::string field;
  std::function<void(DrainOptions&)> set;
  bool valid;
};

TEST(DrainOptionsTest, EveryFieldAtItsExtremes) {
  const absl::Duration ns = absl::Nanoseconds(1);
  const absl::Duration inf = absl::InfiniteDuration();
  const std::vector<Case> cases = {
      {"unready_window", [](DrainOptions& o) { o.unready_window = {}; }, true},
      {"unready_window",
       [&](DrainOptions& o) { o.unready_window = absl::Hours(1); }, true},
      {"unready_window",
       [&](DrainOptions& o) { o.unready_window = absl::Hours(1) + ns; }, false},
      {"unready_window", [&](DrainOptions& o) { o.unready_window = -ns; },
       false},
      {"unready_window", [&](DrainOptions& o) { o.unready_window = inf; },
       false},
      {"notice_grace", [](DrainOptions& o) { o.notice_grace = {}; }, true},
      {"notice_grace", [&](DrainOptions& o) { o.notice_grace = -ns; }, false},
      {"notice_grace", [&](DrainOptions& o) { o.notice_grace = inf; }, false},
      {"notice_grace",
       [&](DrainOptions& o) { o.notice_grace = absl::Hours(1) + ns; }, false},
      {"drain_deadline",
       [&](DrainOptions& o) {
         o.drain_deadline = o.goaway_grace = absl::Milliseconds(10);
       },
       true},
      {"drain_deadline",
       [&](DrainOptions& o) { o.drain_deadline = absl::Hours(1); }, true},
      {"drain_deadline", [](DrainOptions& o) { o.drain_deadline = {}; }, false},
      {"drain_deadline", [&](DrainOptions& o) { o.drain_deadline = inf; },
       false},
      {"drain_deadline", [&](DrainOptions& o) { o.drain_deadline = -inf; },
       false},
      {"goaway_grace", [](DrainOptions& o) { o.goaway_grace = {}; }, false},
      {"goaway_grace",
       [&](DrainOptions& o) { o.goaway_grace = o.drain_deadline; }, true},
      {"goaway_grace",
       [&](DrainOptions& o) { o.goaway_grace = o.drain_deadline + ns; }, false},
      {"goaway_grace", [&](DrainOptions& o) { o.goaway_grace = inf; }, false},
      {"stop_slack",
       [&](DrainOptions& o) { o.stop_slack = absl::Milliseconds(10); }, true},
      {"stop_slack",
       [&](DrainOptions& o) { o.stop_slack = absl::Milliseconds(10) - ns; },
       false},
      {"stop_slack",
       [&](DrainOptions& o) { o.stop_slack = absl::Minutes(1) + ns; }, false},
      {"stop_slack", [&](DrainOptions& o) { o.stop_slack = inf; }, false},
      {"end_status", [](DrainOptions& o) { o.end_status = grpc::Status::OK; },
       false},
      {"end_status",
       [](DrainOptions& o) {
         o.end_status = grpc::Status(grpc::StatusCode::CANCELLED, "");
       },
       true},
  };
  for (const Case& c : cases) {
    DrainOptions o;
    c.set(o);
    const absl::Status s = ValidateDrainOptions(o);
    if (c.valid) {
      EXPECT_TRUE(s.ok()) << c.field << ": " << s;
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.field;
      EXPECT_THAT(
          std::string(s.message()),
          AllOf(HasSubstr("DrainOptions." + c.field), HasSubstr("must")))
          << s;
    }
  }
}

TEST(DrainOptionsTest, LongestValidOptionsGiveAFiniteBound) {
  DrainOptions o;
  o.unready_window = o.notice_grace = o.drain_deadline = o.goaway_grace =
      absl::Hours(1);
  o.stop_slack = absl::Minutes(1);
  ASSERT_TRUE(ValidateDrainOptions(o).ok());
  EXPECT_EQ(HardBound(o), absl::Hours(3) + absl::Minutes(1));
}

TEST(DrainOptionsTest, ReportReadsAsOneLine) {
  DrainReport r;
  r.server_stopped = true;
  r.elapsed = absl::Milliseconds(1500);
  r.calls_noticed = 3;
  r.calls_at_goaway = 1;
  EXPECT_EQ(DrainReportToString(r),
            "stopped after 1.5s: 3 noticed, 1 open at GOAWAY, 0 told to end, "
            "0 stuck");
}

}  // namespace
}  // namespace server
}  // namespace tether
