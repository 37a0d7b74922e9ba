// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// `ResolvedEndpoints`: parses a target, and for a name runs a source that
// looks it up on its own thread on the schedule of `ResolveSchedule`.
#include "tether/resolved_endpoints.h"

#include <arpa/inet.h>

#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "connections/dns_lookup.h"
#include "connections/pool_core.h"
#include "connections/resolve_schedule.h"
#include "tether/endpoints.h"
#include "tether/internal/mutex.h"

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

using internal::CondVar;
using internal::Mutex;
using internal::MutexLock;

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

// Looks `name` up on its own thread (see `ResolvedEndpoints`).
class DnsSource final : public EndpointSource,
                        public std::enable_shared_from_this<DnsSource> {
 public:
  DnsSource(Name name, ResolverOptions options)
      : name_(std::move(name)),
        authority_(absl::StrCat(name_.host, ":", name_.port)),
        options_(std::move(options)),
        clock_(options_.clock),
        schedule_(options_) {
    if (clock_ == nullptr) {
      // SystemClock() is never destroyed: hold it without owning it.
      clock_ = std::shared_ptr<Clock>(&SystemClock(), [](Clock*) {});
    }
  }

  ~DnsSource() override {
    // Only reached once the thread has left Loop (it holds a reference),
    // and after Stop joined it, or detached it when Stop ran on it.
    if (thread_.joinable()) thread_.detach();
  }

  std::string Label() const override { return authority_; }

  void Start(std::shared_ptr<Sink> sink) override {
    MutexLock lock(&mu_);
    if (started_) return;
    started_ = true;
    sink_ = std::move(sink);
    // Loop takes mu_ first: it sees thread_ assigned.
    thread_ = std::thread([self = shared_from_this()] { self->Loop(); });
  }

  void Refresh() override {
    MutexLock lock(&mu_);
    if (stopped_) return;
    const absl::Time due = schedule_.Refreshed(clock_->Now(), due_);
    if (due < due_) {
      due_ = due;
      wake_.Signal();
    }
  }

  void Stop() override {
    bool on_loop;
    {
      MutexLock lock(&mu_);
      if (stopped_) return;
      stopped_ = true;
      if (timer_ != 0) clock_->Cancel(timer_);
      timer_ = 0;
      wake_.Signal();
      // The loop thread (a sink call dropped the pool), or a helper it
      // waits for (TellDraining's): joining would wait for ourselves.
      on_loop = std::this_thread::get_id() == loop_thread_ ||
                internal::OnDrainHelperThread();
      if (!started_) return;
    }
    if (on_loop) {
      thread_.detach();  // a sink call dropped the pool: ends on its own
    } else {
      thread_.join();
    }
  }

 private:
  void Loop() {
    std::shared_ptr<Sink> sink;
    {
      MutexLock lock(&mu_);
      loop_thread_ = std::this_thread::get_id();
      sink = sink_;
    }
    for (;;) {
      {
        MutexLock lock(&mu_);
        // Wait until due (a timer on the clock wakes us), refreshed, or
        // stopped.
        for (;;) {
          if (stopped_) return;
          const absl::Time now = clock_->Now();
          if (now >= due_) break;
          ArmLocked(due_ - now);
          wake_.Wait(&mu_);
        }
        schedule_.Started(clock_->Now());
        due_ = absl::InfiniteFuture();
      }
      absl::StatusOr<internal::DnsAnswer> answer = internal::LookUpHost(
          name_.host, name_.server, options_.query_timeout);
      std::vector<Endpoint> endpoints;
      {
        MutexLock lock(&mu_);
        if (stopped_) return;
        const absl::Time now = clock_->Now();
        if (!answer.ok()) {
          due_ = std::min(due_, schedule_.Failed(now));
        } else {
          std::set<std::string> addresses;
          for (const std::string& ip : answer->ipv4) {
            addresses.insert(absl::StrCat("ipv4:", ip, ":", name_.port));
          }
          for (const std::string& ip : answer->ipv6) {
            addresses.insert(absl::StrCat("ipv6:[", ip, "]:", name_.port));
          }
          bool dropped = false;
          for (const std::string& a : last_) dropped |= !addresses.count(a);
          for (const std::string& a : addresses) {
            endpoints.push_back({a, authority_});
          }
          last_ = std::move(addresses);
          due_ = std::min(
              due_, schedule_.Answered(now, answer->shortest_ttl, dropped));
        }
      }
      // The sink may call Refresh (mu_) or drop the pool (Stop).
      if (answer.ok()) {
        sink->OnEndpoints(std::move(endpoints));
      } else {
        sink->OnEndpointsError(answer.status());
      }
    }
  }

  // A clock timer that wakes the loop after `delay`.
  void ArmLocked(absl::Duration delay) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (timer_ != 0) clock_->Cancel(timer_);
    std::weak_ptr<DnsSource> weak = weak_from_this();
    timer_ = clock_->RunAfter(delay, [weak] {
      if (auto self = weak.lock()) {
        MutexLock lock(&self->mu_);
        self->wake_.Signal();
      }
    });
  }

  const Name name_;
  const std::string authority_;
  const ResolverOptions options_;
  std::shared_ptr<Clock> clock_;
  // Assigned once in Start (under mu_); then used only by Stop and the
  // destructor.
  std::thread thread_;

  Mutex mu_;
  CondVar wake_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::thread::id loop_thread_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<Sink> sink_ ABSL_GUARDED_BY(mu_);
  internal::ResolveSchedule schedule_ ABSL_GUARDED_BY(mu_);
  // The next lookup; the first at once.
  absl::Time due_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  Clock::TimerId timer_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<std::string> last_ ABSL_GUARDED_BY(mu_);  // the last answer
};

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
  return std::shared_ptr<EndpointSource>(
      std::make_shared<DnsSource>(std::move(name), std::move(options)));
}

}  // namespace tether
