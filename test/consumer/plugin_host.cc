// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Loads the consumer's shared object (linked at build time) and runs its
// checks. Links nothing of tether or of the generated code itself: all of it
// is inside the shared object (tether's static library, position-independent,
// or libtether.so).
#include <cstdio>
#include <string>

#include "plugin.h"

int main() {
  const std::string error = consumer::StreamThroughSharedObject();
  std::printf("%s: a stream from inside a shared object%s%s\n",
              error.empty() ? "ok  " : "FAIL", error.empty() ? "" : ": ",
              error.c_str());
  std::printf("%s\n", error.empty() ? "consumer_plugin_host: PASS"
                                    : "consumer_plugin_host: FAIL");
  return error.empty() ? 0 : 1;
}
