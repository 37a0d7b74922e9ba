// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Loads the consumer's shared object (linked at build time) and runs its
// checks. Links nothing of tether or of the generated code itself: all of it
// is inside the shared object (tether's static library, position-independent,
// or libtether.so).
#include <cstdio>
#include <string>

#include "plugin.h"
#include "rollout_check.h"

int main() {
  int failures = 0;
  auto check = [&](const std::string& error, const char* what) {
    std::printf("%s: %s%s%s\n", error.empty() ? "ok  " : "FAIL", what,
                error.empty() ? "" : ": ", error.c_str());
    if (!error.empty()) ++failures;
  };
  check(consumer::StreamThroughSharedObject(),
        "a stream from inside a shared object");
  check(consumer::RolloutWithOneClient(),
        "one tether::Client: a server stream and a bidi stream through "
        "graceful and abrupt restarts, 0 lost, 0 duplicates, 0 errors, "
        "every order executed once");
  std::printf("%s\n", failures == 0 ? "consumer_plugin_host: PASS"
                                    : "consumer_plugin_host: FAIL");
  return failures == 0 ? 0 : 1;
}
