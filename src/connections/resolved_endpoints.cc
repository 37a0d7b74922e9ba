// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// `ResolvedEndpoints`: parses a target, and for a name makes a polled source
// (`NewPolledSource`) whose look-up asks DNS.
#include "tether/resolved_endpoints.h"

#include <arpa/inet.h>

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "connections/dns_lookup.h"
#include "connections/polled_endpoints.h"
#include "tether/endpoints.h"

namespace tether {

absl::Status Validate(const ResolverOptions& o) {
  if (o.min_resolve_interval < absl::Milliseconds(10) ||
      o.min_resolve_interval > o.resolve_interval) {
    return absl::InvalidArgumentError(
        absl::StrCat("ResolverOptions.min_resolve_interval must be in [10ms, "
                     "resolve_interval (",
                     absl::FormatDuration(o.resolve_interval), ")], got ",
                     absl::FormatDuration(o.min_resolve_interval)));
  }
  if (o.resolve_interval > absl::Hours(1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ResolverOptions.resolve_interval must be in [min_resolve_interval, "
        "1h], got ",
        absl::FormatDuration(o.resolve_interval)));
  }
  if (o.query_timeout < absl::Milliseconds(10) ||
      o.query_timeout > absl::Seconds(60)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ResolverOptions.query_timeout must be in [10ms, 60s], "
                     "got ",
                     absl::FormatDuration(o.query_timeout)));
  }
  return absl::OkStatus();
}

namespace {

absl::Status BadTarget(absl::string_view target, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "ResolvedEndpoints target must be dns:///HOST[:PORT], "
      "dns://SERVER/HOST[:PORT], HOST[:PORT], ipv4:/ipv6: lists, unix:PATH "
      "or IP:PORT; \"",
      absl::CHexEscape(target), "\" ", why));
}

bool IsIp(const std::string& s, int family) {
  unsigned char buf[16];
  return inet_pton(family, s.c_str(), buf) == 1;
}

// A name to look up, with its port and the DNS server to ask.
struct Name {
  std::string host;
  std::string port;
  std::string server;  // "" for the system's
};

// One DNS look-up of `name`: its A and AAAA records as endpoints with the
// name as authority.
internal::PolledLookup LookUpName(Name name) {
  return [name = std::move(name)](absl::Duration timeout)
             -> absl::StatusOr<internal::PolledAnswer> {
    absl::StatusOr<internal::DnsAnswer> dns =
        internal::LookUpHost(name.host, name.server, timeout);
    if (!dns.ok()) return dns.status();
    std::set<std::string> addresses;
    for (const std::string& ip : dns->ipv4) {
      addresses.insert(absl::StrCat("ipv4:", ip, ":", name.port));
    }
    for (const std::string& ip : dns->ipv6) {
      addresses.insert(absl::StrCat("ipv6:[", ip, "]:", name.port));
    }
    internal::PolledAnswer answer;
    answer.shortest_ttl = dns->shortest_ttl;
    const std::string authority = absl::StrCat(name.host, ":", name.port);
    for (const std::string& a : addresses) {
      answer.endpoints.push_back({a, authority});
    }
    return answer;
  };
}

// "HOST[:PORT]" (HOST may be a bracketed IPv6 literal) -> host, port.
absl::Status SplitName(absl::string_view target, absl::string_view s,
                       std::string* host, std::string* port) {
  if (s.empty()) return BadTarget(target, "has no host");
  if (s[0] == '[') {
    const std::size_t close = s.find(']');
    if (close == absl::string_view::npos) {
      return BadTarget(target, "has an unclosed [");
    }
    *host = std::string(s.substr(1, close - 1));
    absl::string_view rest = s.substr(close + 1);
    if (rest.empty()) {
      *port = "443";
    } else if (rest[0] == ':') {
      *port = std::string(rest.substr(1));
    } else {
      return BadTarget(target, "has text after ]");
    }
  } else {
    const std::size_t colon = s.rfind(':');
    if (colon != absl::string_view::npos && s.find(':') != colon) {
      return BadTarget(target, "has an IPv6 address without brackets");
    }
    *host = std::string(s.substr(0, colon));
    *port = colon == absl::string_view::npos ? "443"
                                             : std::string(s.substr(colon + 1));
  }
  if (host->empty()) return BadTarget(target, "has no host");
  // The port check of an endpoint address, on a stand-in host.
  if (!EndpointKey(absl::StrCat("h:", *port)).ok()) {
    return BadTarget(target, "has a port outside [1, 65535]");
  }
  return absl::OkStatus();
}

// The DNS server of "dns://SERVER/...": an IP literal with an optional port
// (53 by default), as c-ares takes it ("IP:PORT", "[IPv6]:PORT").
absl::StatusOr<std::string> DnsServer(absl::string_view target,
                                      absl::string_view server) {
  std::string host(server), port = "53";
  if (absl::StartsWith(server, "[")) {
    const std::size_t close = server.find(']');
    if (close == absl::string_view::npos) {
      return BadTarget(target, "has an unclosed [ in its DNS server");
    }
    host = std::string(server.substr(1, close - 1));
    if (close + 1 < server.size()) {
      if (server[close + 1] != ':') {
        return BadTarget(target, "has text after ] in its DNS server");
      }
      port = std::string(server.substr(close + 2));
    }
  } else if (server.find(':') != absl::string_view::npos &&
             server.find(':') == server.rfind(':')) {
    host = std::string(server.substr(0, server.find(':')));
    port = std::string(server.substr(server.find(':') + 1));
  }
  if (!EndpointKey(absl::StrCat("h:", port)).ok()) {
    return BadTarget(target, "has a DNS server port outside [1, 65535]");
  }
  if (IsIp(host, AF_INET)) return absl::StrCat(host, ":", port);
  if (IsIp(host, AF_INET6)) return absl::StrCat("[", host, "]:", port);
  return BadTarget(target, "names a DNS server that is not an IP address");
}

}  // namespace

absl::StatusOr<std::shared_ptr<EndpointSource>> ResolvedEndpoints(
    absl::string_view target, ResolverOptions options) {
  absl::Status valid = Validate(options);
  if (!valid.ok()) return valid;
  if (target.empty()) return BadTarget(target, "is empty");
  // Fixed forms: nothing to resolve.
  if (absl::StartsWith(target, "unix:") ||
      absl::StartsWith(target, "unix-abstract:")) {
    return FixedEndpoints({{std::string(target), ""}});
  }
  for (absl::string_view scheme : {"ipv4:", "ipv6:"}) {
    if (!absl::StartsWith(target, scheme)) continue;
    std::vector<Endpoint> list;
    for (absl::string_view a :
         absl::StrSplit(target.substr(scheme.size()), ',')) {
      list.push_back({absl::StrCat(scheme, a), ""});
    }
    return FixedEndpoints(std::move(list));
  }
  Name name;
  absl::string_view rest = target;
  if (absl::StartsWith(rest, "dns://")) {
    rest.remove_prefix(6);
    const std::size_t slash = rest.find('/');
    if (slash == absl::string_view::npos) {
      return BadTarget(target, "has no / after the DNS server");
    }
    absl::string_view server = rest.substr(0, slash);
    rest.remove_prefix(slash + 1);
    if (!server.empty()) {
      absl::StatusOr<std::string> spec = DnsServer(target, server);
      if (!spec.ok()) return spec.status();
      name.server = *std::move(spec);
    }
  } else if (absl::StartsWith(rest, "dns:")) {
    rest.remove_prefix(4);
  } else if (absl::StrContains(rest, "://")) {
    return BadTarget(target, "has a scheme tether cannot resolve");
  }
  absl::Status s = SplitName(target, rest, &name.host, &name.port);
  if (!s.ok()) return s;
  if (IsIp(name.host, AF_INET) || IsIp(name.host, AF_INET6)) {
    const bool v6 = IsIp(name.host, AF_INET6);
    return FixedEndpoints(
        {{v6 ? absl::StrCat("ipv6:[", name.host, "]:", name.port)
             : absl::StrCat("ipv4:", name.host, ":", name.port),
          ""}});
  }
  if (!EndpointKey(absl::StrCat(name.host, ":", name.port)).ok()) {
    return BadTarget(target, "has an invalid host name");
  }
  std::string label = absl::StrCat(name.host, ":", name.port);
  return internal::NewPolledSource(LookUpName(std::move(name)),
                                  std::move(options), std::move(label));
}

}  // namespace tether
