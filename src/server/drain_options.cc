// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/server/drain_options.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace tether {
namespace server {
namespace {

constexpr absl::Duration kMaxStep = absl::Hours(1);

// "DrainOptions.<field> must be in [lo, hi], got <value>" unless it is.
absl::Status InRange(absl::string_view field, absl::Duration value,
                     absl::Duration lo, absl::Duration hi,
                     absl::string_view hi_name = "") {
  if (value >= lo && value <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "DrainOptions.", field, " must be in [", absl::FormatDuration(lo), ", ",
      hi_name.empty() ? absl::FormatDuration(hi) : std::string(hi_name),
      "], got ", absl::FormatDuration(value)));
}

}  // namespace

absl::Status ValidateDrainOptions(const DrainOptions& o) {
  absl::Status s = InRange("unready_window", o.unready_window,
                           absl::ZeroDuration(), kMaxStep);
  if (s.ok()) {
    s = InRange("notice_grace", o.notice_grace, absl::ZeroDuration(), kMaxStep);
  }
  if (s.ok()) {
    s = InRange("drain_deadline", o.drain_deadline, absl::Milliseconds(10),
                kMaxStep);
  }
  if (s.ok()) {
    s = InRange("goaway_grace", o.goaway_grace, absl::Milliseconds(10),
                o.drain_deadline, "drain_deadline");
  }
  if (s.ok()) {
    s = InRange("stop_slack", o.stop_slack, absl::Milliseconds(10),
                absl::Minutes(1));
  }
  if (s.ok() && o.end_status.ok()) {
    s = absl::InvalidArgumentError(
        "DrainOptions.end_status must not be OK (a client takes OK as the "
        "stream's natural end and does not reopen)");
  }
  return s;
}

absl::Duration HardBound(const DrainOptions& o) {
  return o.unready_window + o.notice_grace + o.drain_deadline + o.stop_slack;
}

std::string DrainReportToString(const DrainReport& r) {
  return absl::StrCat(r.server_stopped ? "stopped" : "not stopped", " after ",
                      absl::FormatDuration(r.elapsed), ": ", r.calls_noticed,
                      " noticed, ", r.calls_at_goaway, " open at GOAWAY, ",
                      r.calls_told_to_end, " told to end, ", r.calls_stuck,
                      " stuck");
}

}  // namespace server
}  // namespace tether
