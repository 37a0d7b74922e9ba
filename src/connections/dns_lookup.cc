// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "connections/dns_lookup.h"

#include <ares.h>
#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tether {
namespace internal {

namespace {

// Records per answer we read (a DNS answer over UDP holds far fewer).
constexpr int kMaxRecords = 256;

struct Query {
  int family = AF_INET;
  bool done = false;
  int status = ARES_SUCCESS;
  std::vector<std::string> ips;
  absl::Duration ttl = absl::InfiniteDuration();
};

void NoteTtl(Query& q, int ttl) {
  q.ttl = std::min(q.ttl, absl::Seconds(std::max(ttl, 0)));
}

void OnReply(void* arg, int status, int /*timeouts*/, unsigned char* abuf,
             int alen) {
  auto* q = static_cast<Query*>(arg);
  q->done = true;
  q->status = status;
  if (status != ARES_SUCCESS) return;
  char text[INET6_ADDRSTRLEN];
  int n = kMaxRecords;
  if (q->family == AF_INET) {
    std::vector<ares_addrttl> records(kMaxRecords);
    q->status = ares_parse_a_reply(abuf, alen, nullptr, records.data(), &n);
    if (q->status != ARES_SUCCESS) return;
    for (int i = 0; i < n; ++i) {
      if (inet_ntop(AF_INET, &records[i].ipaddr, text, sizeof(text))) {
        q->ips.push_back(text);
        NoteTtl(*q, records[i].ttl);
      }
    }
  } else {
    std::vector<ares_addr6ttl> records(kMaxRecords);
    q->status = ares_parse_aaaa_reply(abuf, alen, nullptr, records.data(), &n);
    if (q->status != ARES_SUCCESS) return;
    for (int i = 0; i < n; ++i) {
      if (inet_ntop(AF_INET6, &records[i].ip6addr, text, sizeof(text))) {
        q->ips.push_back(text);
        NoteTtl(*q, records[i].ttl);
      }
    }
  }
}

// Runs the channel until both queries are done or `deadline` passes (then
// cancels them, which completes them).
void Drive(ares_channel channel, const Query& a, const Query& aaaa,
           std::chrono::steady_clock::time_point deadline) {
  while (!(a.done && aaaa.done)) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) {
      ares_cancel(channel);
      return;
    }
    ares_socket_t socks[ARES_GETSOCK_MAXNUM];
    const int mask = ares_getsock(channel, socks, ARES_GETSOCK_MAXNUM);
    pollfd fds[ARES_GETSOCK_MAXNUM];
    int n = 0;
    for (int i = 0; i < ARES_GETSOCK_MAXNUM; ++i) {
      short events = 0;  // NOLINT(runtime/int): pollfd's type
      if (ARES_GETSOCK_READABLE(mask, i)) events |= POLLIN;
      if (ARES_GETSOCK_WRITABLE(mask, i)) events |= POLLOUT;
      if (events == 0) continue;
      fds[n].fd = socks[i];
      fds[n].events = events;
      fds[n].revents = 0;
      ++n;
    }
    const auto left_us =
        std::chrono::duration_cast<std::chrono::microseconds>(left).count();
    timeval max_wait{static_cast<time_t>(left_us / 1000000),
                     static_cast<suseconds_t>(left_us % 1000000)};
    timeval wait{};
    const timeval* w = ares_timeout(channel, &max_wait, &wait);
    const int ms = static_cast<int>(w->tv_sec * 1000 + w->tv_usec / 1000) + 1;
    const int ready = poll(fds, static_cast<nfds_t>(n), ms);
    if (ready <= 0) {
      ares_process_fd(channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);  // timeouts
      continue;
    }
    for (int i = 0; i < n; ++i) {
      const bool r = (fds[i].revents & (POLLIN | POLLERR | POLLHUP)) != 0;
      const bool wr = (fds[i].revents & POLLOUT) != 0;
      if (!r && !wr) continue;
      ares_process_fd(channel, r ? fds[i].fd : ARES_SOCKET_BAD,
                      wr ? fds[i].fd : ARES_SOCKET_BAD);
    }
  }
}

bool NoRecord(int status) {
  return status == ARES_ENODATA || status == ARES_ENOTFOUND;
}

}  // namespace

absl::StatusOr<DnsAnswer> LookUpHost(const std::string& host,
                                     const std::string& server,
                                     absl::Duration timeout) {
  static std::once_flag init;
  std::call_once(init, [] { ares_library_init(ARES_LIB_INIT_ALL); });
  ares_options options{};
  // Two tries within the timeout.
  options.timeout = static_cast<int>(
      std::max<std::int64_t>(1, absl::ToInt64Milliseconds(timeout) / 2));
  options.tries = 2;
  ares_channel channel = nullptr;
  int rc = ares_init_options(&channel, &options,
                             ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES);
  if (rc != ARES_SUCCESS) {
    return absl::UnavailableError(
        absl::StrCat("dns: cannot start a lookup: ", ares_strerror(rc)));
  }
  if (!server.empty()) {
    rc = ares_set_servers_ports_csv(channel, server.c_str());
    if (rc != ARES_SUCCESS) {
      ares_destroy(channel);
      return absl::InvalidArgumentError(absl::StrCat(
          "dns: bad DNS server \"", server, "\": ", ares_strerror(rc)));
    }
  }
  Query a, aaaa;
  aaaa.family = AF_INET6;
  ares_search(channel, host.c_str(), ns_c_in, ns_t_a, OnReply, &a);
  ares_search(channel, host.c_str(), ns_c_in, ns_t_aaaa, OnReply, &aaaa);
  Drive(channel, a, aaaa,
        std::chrono::steady_clock::now() +
            std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout)));
  ares_destroy(channel);  // completes anything left (ARES_EDESTRUCTION)

  const std::string from =
      server.empty() ? std::string() : absl::StrCat(" at ", server);
  if (!a.ips.empty() || !aaaa.ips.empty()) {
    DnsAnswer answer;
    answer.ipv4 = std::move(a.ips);
    answer.ipv6 = std::move(aaaa.ips);
    answer.shortest_ttl = std::min(a.ttl, aaaa.ttl);
    return answer;
  }
  if (a.status == ARES_ENOTFOUND || aaaa.status == ARES_ENOTFOUND) {
    return absl::NotFoundError(
        absl::StrCat("dns: ", host, " does not exist (NXDOMAIN", from, ")"));
  }
  if ((a.status == ARES_SUCCESS || NoRecord(a.status)) &&
      (aaaa.status == ARES_SUCCESS || NoRecord(aaaa.status))) {
    return absl::NotFoundError(
        absl::StrCat("dns: ", host, " has no A or AAAA record", from));
  }
  const int bad =
      a.status != ARES_SUCCESS && !NoRecord(a.status) ? a.status : aaaa.status;
  return absl::UnavailableError(absl::StrCat(
      "dns: lookup of ", host, from, " failed: ", ares_strerror(bad),
      bad == ARES_ECANCELLED
          ? absl::StrCat(" (no answer within ", absl::FormatDuration(timeout),
                         ", query_timeout)")
          : ""));
}

}  // namespace internal
}  // namespace tether
