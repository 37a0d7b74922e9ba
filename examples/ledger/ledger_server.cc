// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// ledger_server: one replica of the example ledger service.
//
//   ledger_server --listen=127.0.0.1:5001 --replica=a [--tick-ms=20]
//       [--shutdown=graceful|cancel-first|abrupt|tether] [--drain-ms=2000]
//       [--pre-drain-ms=100] [--notice-grace-ms=500]
//
// Prints "READY <host:port>" once serving. On SIGTERM (or SIGINT) it leaves
// the way --shutdown says (see ShutdownMode) and exits 0. Signals are taken
// by a sigwait() in the main thread: nothing runs in a signal handler.
// --shutdown=tether drains with tether::server::DrainController (its step
// lines go to stderr): the recipe in docs/server.md.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "examples/common/flag_names.h"
#include "examples/common/ledger_replica.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:0", "HOST:PORT to listen on");
ABSL_FLAG(std::string, replica, "replica", "replica name put in events");
ABSL_FLAG(int, tick_ms, 20, "milliseconds between events of a stream (> 0)");
ABSL_FLAG(std::string, shutdown, "graceful",
          "on SIGTERM: graceful | cancel-first | abrupt | tether");
ABSL_FLAG(int, drain_ms, 2000,
          "graceful, tether: shutdown deadline after GOAWAY; cancel-first: "
          "how long "
          "new streams are failed (>= 0)");
ABSL_FLAG(int, pre_drain_ms, 100,
          "graceful: pause between NOT_SERVING and GOAWAY; tether: the "
          "unready window (>= 0)");
ABSL_FLAG(int, notice_grace_ms, 500,
          "tether: how long watches get to leave after their drain notice "
          "(>= 0)");

namespace ex = ::tether::examples;

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("one replica of the tether example ledger");
  tether::examples::AcceptDashedFlags(argc, argv);
  absl::ParseCommandLine(argc, argv);

  // Block the signals before any thread starts, so that every thread
  // inherits the mask and only sigwait() below receives them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  ex::ShutdownMode mode;
  absl::Status s = ex::ParseShutdownMode(absl::GetFlag(FLAGS_shutdown), &mode);
  if (!s.ok()) {
    std::fprintf(stderr, "ledger_server: %s\n", s.ToString().c_str());
    return 2;
  }
  ex::LedgerReplicaOptions o;
  o.listen = absl::GetFlag(FLAGS_listen);
  o.name = absl::GetFlag(FLAGS_replica);
  o.tick = absl::Milliseconds(absl::GetFlag(FLAGS_tick_ms));
  o.drain = absl::Milliseconds(absl::GetFlag(FLAGS_drain_ms));
  o.pre_drain = absl::Milliseconds(absl::GetFlag(FLAGS_pre_drain_ms));
  o.notice_grace = absl::Milliseconds(absl::GetFlag(FLAGS_notice_grace_ms));
  o.drain_controller = mode == ex::ShutdownMode::kTether;
  ex::LedgerReplica replica(o);
  s = replica.Start();
  if (!s.ok()) {
    std::fprintf(stderr, "ledger_server: %s\n", s.ToString().c_str());
    return s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  std::printf("READY %s\n", replica.address().c_str());
  std::fflush(stdout);

  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  std::fprintf(stderr, "ledger_server %s: signal %d, shutdown=%s\n",
               o.name.c_str(), sig,
               std::string(ex::ShutdownModeName(mode)).c_str());
  if (mode == ex::ShutdownMode::kAbrupt) {
    // No GOAWAY, no cleanup: the kernel closes the sockets.
    _exit(0);
  }
  replica.Stop(mode);
  std::fprintf(stderr, "ledger_server %s: stopped\n", o.name.c_str());
  return 0;
}
