// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// What the README's C++ snippets take as given: the ledger service's
// generated types (examples/ledger/ledger.proto) and the application's own
// functions they call. Included first by the code extract_readme generates.
#ifndef TETHER_TEST_README_README_PRELUDE_H_
#define TETHER_TEST_README_README_PRELUDE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/types/optional.h"
#include "ledger/ledger.grpc.pb.h"

using tether::examples::ledger::v1::AccountEvent;
using tether::examples::ledger::v1::Ledger;
using tether::examples::ledger::v1::WatchAccountRequest;

// The application's own code.
inline void Apply(const AccountEvent& /*event*/) {}
inline void Report(const absl::Status& /*status*/) {}

#endif  // TETHER_TEST_README_README_PRELUDE_H_
