// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// One DNS lookup (A and AAAA) with c-ares, blocking and bounded in time.
#ifndef TETHER_SRC_CONNECTIONS_DNS_LOOKUP_H_
#define TETHER_SRC_CONNECTIONS_DNS_LOOKUP_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "tether/internal/visibility.h"

TETHER_BEGIN_HIDDEN
namespace tether {
namespace internal {

struct DnsAnswer {
  std::vector<std::string> ipv4;  // "10.0.0.7", in the server's order
  std::vector<std::string> ipv6;  // "fd00::7"
  // The shortest TTL of the records; InfiniteDuration when none.
  absl::Duration shortest_ttl = absl::InfiniteDuration();
};

// Looks up `host`'s A and AAAA records at once, applying the search domains
// of /etc/resolv.conf, from `server` ("IP", "IP:PORT" or "[IPv6]:PORT") or,
// when empty, the system's servers. Returns within about `timeout` (the
// query is cancelled then). Errors: NOT_FOUND for NXDOMAIN or no record of
// either kind; UNAVAILABLE for a server that does not answer, refuses or
// fails (SERVFAIL); INVALID_ARGUMENT for a bad `server`. Thread-safe: each
// call has a c-ares channel of its own.
absl::StatusOr<DnsAnswer> LookUpHost(const std::string& host,
                                     const std::string& server,
                                     absl::Duration timeout);

}  // namespace internal
}  // namespace tether
TETHER_END_HIDDEN

#endif  // TETHER_SRC_CONNECTIONS_DNS_LOOKUP_H_
