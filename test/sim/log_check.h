// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// The sink of the simulation's `LoggingObserver`: it checks the rate limit.
#ifndef TETHER_TEST_SIM_LOG_CHECK_H_
#define TETHER_TEST_SIM_LOG_CHECK_H_

#include <array>
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "tether/logging.h"
#include "test/sim/world.h"

namespace tether {
namespace sim {

// The kind of a line a `LoggingObserver` writes, read from its text (the
// observer's prefix empty, a stream's name without ": "); nullopt for a
// "suppressed ..." summary, which the rate limit does not count.
// `known` is false for a line of no kind known here.
absl::optional<LogEvent> LogLineKind(absl::string_view line, bool* known);

// A `LogSink` that checks the observer's storm control from the lines it
// gets: per event kind, a window opens at a line that comes `window` or
// more after the open window's first line (or with none open), and at most
// `max_lines` lines reach the sink in it. A summary timer that outlives its
// window and resets the next one's count lets more through.
class LogCheck final : public LogSink {
 public:
  LogCheck(World& world, int max_lines, absl::Duration window)
      : world_(world), max_lines_(max_lines), window_(window) {}

  void Write(LogSeverity severity, absl::string_view line) override;

  std::uint64_t lines() const { return lines_; }

 private:
  struct Window {
    absl::Time start = absl::InfinitePast();
    int lines = 0;
  };

  World& world_;
  const int max_lines_;
  const absl::Duration window_;
  std::array<Window, static_cast<std::size_t>(LogEvent::kCount)> windows_;
  std::uint64_t lines_ = 0;
};

}  // namespace sim
}  // namespace tether

#endif  // TETHER_TEST_SIM_LOG_CHECK_H_
