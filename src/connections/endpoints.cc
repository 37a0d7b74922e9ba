// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/endpoints.h"

#include <arpa/inet.h>

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tether {

namespace {

absl::Status BadAddress(absl::string_view address, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("Endpoint.address must be one of ipv4:IP:PORT, "
                   "ipv6:[IP]:PORT, unix:PATH, unix-abstract:NAME, IP:PORT or "
                   "HOST:PORT; \"",
                   absl::CHexEscape(address), "\" ", why));
}

// Splits "HOST:PORT" / "[HOST]:PORT"; `bracketed` tells which.
bool SplitHostPort(absl::string_view s, absl::string_view* host,
                   absl::string_view* port, bool* bracketed) {
  if (absl::StartsWith(s, "[")) {
    const std::size_t close = s.find(']');
    if (close == absl::string_view::npos || close + 1 >= s.size() ||
        s[close + 1] != ':') {
      return false;
    }
    *host = s.substr(1, close - 1);
    *port = s.substr(close + 2);
    *bracketed = true;
    return true;
  }
  const std::size_t colon = s.rfind(':');
  if (colon == absl::string_view::npos) return false;
  *host = s.substr(0, colon);
  *port = s.substr(colon + 1);
  *bracketed = false;
  return true;
}

bool ValidPort(absl::string_view port) {
  if (port.empty() || port.size() > 5) return false;
  for (char ch : port) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(ch))) return false;
  }
  int n = 0;
  return absl::SimpleAtoi(port, &n) && n >= 1 && n <= 65535;
}

// The canonical text of an IP literal, or "" when `host` is none.
std::string CanonicalIp(absl::string_view host, int family) {
  const std::string h(host);
  unsigned char buf[16];
  if (inet_pton(family, h.c_str(), buf) != 1) return "";
  char out[INET6_ADDRSTRLEN];
  if (inet_ntop(family, buf, out, sizeof(out)) == nullptr) return "";
  return out;
}

bool ValidHostName(absl::string_view host) {
  if (host.empty() || host.size() > 253) return false;
  for (char ch : host) {
    const auto c = static_cast<unsigned char>(ch);
    if (!absl::ascii_isalnum(c) && ch != '-' && ch != '.' && ch != '_') {
      return false;
    }
  }
  return true;
}

absl::StatusOr<std::string> KeyOfHostPort(absl::string_view address,
                                          absl::string_view rest,
                                          int only_family) {
  absl::string_view host, port;
  bool bracketed = false;
  if (!SplitHostPort(rest, &host, &port, &bracketed)) {
    return BadAddress(address, "has no :PORT");
  }
  if (!ValidPort(port)) {
    return BadAddress(address, "has a port outside [1, 65535]");
  }
  if (bracketed || only_family == AF_INET6) {
    const std::string ip = CanonicalIp(host, AF_INET6);
    if (ip.empty() || only_family == AF_INET || !bracketed) {
      return BadAddress(address, "is not a bracketed IPv6 address");
    }
    return absl::StrCat("ipv6:[", ip, "]:", port);
  }
  const std::string ip = CanonicalIp(host, AF_INET);
  if (!ip.empty()) return absl::StrCat("ipv4:", ip, ":", port);
  if (only_family == AF_INET) {
    return BadAddress(address, "is not an IPv4 address");
  }
  if (!ValidHostName(host)) {
    return BadAddress(address, "has an invalid host name");
  }
  return absl::StrCat(absl::AsciiStrToLower(host), ":", port);
}

}  // namespace

absl::StatusOr<std::string> EndpointKey(absl::string_view address) {
  if (address.empty()) return BadAddress(address, "is empty");
  for (char ch : address) {
    const auto c = static_cast<unsigned char>(ch);
    if (absl::ascii_iscntrl(c) || ch == ' ') {
      return BadAddress(address, "contains a space or control character");
    }
  }
  for (absl::string_view scheme : {"unix:", "unix-abstract:"}) {
    if (absl::StartsWith(address, scheme)) {
      if (address.size() == scheme.size()) {
        return BadAddress(address, "has an empty path");
      }
      return std::string(address);
    }
  }
  if (absl::StrContains(address, ',')) {
    return BadAddress(address,
                      "names more than one address (give one Endpoint each)");
  }
  if (absl::StartsWith(address, "ipv4:")) {
    return KeyOfHostPort(address, address.substr(5), AF_INET);
  }
  if (absl::StartsWith(address, "ipv6:")) {
    return KeyOfHostPort(address, address.substr(5), AF_INET6);
  }
  if (absl::StrContains(address, "://") || absl::StartsWith(address, "dns:")) {
    return BadAddress(address,
                      "is a target to resolve, not an endpoint (resolve it "
                      "with ResolvedEndpoints)");
  }
  return KeyOfHostPort(address, address, AF_UNSPEC);
}

absl::Status ValidateEndpoints(const std::vector<Endpoint>& endpoints) {
  if (endpoints.empty()) {
    return absl::InvalidArgumentError(
        "endpoints must not be empty (an endpoint set needs at least one "
        "Endpoint)");
  }
  if (endpoints.size() > kMaxEndpoints) {
    return absl::InvalidArgumentError(
        absl::StrCat("endpoints must hold at most ", kMaxEndpoints,
                     " entries, got ", endpoints.size()));
  }
  std::set<std::string> seen;
  for (const Endpoint& e : endpoints) {
    absl::StatusOr<std::string> key = EndpointKey(e.address);
    if (!key.ok()) return key.status();
    if (!seen.insert(*key).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("Endpoint.address must be distinct: \"", e.address,
                       "\" is listed twice (as ", *key, ")"));
    }
    for (char ch : e.authority) {
      const auto c = static_cast<unsigned char>(ch);
      if (absl::ascii_iscntrl(c) || ch == ' ') {
        return absl::InvalidArgumentError(absl::StrCat(
            "Endpoint.authority must have no spaces or control characters, "
            "got \"",
            absl::CHexEscape(e.authority), "\""));
      }
    }
  }
  return absl::OkStatus();
}

namespace {

class Fixed final : public EndpointSource {
 public:
  explicit Fixed(std::vector<Endpoint> endpoints)
      : endpoints_(std::move(endpoints)) {}
  void Start(std::shared_ptr<Sink> sink) override {
    sink->OnEndpoints(endpoints_);
  }
  void Stop() override {}
  std::string Label() const override {
    std::vector<std::string> addresses;
    for (const Endpoint& e : endpoints_) addresses.push_back(e.address);
    return AddressListLabel(addresses);
  }

 private:
  const std::vector<Endpoint> endpoints_;
};

}  // namespace

std::string AddressListLabel(const std::vector<std::string>& addresses) {
  constexpr std::size_t kShown = 3;
  if (addresses.size() <= kShown) return absl::StrJoin(addresses, ",");
  return absl::StrCat(
      absl::StrJoin(addresses.begin(), addresses.begin() + kShown, ","), ",+",
      addresses.size() - kShown);
}

absl::StatusOr<std::shared_ptr<EndpointSource>> FixedEndpoints(
    std::vector<Endpoint> endpoints) {
  absl::Status s = ValidateEndpoints(endpoints);
  if (!s.ok()) return s;
  return std::shared_ptr<EndpointSource>(
      std::make_shared<Fixed>(std::move(endpoints)));
}

}  // namespace tether
