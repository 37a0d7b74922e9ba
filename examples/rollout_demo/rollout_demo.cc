// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// rollout_demo: tether against the usual hand-written reconnect loop, while
// the service under them is rolled out.
//
//   rollout_demo [--svg=rollout_demo.svg] [--watches=32] [--quick] [--check]
//                [--metrics=127.0.0.1:9464] [--log] [--dns]
//
// Three ledger replicas run in this process behind a loopback proxy that
// routes each new connection like a Kubernetes Service (round robin over the
// current endpoints). 32 watches go through tether (ReconnectingStream over
// one tether::Client: a health-checked pool and a breaker wired to it and to
// every stream) and 32
// through the naive loop (one channel, blocking stub, reopen at once, "ended
// before the first message" = the ledger is down; the app subscribes again
// a second later; a breaker that counts every error end). Then:
//   1. a rolling restart with graceful replicas (NOT_SERVING, GOAWAY, drain),
//   2. one with replicas that end streams before their GOAWAY (cancel-first),
//   3. one with replicas that die without a GOAWAY (abrupt),
//   4. an outage of every replica at once, then recovery.
// It prints one row per client and phase and writes an SVG timeline: one
// lane per watch, coloured by the replica serving it.
// --dns: no proxy; the replicas listen on their own loopback addresses
// (127.0.0.11, .12, ... one port), like a headless Service's pods, and a DNS
// server started here (dnsmasq) lists them under ledger.test. Both clients
// get dns://127.0.0.1:<dns port>/ledger.test:<port>: tether resolves it
// itself (one connection per address, following the records), the naive
// client hands it to gRPC. A restart adds the new replica's record, then
// removes the old one's and stops it. There is no abrupt phase then (only
// the proxy can cut connections without a GOAWAY); the outage removes
// every record and stops every replica at once.
// --quick: 8 + 8 watches and shorter drains (the smoke test). --check: exit
// non-zero unless tether lost, repeated, corrupted nothing and saw no error,
// and the SVG parses. --metrics=HOST:PORT serves tether's metrics (the tether
// client's streams, pool and breaker) at http://HOST:PORT/metrics while the
// demo runs (prometheus-cpp's Exposer; needs tether::prometheus). --log
// writes tether's events to stderr through the rate-limited LoggingObserver.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "examples/common/flag_names.h"
#include "examples/common/ledger_replica.h"
#include "examples/common/ledger_watchers.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "support/dns_server.h"
#include "support/fault_proxy.h"
#include "support/figures.h"
#include "support/tls_certs.h"
#include "tether/backoff.h"
#include "tether/circuit_breaker.h"
#include "tether/connection_pool.h"
#include "tether/logging.h"
#include "tether/metrics.h"
#include "tether/resolved_endpoints.h"
#if TETHER_DEMO_PROMETHEUS
#include "prometheus/exposer.h"
#include "prometheus/registry.h"
#include "tether/prometheus.h"
#endif

ABSL_FLAG(std::string, svg, "rollout_demo.svg", "where to write the timeline");
ABSL_FLAG(int, watches, 0, "watches per client (default 32, 8 with --quick)");
ABSL_FLAG(bool, quick, false, "a short run (smoke test)");
ABSL_FLAG(bool, check, false,
          "exit 1 unless tether had no loss/duplicate/bad event/error and "
          "the SVG parses");
ABSL_FLAG(int, tick_ms, 20, "server tick (ms)");
ABSL_FLAG(bool, tls, false,
          "serve and connect over TLS (certificates made now with openssl)");
ABSL_FLAG(std::string, metrics, "",
          "serve tether's metrics at http://HOST:PORT/metrics (e.g. "
          "127.0.0.1:9464; port 0 picks one); empty: off");
ABSL_FLAG(bool, log, false,
          "log tether's stream, pool and breaker events to stderr");
ABSL_FLAG(bool, dns, false,
          "replicas on their own loopback addresses behind a DNS name "
          "(dnsmasq) instead of a proxy");

namespace ex = ::tether::examples;

namespace {

enum Phase { kWarmup, kGraceful, kCancelFirst, kAbrupt, kOutage, kPhases };
const char* const kPhaseNames[] = {"warmup", "graceful", "cancel-first",
                                   "abrupt", "outage"};

struct Marker {
  double t_ms;
  int phase;
  std::string replica;  // the replica that left ("" for the outage end)
  std::string label;
};

struct Client {
  std::string name;
  std::vector<std::shared_ptr<ex::WatchRecorder>> recorders;
  std::shared_ptr<tether::CircuitBreaker> breaker;
  std::atomic<int> transitions[kPhases] = {};
};

using tether::support::Percentile;

// How the clients find the replicas, like a Kubernetes Service: a proxy that
// routes each new connection to one of them, or a DNS name that lists each
// replica's own address (a headless Service).
class Service {
 public:
  virtual ~Service() = default;
  // What a new replica listens on.
  virtual std::string NextListen() = 0;
  // The replica at `address` joins, or leaves (new connections and lookups
  // stop finding it; existing connections stay).
  virtual absl::Status Add(const std::string& address) = 0;
  virtual absl::Status Remove(const std::string& address) = 0;
  // Cuts every connection to `address` without a GOAWAY; false if this
  // Service cannot.
  virtual bool Cut(const std::string& address) = 0;
  // The clients' target.
  virtual std::string Target() const = 0;
  virtual bool ResolvedByTether() const = 0;
};

class ProxyService final : public Service {
 public:
  absl::Status Start() { return proxy_.Start(); }
  std::string NextListen() override { return "127.0.0.1:0"; }
  absl::Status Add(const std::string& address) override {
    return proxy_.AddBackend(address);
  }
  absl::Status Remove(const std::string& address) override {
    proxy_.RemoveBackend(address);
    return absl::OkStatus();
  }
  bool Cut(const std::string& address) override {
    proxy_.Reset(tether::support::Select::Backend(address));
    return true;
  }
  std::string Target() const override { return proxy_.address(); }
  bool ResolvedByTether() const override { return false; }

 private:
  tether::support::FaultProxy proxy_;
};

// Replicas on 127.0.0.11, .12, ... (one port, the first replica's), listed
// under ledger.test.
class DnsService final : public Service {
 public:
  absl::Status Start() {
    auto dns = tether::support::DnsServer::Start();
    if (!dns.ok()) return dns.status();
    dns_ = *std::move(dns);
    return absl::OkStatus();
  }
  std::string NextListen() override {
    return absl::StrCat("127.0.0.", next_host_++, ":", port_);
  }
  absl::Status Add(const std::string& address) override {
    const std::size_t colon = address.rfind(':');
    if (port_ == 0) port_ = std::stoi(address.substr(colon + 1));
    ips_.push_back(address.substr(0, colon));
    return Publish();
  }
  absl::Status Remove(const std::string& address) override {
    ips_.erase(std::remove(ips_.begin(), ips_.end(),
                           address.substr(0, address.rfind(':'))),
               ips_.end());
    return Publish();
  }
  bool Cut(const std::string&) override { return false; }
  std::string Target() const override {
    return absl::StrCat("dns://", dns_->address(), "/ledger.test:", port_);
  }
  bool ResolvedByTether() const override { return true; }

 private:
  absl::Status Publish() { return dns_->SetRecords({{"ledger.test", ips_}}); }

  std::unique_ptr<tether::support::DnsServer> dns_;
  int next_host_ = 11;
  int port_ = 0;
  std::vector<std::string> ips_;
};

// Time from the replicas being back after the outage (the "back" marker) to
// the watch's first event after it.
std::vector<double> Recoveries(const ex::WatchRecorder& r,
                               const std::vector<Marker>& markers) {
  std::vector<double> out;
  for (const Marker& m : markers) {
    if (m.phase != kOutage || !m.replica.empty()) continue;
    for (const ex::Segment& s : r.segments()) {
      if (s.start_ms >= m.t_ms) {
        out.push_back(s.start_ms - m.t_ms);
        break;
      }
    }
  }
  return out;
}

// Time from a replica leaving (marker) to the first event from another
// replica, for every watch that was on it; for the outage, from the
// replicas being back.
std::vector<double> Migrations(const ex::WatchRecorder& r,
                               const std::vector<Marker>& markers, int phase,
                               double tick_ms) {
  if (phase == kOutage) return Recoveries(r, markers);
  std::vector<double> out;
  std::vector<ex::Segment> segs = r.segments();
  for (const Marker& m : markers) {
    if (m.phase != phase || m.replica.empty()) continue;
    for (std::size_t i = 0; i + 1 < segs.size(); ++i) {
      const ex::Segment& s = segs[i];
      bool on_it = (m.replica == "*" || s.replica == m.replica) &&
                   s.start_ms <= m.t_ms && s.end_ms >= m.t_ms - 3 * tick_ms &&
                   segs[i + 1].start_ms >= m.t_ms;
      if (on_it) {
        out.push_back(segs[i + 1].start_ms - m.t_ms);
        break;
      }
    }
  }
  return out;
}

// A tiny well-formedness check: tags nest and close, the root is <svg>.
bool SvgParses(const std::string& text, std::string* why) {
  std::vector<std::string> stack;
  bool saw_root = false;
  std::size_t i = 0;
  while ((i = text.find('<', i)) != std::string::npos) {
    std::size_t end = text.find('>', i);
    if (end == std::string::npos) {
      *why = "unterminated tag";
      return false;
    }
    std::string tag = text.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag.empty()) {
      *why = "empty tag";
      return false;
    }
    if (tag[0] == '?' || tag[0] == '!') continue;
    if (tag[0] == '/') {
      std::string name = tag.substr(1);
      if (stack.empty() || stack.back() != name) {
        *why = "mismatched </" + name + ">";
        return false;
      }
      stack.pop_back();
      continue;
    }
    std::string name = tag.substr(0, tag.find_first_of(" \t\n/"));
    if (!saw_root) {
      if (name != "svg") {
        *why = "root is not <svg>";
        return false;
      }
      saw_root = true;
    } else if (stack.empty()) {
      *why = "content after the root element";
      return false;
    }
    if (tag.back() != '/') stack.push_back(name);
  }
  if (!saw_root || !stack.empty()) {
    *why = "unclosed elements";
    return false;
  }
  return true;
}

std::string Escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '&')
      o += "&amp;";
    else
      o += c;
  }
  return o;
}

std::string RenderSvg(const std::vector<Client*>& clients,
                      const std::vector<Marker>& markers, double end_ms) {
  static const char* kPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759",
                                   "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
                                   "#9c755f", "#bab0ac", "#1b9e77", "#d95f02",
                                   "#7570b3", "#e7298a", "#66a61e"};
  std::map<std::string, std::string> colour;
  auto colour_of = [&](const std::string& replica) {
    auto it = colour.find(replica);
    if (it != colour.end()) return it->second;
    std::string c =
        kPalette[colour.size() % (sizeof(kPalette) / sizeof(kPalette[0]))];
    colour[replica] = c;
    return c;
  };
  // The marker labels are rotated -30 degrees above the lanes: leave them
  // room below the title (9 px text, about 5.5 px a character, rising by
  // sin 30 = 1/2 of their length).
  std::size_t longest = 0;
  for (const Marker& m : markers) longest = std::max(longest, m.label.size());
  const double title_bottom = 24;
  const double top = title_bottom + 5.5 * longest / 2 + 34;
  const double left = 90, right = 20, lane = 7, gap = 24;
  const double width = 1200;
  std::size_t lanes = 0;
  for (Client* c : clients) lanes += c->recorders.size();
  const double plot_w = width - left - right;
  const double height = top + lanes * lane + gap * clients.size() + 70;
  auto x = [&](double t) { return left + plot_w * t / end_ms; };

  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o << absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
      "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" "
      "font-size=\"11\">\n",
      width, height, width, height);
  o << "<title>tether rollout demo: one lane per watch, coloured by the "
       "replica serving it</title>\n";
  o << absl::StrFormat(
      "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" "
      "fill=\"#ffffff\"/>\n",
      width, height);
  o << absl::StrFormat(
      "<text x=\"%.0f\" y=\"18\" font-size=\"14\" font-weight=\"bold\">"
      "Streams during rollouts: colour = serving replica, white = no "
      "events</text>\n",
      left);
  double y = top;
  std::vector<std::pair<double, double>> bands;
  for (Client* c : clients) {
    double y0 = y;
    o << absl::StrFormat(
        "<text x=\"4\" y=\"%.1f\" font-weight=\"bold\">%s</text>\n",
        y0 + c->recorders.size() * lane / 2 + 4, Escape(c->name));
    for (const auto& r : c->recorders) {
      for (const ex::Segment& s : r->segments()) {
        double w = std::max(1.0, x(s.end_ms) - x(s.start_ms));
        o << absl::StrFormat(
            "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
            "fill=\"%s\"/>\n",
            x(s.start_ms), y, w, lane - 1, colour_of(s.replica));
      }
      y += lane;
    }
    bands.push_back({y0, y});
    y += gap;
  }
  // Rollout markers: one line per replica leaving.
  for (const Marker& m : markers) {
    o << absl::StrFormat(
        "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" "
        "stroke=\"#000000\" stroke-width=\"1\" stroke-dasharray=\"3,2\"/>\n",
        x(m.t_ms), top - 14, x(m.t_ms), y - gap);
    o << absl::StrFormat(
        "<text x=\"%.1f\" y=\"%.0f\" font-size=\"9\" "
        "transform=\"rotate(-30 %.1f %.0f)\">%s</text>\n",
        x(m.t_ms) + 2, top - 16, x(m.t_ms) + 2, top - 16, Escape(m.label));
  }
  // Time axis and legend.
  double axis_y = y - gap + 14;
  for (double t = 0; t <= end_ms; t += 5000) {
    o << absl::StrFormat("<text x=\"%.1f\" y=\"%.0f\">%.0fs</text>\n", x(t),
                         axis_y, t / 1000);
  }
  double lx = left;
  double ly = axis_y + 22;
  o << absl::StrFormat("<text x=\"4\" y=\"%.0f\">replicas:</text>\n", ly + 9);
  for (const auto& [replica, c] : colour) {
    o << absl::StrFormat(
        "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"10\" "
        "fill=\"%s\"/><text x=\"%.0f\" y=\"%.0f\">%s</text>\n",
        lx, ly, c, lx + 15, ly + 9, Escape(replica));
    lx += 70;
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("tether vs a naive client during rollouts");
  ex::AcceptDashedFlags(argc, argv);
  absl::ParseCommandLine(argc, argv);
  const bool quick = absl::GetFlag(FLAGS_quick);
  int watches = absl::GetFlag(FLAGS_watches);
  if (watches <= 0) watches = quick ? 8 : 32;
  const int tick_ms = absl::GetFlag(FLAGS_tick_ms);
  const absl::Duration drain =
      quick ? absl::Milliseconds(500) : absl::Milliseconds(1500);
  const absl::Duration settle =
      quick ? absl::Milliseconds(500) : absl::Milliseconds(1500);
  const absl::Duration outage = quick ? absl::Seconds(1) : absl::Seconds(3);
  if (tick_ms <= 0) {
    std::fprintf(stderr, "rollout_demo: --tick-ms must be > 0\n");
    return 2;
  }

  const absl::Time epoch = absl::Now();
  auto now_ms = [&] { return absl::ToDoubleMilliseconds(absl::Now() - epoch); };
  std::atomic<int> phase{kWarmup};
  std::vector<Marker> markers;

  // --tls: a CA and a server certificate for "ledger.demo", made now. The
  // proxy forwards bytes, so the TLS session runs from client to replica;
  // clients check the certificate against that name.
  std::unique_ptr<tether::support::TestCertificates> certs;
  if (absl::GetFlag(FLAGS_tls)) {
    auto made = tether::support::MakeTestCertificates("ledger.demo");
    if (!made.ok()) {
      std::fprintf(stderr, "rollout_demo: --tls: %s\n",
                   made.status().ToString().c_str());
      return 1;
    }
    certs = *std::move(made);
    std::printf("TLS on: replicas present a certificate for ledger.demo\n");
  }
  std::shared_ptr<grpc::ChannelCredentials> client_credentials =
      certs ? certs->ClientCredentials(/*with_client_cert=*/false)
            : grpc::InsecureChannelCredentials();
  grpc::ChannelArguments client_args;
  if (certs) client_args.SetSslTargetNameOverride("ledger.demo");

  std::unique_ptr<Service> service;
  if (absl::GetFlag(FLAGS_dns)) {
    auto dns = std::make_unique<DnsService>();
    const absl::Status s = dns->Start();
    if (!s.ok()) {
      std::fprintf(stderr, "rollout_demo: --dns: %s\n", s.ToString().c_str());
      return 1;
    }
    service = std::move(dns);
  } else {
    auto proxy = std::make_unique<ProxyService>();
    if (!proxy->Start().ok()) {
      std::fprintf(stderr, "rollout_demo: proxy did not start\n");
      return 1;
    }
    service = std::move(proxy);
  }
  // Three slots (a, b, c); each restart makes a new replica a2, a3, ...
  int generation[3] = {0, 0, 0};
  std::unique_ptr<ex::LedgerReplica> slots[3];
  // Starts a new replica for slot i and adds it to the Service.
  auto start_replica = [&](int i) -> std::unique_ptr<ex::LedgerReplica> {
    ex::LedgerReplicaOptions o;
    o.name = absl::StrCat(std::string(1, static_cast<char>('a' + i)),
                          ++generation[i]);
    o.tick = absl::Milliseconds(tick_ms);
    o.drain = drain;
    o.listen = service->NextListen();
    if (certs) o.credentials = certs->ServerCredentials(false);
    auto r = std::make_unique<ex::LedgerReplica>(o);
    absl::Status s = r->Start();
    if (s.ok()) s = service->Add(r->address());
    if (!s.ok()) {
      std::fprintf(stderr, "rollout_demo: replica: %s\n", s.ToString().c_str());
      return nullptr;
    }
    return r;
  };
  // Takes a replica out of the Service and stops it in `mode`.
  auto stop_replica = [&](std::unique_ptr<ex::LedgerReplica> old,
                          ex::ShutdownMode mode, int ph) {
    const absl::Status s = service->Remove(old->address());
    if (!s.ok()) {
      std::fprintf(stderr, "rollout_demo: %s\n", s.ToString().c_str());
    }
    markers.push_back(Marker{now_ms(), ph, old->name(),
                             absl::StrCat(kPhaseNames[ph], " ", old->name())});
    if (mode == ex::ShutdownMode::kAbrupt) service->Cut(old->address());
    old->Stop(mode);
  };
  for (int i = 0; i < 3; ++i) {
    slots[i] = start_replica(i);
    if (slots[i] == nullptr) return 1;
  }

  // Clients.
  // A demo compresses hours into seconds: breaks of 1-4 s (default 5-60 s)
  // so the recovery after the outage shows within the run.
  tether::CircuitBreakerOptions bo;
  bo.break_duration = absl::Seconds(1);
  bo.max_break_duration = absl::Seconds(4);
  Client tether_client, naive_client;
  tether_client.name = "tether";
  naive_client.name = "naive";
  bo.name = naive_client.name;
  // Metrics (--metrics) and logs (--log) of the tether client.
  std::shared_ptr<tether::MetricsSink> metrics_sink;
#if TETHER_DEMO_PROMETHEUS
  std::unique_ptr<prometheus::Exposer> exposer;
#endif
  const std::string metrics_at = absl::GetFlag(FLAGS_metrics);
  if (!metrics_at.empty()) {
#if TETHER_DEMO_PROMETHEUS
    auto registry = std::make_shared<prometheus::Registry>();
    metrics_sink = tether::PrometheusMetricsSink::Create(registry);
    try {
      exposer = std::make_unique<prometheus::Exposer>(metrics_at);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rollout_demo: cannot serve metrics at %s: %s\n",
                   metrics_at.c_str(), e.what());
      return 1;
    }
    exposer->RegisterCollectable(registry);
    const std::string host = metrics_at.substr(0, metrics_at.rfind(':'));
    std::printf("rollout_demo: metrics at http://%s:%d/metrics\n", host.c_str(),
                exposer->GetListeningPorts().at(0));
#else
    std::fprintf(stderr,
                 "rollout_demo: --metrics needs tether::prometheus "
                 "(prometheus-cpp was not found at build time)\n");
    return 1;
#endif
  }
  // The tether side is one tether::Client: pool, breaker (wired to the pool
  // and to every stream), backoff, logs and metrics from one options struct.
  tether::ClientOptions co;
  if (service->ResolvedByTether()) {
    // Looked up every second (default 5 s): the demo's rollouts take
    // seconds, not minutes.
    tether::ResolverOptions ro;
    ro.resolve_interval = absl::Seconds(1);
    ro.min_resolve_interval = absl::Milliseconds(100);
    auto source = tether::ResolvedEndpoints(service->Target(), ro);
    if (!source.ok()) {
      std::fprintf(stderr, "rollout_demo: %s\n",
                   source.status().ToString().c_str());
      return 1;
    }
    co.pool.endpoints = *std::move(source);
  } else {
    co.pool.target = service->Target();
  }
  co.pool.health_check = true;
  co.pool.credentials = client_credentials;
  co.pool.channel_args = client_args;
  co.breaker = bo;
  co.breaker.name = tether_client.name;
  // Backoff capped at 1 s (default 10 s), for the same reason.
  tether::ExponentialBackoffOptions backoff;
  backoff.max_delay = absl::Seconds(1);
  co.streams.backoff = tether::ExponentialBackoff::Create(backoff).value();
  co.logging = absl::nullopt;
  if (absl::GetFlag(FLAGS_log)) {
    co.logging = tether::LoggingOptions();
    co.logging->prefix = "tether-client";
  }
  co.metrics = metrics_sink;
  auto client = tether::Client::Create(std::move(co));
  if (!client.ok()) {
    std::fprintf(stderr, "rollout_demo: %s\n",
                 client.status().ToString().c_str());
    return 1;
  }
  tether_client.breaker = (*client)->breaker();
  naive_client.breaker = tether::CircuitBreaker::Create(bo).value();
  for (Client* c : {&tether_client, &naive_client}) {
    c->breaker->AddListener(
        [c, &phase](tether::BreakerState, tether::BreakerState) {
          c->transitions[std::clamp(phase.load(), 0, kPhases - 1)]++;
        });
    for (int i = 0; i < watches; ++i) {
      c->recorders.push_back(std::make_shared<ex::WatchRecorder>(
          absl::StrCat("acct-", i), epoch, &phase));
    }
  }
  std::vector<std::unique_ptr<ex::TetherWatch>> tw;
  for (auto& r : tether_client.recorders) {
    auto w = ex::TetherWatch::Start(**client, r);
    if (!w.ok()) {
      std::fprintf(stderr, "rollout_demo: %s\n", w.status().ToString().c_str());
      return 1;
    }
    tw.push_back(*std::move(w));
  }
  auto channel = grpc::CreateCustomChannel(service->Target(),
                                          client_credentials, client_args);
  std::vector<std::unique_ptr<ex::NaiveWatch>> nw;
  ex::NaiveWatchOptions no;
  no.breaker = naive_client.breaker;
  no.resubscribe_after = absl::Seconds(1);
  for (auto& r : naive_client.recorders) {
    nw.push_back(std::make_unique<ex::NaiveWatch>(channel, r, no));
  }
  std::printf(
      "rollout_demo: 3 replicas behind %s, %d tether + %d naive "
      "watches, tick %d ms\n",
      service->Target().c_str(), watches, watches, tick_ms);
  std::fflush(stdout);

  absl::SleepFor(settle * 2);  // warm up
  std::vector<int> rollouts = {kGraceful, kCancelFirst};
  if (!service->ResolvedByTether()) rollouts.push_back(kAbrupt);
  for (int ph : rollouts) {
    phase = ph;
    const ex::ShutdownMode mode = ph == kGraceful ? ex::ShutdownMode::kGraceful
                                  : ph == kCancelFirst
                                      ? ex::ShutdownMode::kCancelFirst
                                      : ex::ShutdownMode::kAbrupt;
    std::printf("  %5.1fs rolling restart, %s replicas\n", now_ms() / 1000,
                kPhaseNames[ph]);
    std::fflush(stdout);
    for (int i = 0; i < 3; ++i) {
      auto fresh = start_replica(i);  // make before break
      if (fresh == nullptr) return 1;
      stop_replica(std::move(slots[i]), mode, ph);
      slots[i] = std::move(fresh);
      absl::SleepFor(settle);
    }
    absl::SleepFor(settle);
  }

  phase = kOutage;
  std::printf("  %5.1fs outage of every replica for %s\n", now_ms() / 1000,
              absl::FormatDuration(outage).c_str());
  std::fflush(stdout);
  markers.push_back(Marker{now_ms(), kOutage, "*", "outage: all down"});
  for (auto& r : slots) {
    (void)service->Remove(r->address());
    service->Cut(r->address());
  }
  for (auto& r : slots) {
    r->Stop(ex::ShutdownMode::kAbrupt);
    r.reset();
  }
  absl::SleepFor(outage);
  markers.push_back(Marker{now_ms(), kOutage, "", "back"});
  for (int i = 0; i < 3; ++i) {
    slots[i] = start_replica(i);
    if (slots[i] == nullptr) return 1;
  }
  // Wait (bounded) until every tether watch delivers again: its backoff
  // after the outage decides when, not a fixed sleep.
  const absl::Time recovered_by = absl::Now() + absl::Seconds(20);
  auto all_back = [&] {
    for (auto& r : tether_client.recorders) {
      if (r->phase(kOutage).events == 0) return false;
    }
    return true;
  };
  while (!all_back() && absl::Now() < recovered_by) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  absl::SleepFor(settle * 2 + absl::Seconds(quick ? 0 : 2));

  const double end_ms = now_ms();
  for (auto& w : tw) w->Stop();
  for (auto& w : nw) w->Stop();
  tw.clear();
  nw.clear();
  client->reset();

  // The table.
  std::printf("\n%-7s %-13s %8s %5s %5s %7s %8s %9s %9s %9s %8s\n", "client",
              "rollout", "events", "lost", "dups", "errors", "reopens",
              "drain-hit", "migr p50", "migr p99", "breaker");
  bool ok = true;
  std::vector<int> shown = rollouts;
  shown.push_back(kOutage);
  for (Client* c : {&tether_client, &naive_client}) {
    for (int ph : shown) {
      ex::WatchCounts sum;
      std::vector<double> mig;
      for (auto& r : c->recorders) {
        sum.Add(r->phase(ph));
        auto m = Migrations(*r, markers, ph, tick_ms);
        mig.insert(mig.end(), m.begin(), m.end());
      }
      std::string p50 =
          mig.empty() ? "-" : absl::StrFormat("%.0fms", Percentile(mig, 0.5));
      std::string p99 =
          mig.empty() ? "-" : absl::StrFormat("%.0fms", Percentile(mig, 0.99));
      std::printf("%-7s %-13s %8d %5d %5d %7d %8d %9d %9s %9s %8d\n",
                  c->name.c_str(), kPhaseNames[ph],
                  static_cast<int>(sum.events), static_cast<int>(sum.lost),
                  static_cast<int>(sum.duplicates),
                  static_cast<int>(sum.errors), static_cast<int>(sum.reopens),
                  static_cast<int>(sum.dead_attempts), p50.c_str(), p99.c_str(),
                  c->transitions[ph].load());
      if (c == &tether_client &&
          (sum.errors != 0 || sum.lost != 0 || sum.duplicates != 0 ||
           sum.bad_events != 0 || sum.events == 0)) {
        ok = false;
      }
    }
  }
  std::printf(
      "\nevents: delivered to the app; lost: skipped seqs; errors: ends the "
      "app saw;\ndrain-hit: attempts that died before their first message "
      "(on a draining\nconnection, or into the outage); migr: replica leaves "
      "-> first event from\nanother replica (outage: replicas back -> first "
      "event); breaker: transitions.\n");

  std::vector<Client*> clients = {&tether_client, &naive_client};
  std::string svg = RenderSvg(clients, markers, end_ms);
  const std::string svg_path = absl::GetFlag(FLAGS_svg);
  {
    std::ofstream f(svg_path);
    f << svg;
    if (!f.good()) {
      std::fprintf(stderr, "rollout_demo: cannot write %s\n", svg_path.c_str());
      return 1;
    }
  }
  std::printf("timeline: %s (%.1f s run)\n", svg_path.c_str(), end_ms / 1000);

  if (absl::GetFlag(FLAGS_check)) {
    std::ifstream f(svg_path);
    std::stringstream back;
    back << f.rdbuf();
    std::string why;
    if (!SvgParses(back.str(), &why)) {
      std::fprintf(stderr, "CHECK FAILED: %s does not parse: %s\n",
                   svg_path.c_str(), why.c_str());
      return 1;
    }
    if (back.str().find("<rect") == std::string::npos) {
      std::fprintf(stderr, "CHECK FAILED: SVG has no lanes\n");
      return 1;
    }
    if (!ok) {
      std::fprintf(stderr,
                   "CHECK FAILED: tether lost, repeated or "
                   "corrupted events, or the app saw an error\n");
      return 1;
    }
    std::printf("check: OK\n");
  }
  return 0;
}
