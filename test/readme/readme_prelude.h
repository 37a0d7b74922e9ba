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
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "ledger/ledger.grpc.pb.h"
#include "tether/client.h"
#include "tether/resolved_endpoints.h"
#include "tether/resync_pool.h"

using tether::examples::ledger::v1::AccountEvent;
using tether::examples::ledger::v1::Ledger;
using tether::examples::ledger::v1::Order;
using tether::examples::ledger::v1::OrderAck;
using tether::examples::ledger::v1::WatchAccountRequest;

// The application's own code.
inline void Apply(const AccountEvent& /*event*/) {}
inline void Report(const absl::Status& /*status*/) {}
inline void Confirm(const OrderAck& /*ack*/) {}
inline std::string NewIdempotencyKey() { return "0b6c5e1a"; }
tether::Client& LedgerClient();  // the application's one client

// The application's service registry (docs/endpoints.md, PolledEndpoints).
class Registry {
 public:
  absl::StatusOr<std::vector<tether::Endpoint>> Instances(
      const std::string& service, absl::Time deadline);
};
std::shared_ptr<Registry> MyRegistry();

#endif  // TETHER_TEST_README_README_PRELUDE_H_
