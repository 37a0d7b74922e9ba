// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_EXAMPLES_COMMON_FLAG_NAMES_H_
#define TETHER_EXAMPLES_COMMON_FLAG_NAMES_H_

#include <cstring>

namespace tether {
namespace examples {

// Lets the programs take "--tick-ms=5" as well as absl's "--tick_ms=5": turns
// '-' into '_' in the name part of every "--name[=value]" argument, in place.
// Call before absl::ParseCommandLine.
inline void AcceptDashedFlags(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    char* a = argv[i];
    if (std::strncmp(a, "--", 2) != 0 || a[2] == '\0') continue;
    for (char* p = a + 2; *p != '\0' && *p != '='; ++p) {
      if (*p == '-') *p = '_';
    }
  }
}

}  // namespace examples
}  // namespace tether

#endif  // TETHER_EXAMPLES_COMMON_FLAG_NAMES_H_
