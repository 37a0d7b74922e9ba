// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// ledger_watch: watches N ledger accounts for a while and checks every event.
//
//   ledger_watch --target=127.0.0.1:5000 --accounts=8 --duration=10
//       [--mode=tether|naive] [--give-up-after=120] [--stall-timeout-ms=0]
//
// tether: one ReconnectingStream per account over one ConnectionPool (health
// checked), resuming after the last seq. naive: the usual hand-written loop
// (blocking stub, one channel): reopen at once after an end; a watch that
// ends before its first message means "the ledger is down" and ends.
// --stall-timeout-ms (tether only): an attempt that delivers nothing for this
// long is abandoned and the watch reopens elsewhere (a black-holed connection
// never ends by itself); 0, the default, leaves it off.
// --target=dns:///NAME:PORT (or dns://DNS_SERVER/NAME:PORT), tether mode:
// the pool resolves NAME itself and connects to each address on its own,
// following the records as they change (docs/endpoints.md); naive mode hands
// the target to gRPC.
//
// Its last line is one JSON object: streams, events, duplicates, gaps, lost,
// bad_events, errors, reopens, dead_attempts, migrations, max_stall_ms.
// Exit code 0 only when errors, gaps, duplicates and bad_events are all 0;
// 1 otherwise; 2 for bad flags or setup failures.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "examples/common/flag_names.h"
#include "examples/common/ledger_watchers.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "tether/connection_pool.h"
#include "tether/resolved_endpoints.h"

ABSL_FLAG(std::string, target, "127.0.0.1:5000",
          "HOST:PORT of the ledger, or dns:///NAME:PORT for one connection "
          "per address NAME resolves to (tether mode)");
ABSL_FLAG(int, accounts, 8, "watches to open, one per account (>= 1)");
ABSL_FLAG(double, duration, 10, "seconds to watch (> 0)");
ABSL_FLAG(std::string, mode, "tether", "tether | naive");
ABSL_FLAG(double, give_up_after, 120,
          "tether: end a watch after this many seconds without progress "
          "(> 0); naive: unused (it ends at the first empty reopen)");
ABSL_FLAG(int, stall_timeout_ms, 0,
          "tether: reopen an attempt that delivered nothing for this many ms "
          "(>= 0; 0 = off, the default); naive: unused");

namespace ex = ::tether::examples;

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("watch ledger accounts and check every event");
  tether::examples::AcceptDashedFlags(argc, argv);
  absl::ParseCommandLine(argc, argv);
  const std::string target = absl::GetFlag(FLAGS_target);
  const int accounts = absl::GetFlag(FLAGS_accounts);
  const double duration = absl::GetFlag(FLAGS_duration);
  const std::string mode = absl::GetFlag(FLAGS_mode);
  const double give_up = absl::GetFlag(FLAGS_give_up_after);
  const int stall_timeout_ms = absl::GetFlag(FLAGS_stall_timeout_ms);
  if (accounts < 1 || !(duration > 0) || !(give_up > 0) ||
      stall_timeout_ms < 0 || (mode != "tether" && mode != "naive")) {
    std::fprintf(stderr,
                 "ledger_watch: need --accounts >= 1, --duration > 0, "
                 "--give-up-after > 0, --stall-timeout-ms >= 0, "
                 "--mode=tether|naive\n");
    return 2;
  }

  absl::Time epoch = absl::Now();
  std::vector<std::shared_ptr<ex::WatchRecorder>> recorders;
  for (int i = 0; i < accounts; ++i) {
    recorders.push_back(
        std::make_shared<ex::WatchRecorder>(absl::StrCat("acct-", i), epoch));
  }

  std::shared_ptr<tether::ConnectionPool> pool;
  std::vector<std::unique_ptr<ex::TetherWatch>> tether_watches;
  std::vector<std::unique_ptr<ex::NaiveWatch>> naive_watches;
  if (mode == "tether") {
    tether::ConnectionPoolOptions po;
    if (target.rfind("dns:", 0) == 0) {
      auto source = tether::ResolvedEndpoints(target);
      if (!source.ok()) {
        std::fprintf(stderr, "ledger_watch: %s\n",
                     source.status().ToString().c_str());
        return 2;
      }
      po.endpoints = *std::move(source);
    } else {
      po.target = target;
    }
    po.health_check = true;
    auto p = tether::ConnectionPool::Create(std::move(po));
    if (!p.ok()) {
      std::fprintf(stderr, "ledger_watch: %s\n", p.status().ToString().c_str());
      return 2;
    }
    pool = *std::move(p);
    tether::ReconnectingStreamOptions so;
    so.max_time_without_progress = absl::Seconds(give_up);
    if (stall_timeout_ms > 0) {
      so.stall_timeout = absl::Milliseconds(stall_timeout_ms);
    }
    for (auto& r : recorders) {
      auto w = ex::TetherWatch::Start(pool, r, so);
      if (!w.ok()) {
        std::fprintf(stderr, "ledger_watch: %s\n",
                     w.status().ToString().c_str());
        return 2;
      }
      tether_watches.push_back(*std::move(w));
    }
  } else {
    auto channel =
        grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
    for (auto& r : recorders) {
      naive_watches.push_back(std::make_unique<ex::NaiveWatch>(
          channel, r, ex::NaiveWatchOptions{}));
    }
  }

  absl::SleepFor(absl::Seconds(duration));

  std::int64_t migrations = 0;
  for (auto& w : tether_watches) {
    migrations += static_cast<std::int64_t>(w->stats().migrations);
    w->Stop();
  }
  for (auto& w : naive_watches) w->Stop();
  tether_watches.clear();
  naive_watches.clear();

  ex::WatchCounts sum;
  double max_stall = 0;
  for (auto& r : recorders) {
    r->Close();
    sum.Add(r->total());
    max_stall = std::max(max_stall, r->max_stall_ms());
    if (!r->last_error().empty()) {
      std::fprintf(stderr, "ledger_watch: %s: %s\n", r->account().c_str(),
                   r->last_error().c_str());
    }
  }
  std::printf(
      "%s\n",
      ex::CountsJson(mode, accounts, sum, max_stall, migrations).c_str());
  std::fflush(stdout);
  bool clean = sum.errors == 0 && sum.gaps == 0 && sum.duplicates == 0 &&
               sum.bad_events == 0 && sum.events > 0;
  return clean ? 0 : 1;
}
