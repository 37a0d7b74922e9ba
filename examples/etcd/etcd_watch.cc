// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// etcd_watch: watches an etcd prefix with KeyWatcher for a while, checks what
// it delivers, and prints one JSON line.
//
//   etcd_watch --endpoints=HOST:PORT[,HOST:PORT...] --prefix=P
//              --duration=SECONDS [--give-up-after=SECONDS]
//              [--stall-timeout-ms=N] [--events-out=FILE] [--state-out=FILE]
//              [--progress-notify=true] [--member-sync-ms=5000] [--log]
//
// --events-out: one line per delivered event, "<mod_revision> <PUT|DELETE>
// <key>", flushed as it is written. --member-sync-ms: how often the
// endpoints are synced with the cluster's member list (0: never; the
// endpoints stay as given). --state-out: at exit, the watcher's view
// of the prefix, "<key> <mod_revision>" per line, sorted by key. SIGINT or
// SIGTERM end the run early (the summary is still printed). Exit status: 0,
// or 1 if an error reached the application (or the start failed), 2 for bad
// flags.
#include <signal.h>
#include <time.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "examples/common/flag_names.h"
#include "examples/etcd/delivery_check.h"
#include "examples/etcd/etcd_client.h"
#include "examples/etcd/key_watcher.h"
#include "support/figures.h"
#include "tether/logging.h"

ABSL_FLAG(std::string, endpoints, "",
          "etcd client endpoints, HOST:PORT[,HOST:PORT...] (required)");
ABSL_FLAG(std::string, prefix, "", "the key prefix to watch (required)");
ABSL_FLAG(double, duration, 10, "seconds to watch, (0, 1e6]");
ABSL_FLAG(double, give_up_after, 120,
          "seconds the stream may fail without progress before it gives up "
          "(> 0)");
ABSL_FLAG(int64_t, stall_timeout_ms, 0,
          "leave an attempt silent this long (0: off; else [1, 86400000])");
ABSL_FLAG(std::string, events_out, "", "file for one line per event");
ABSL_FLAG(std::string, state_out, "", "file for the final state");
ABSL_FLAG(bool, progress_notify, true, "ask etcd for progress notifications");
ABSL_FLAG(bool, log, false,
          "log the stream's attempts and the pool's connections to stderr, "
          "each line with the time");
ABSL_FLAG(int64_t, member_sync_ms, 5000,
          "sync the endpoints with the member list this often (0: never; "
          "else [500, 3600000])");

namespace etcd = ::tether::examples::etcd;

namespace {

int BadFlag(const std::string& message) {
  std::fprintf(stderr, "etcd_watch: %s\n", message.c_str());
  return 2;
}

// stderr, each line with the wall-clock time (to set beside other logs).
class TimedStderr final : public tether::LogSink {
 public:
  void Write(tether::LogSeverity severity, absl::string_view line) override {
    std::string out = absl::StrFormat(
        "%s %s %s\n",
        absl::FormatTime("%H:%M:%E3S", absl::Now(), absl::UTCTimeZone()),
        tether::LogSeverityName(severity), line);
    std::fwrite(out.data(), 1, out.size(), stderr);
  }
};


}  // namespace

int main(int argc, char** argv) {
  tether::examples::AcceptDashedFlags(argc, argv);
  absl::ParseCommandLine(argc, argv);

  auto endpoints = etcd::ParseEndpoints(absl::GetFlag(FLAGS_endpoints));
  if (!endpoints.ok()) return BadFlag(std::string(endpoints.status().message()));
  const std::string prefix = absl::GetFlag(FLAGS_prefix);
  if (prefix.empty()) return BadFlag("--prefix is required");
  const double duration_s = absl::GetFlag(FLAGS_duration);
  if (!(duration_s > 0 && duration_s <= 1e6)) {
    return BadFlag("--duration must be in (0, 1e6] seconds");
  }
  const double give_up_s = absl::GetFlag(FLAGS_give_up_after);
  if (!(give_up_s > 0 && give_up_s <= 1e9)) {
    return BadFlag("--give-up-after must be in (0, 1e9] seconds");
  }
  const int64_t stall_ms = absl::GetFlag(FLAGS_stall_timeout_ms);
  if (stall_ms < 0 || stall_ms > 86400000) {
    return BadFlag("--stall-timeout-ms must be 0 (off) or in [1, 86400000]");
  }

  const int64_t member_sync_ms = absl::GetFlag(FLAGS_member_sync_ms);
  if (member_sync_ms != 0 &&
      (member_sync_ms < 500 || member_sync_ms > 3600000)) {
    return BadFlag("--member-sync-ms must be 0 (never) or in [500, 3600000]");
  }

  std::FILE* events_out = nullptr;
  if (!absl::GetFlag(FLAGS_events_out).empty()) {
    events_out = std::fopen(absl::GetFlag(FLAGS_events_out).c_str(), "w");
    if (events_out == nullptr) {
      return BadFlag("cannot open --events-out " +
                     absl::GetFlag(FLAGS_events_out));
    }
  }

  // SIGINT/SIGTERM end the wait below; blocked before any thread starts so
  // every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  etcd::DeliveryCheck check;
  absl::Mutex done_mu;
  bool done = false;
  absl::Status final_status;

  etcd::KeyWatcherOptions options;
  options.endpoints = *endpoints;
  options.prefix = prefix;
  options.stall_timeout = absl::Milliseconds(stall_ms);
  options.give_up_after = absl::Seconds(give_up_s);
  options.progress_notify = absl::GetFlag(FLAGS_progress_notify);
  options.member_sync_interval = absl::Milliseconds(member_sync_ms);
  if (absl::GetFlag(FLAGS_log)) {
    tether::LoggingOptions log_options;
    log_options.sink = std::make_shared<TimedStderr>();
    log_options.max_lines_per_window = 100;
    auto log = tether::LoggingObserver::Create(std::move(log_options));
    if (!log.ok()) return BadFlag(log.status().ToString());
    options.observer = *log;
    options.pool_observer = *log;
  }

  auto watcher = etcd::KeyWatcher::Start(
      options,
      [&](const mvccpb::Event& e) {
        check.OnEvent(e.kv().mod_revision(), e.kv().key());
        if (events_out != nullptr) {
          std::fprintf(events_out, "%lld %s %s\n",
                       static_cast<long long>(e.kv().mod_revision()),
                       e.type() == mvccpb::Event::DELETE ? "DELETE" : "PUT",
                       e.kv().key().c_str());
          std::fflush(events_out);
        }
      },
      [&](const etcd::Listing& listing) { check.OnResync(listing.revision); },
      [&](const absl::Status& s) {
        absl::MutexLock lock(&done_mu);
        done = true;
        final_status = s;
      });
  if (!watcher.ok()) {
    std::fprintf(stderr, "etcd_watch: %s\n",
                 watcher.status().ToString().c_str());
    tether::support::JsonLine json;
    json.Set("error", watcher.status().ToString());
    json.Print();
    return 1;
  }

  // Wait for the duration, a signal, or the end of the watch.
  absl::Time end = absl::Now() + absl::Seconds(duration_s);
  while (true) {
    {
      absl::MutexLock lock(&done_mu);
      if (done) break;
    }
    absl::Duration left = end - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    left = std::min(left, absl::Milliseconds(100));
    timespec ts = absl::ToTimespec(left);
    int sig = sigtimedwait(&signals, nullptr, &ts);
    if (sig == SIGINT || sig == SIGTERM) break;
  }

  bool ended_by_itself;
  {
    absl::MutexLock lock(&done_mu);
    ended_by_itself = done;
  }
  tether::StreamStats stats = (*watcher)->stats();
  etcd::Listing state = (*watcher)->State();
  std::int64_t resyncs = (*watcher)->resyncs();
  (*watcher)->Cancel();
  watcher->reset();  // waits for callbacks
  if (events_out != nullptr) std::fclose(events_out);

  int errors = 0;
  std::string error;
  if (ended_by_itself && !final_status.ok()) {
    errors = 1;
    error = final_status.ToString();
    std::fprintf(stderr, "etcd_watch: the watch ended: %s\n", error.c_str());
  }

  if (!absl::GetFlag(FLAGS_state_out).empty()) {
    std::FILE* f = std::fopen(absl::GetFlag(FLAGS_state_out).c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "etcd_watch: cannot open --state-out\n");
      errors += 1;
    } else {
      for (const auto& [key, rev] : state.keys) {
        std::fprintf(f, "%s %lld\n", key.c_str(), static_cast<long long>(rev));
      }
      std::fclose(f);
    }
  }

  etcd::DeliveryCounts c = check.counts();
  tether::support::JsonLine json;
  json.Set("events", static_cast<std::int64_t>(c.events));
  json.Set("duplicates", static_cast<std::int64_t>(c.duplicates));
  json.Set("out_of_order", static_cast<std::int64_t>(c.out_of_order));
  json.Set("resyncs", static_cast<std::int64_t>(resyncs));
  json.Set("errors", errors);
  json.Set("reopens", stats.attempts > 0 ? stats.attempts - 1 : 0);
  json.Set("attempts", stats.attempts);
  json.Set("migrations", stats.migrations);
  json.Set("stalls", stats.stalls);
  json.Set("max_stall_ms", absl::ToDoubleMilliseconds(c.max_stall));
  json.Set("last_revision", static_cast<std::int64_t>(state.revision));
  json.Set("keys", static_cast<std::uint64_t>(state.keys.size()));
  json.Set("error", error);
  json.Print();
  return errors == 0 ? 0 : 1;
}
