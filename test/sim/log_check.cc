// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "test/sim/log_check.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace tether {
namespace sim {

absl::optional<LogEvent> LogLineKind(absl::string_view line, bool* known) {
  *known = true;
  if (absl::StartsWith(line, "suppressed ")) return absl::nullopt;
  // A stream's line: "stream <name>: <text>".
  if (absl::ConsumePrefix(&line, "stream ")) {
    const std::size_t colon = line.find(": ");
    if (colon == absl::string_view::npos) {
      *known = false;
      return absl::nullopt;
    }
    line.remove_prefix(colon + 2);
  }
  struct Shape {
    absl::string_view starts;    // the line starts with it
    absl::string_view contains;  // and contains it ("" for any)
    LogEvent kind;
  };
  static constexpr Shape kShapes[] = {
      {"attempt ", " started on connection ", LogEvent::kAttemptStarted},
      {"attempt ", " ended: ", LogEvent::kAttemptEnded},
      {"attempt ", " stalled (silent for ", LogEvent::kStalled},
      {"attempt ", ": the server sent its drain notice", LogEvent::kStreamDraining},
      {"duplicate seq ", "", LogEvent::kDuplicate},
      {"gap: ", "", LogEvent::kGap},
      {"next attempt in ", "", LogEvent::kBackoff},
      {"the retry budget is spent", "", LogEvent::kBackoff},
      {"gave up: ", "", LogEvent::kGaveUp},
      {"resync after ", "", LogEvent::kResync},
      {"connection ", " draining: ", LogEvent::kStreamDraining},
      {"connection ", "", LogEvent::kConnection},
      {"endpoint ", "", LogEvent::kConnection},
      {"breaker ", " rejected a call ", LogEvent::kBreakerRejected},
      {"breaker ", " -> ", LogEvent::kBreakerState},
  };
  for (const Shape& s : kShapes) {
    if (absl::StartsWith(line, s.starts) &&
        (s.contains.empty() || absl::StrContains(line, s.contains))) {
      return s.kind;
    }
  }
  *known = false;
  return absl::nullopt;
}

void LogCheck::Write(LogSeverity /*severity*/, absl::string_view line) {
  bool known = true;
  const absl::optional<LogEvent> kind = LogLineKind(line, &known);
  if (!known) {
    world_.Fail(absl::StrCat("logging: a line of no known kind: \"", line,
                             "\""));
    return;
  }
  world_.Note(absl::StrCat("log: ", line));
  if (!kind) return;  // a summary
  ++lines_;
  Window& w = windows_[static_cast<std::size_t>(*kind)];
  const absl::Time now = world_.Now();
  if (now - w.start >= window_) {
    w.start = now;
    w.lines = 0;
  }
  if (++w.lines > max_lines_) {
    world_.Fail(absl::StrCat(
        "logging: ", w.lines, " ", LogEventName(*kind),
        " lines reached the sink within one rate window (of ",
        absl::FormatDuration(window_), ", opened ",
        absl::FormatDuration(now - w.start), " ago); the limit is ",
        max_lines_, " a window. The last: \"", line, "\""));
  }
}

}  // namespace sim
}  // namespace tether
