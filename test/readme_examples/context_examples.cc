// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// The README's examples for interceptors, per-attempt context, pushback, the
// unary helper, generated-method glue and TLS, compiled as written there
// (keep the two in step). The test below runs what needs no server.
#include <memory>
#include <string>
#include <utility>

#include "grpcpp/grpcpp.h"
#include "grpcpp/support/client_interceptor.h"
#include "gtest/gtest.h"
#include "ledger/ledger.grpc.pb.h"
#include "tether/classification.h"
#include "tether/connection_pool.h"
#include "tether/generated_method.h"
#include "tether/reconnecting_stream.h"
#include "tether/unary_call.h"

namespace readme {

using tether::examples::ledger::v1::AccountEvent;
using tether::examples::ledger::v1::Balance;
using tether::examples::ledger::v1::GetBalanceRequest;
using tether::examples::ledger::v1::Ledger;
using tether::examples::ledger::v1::WatchAccountRequest;

// --- README: "Interceptors" ---------------------------------------------
class AuthInterceptor : public grpc::experimental::Interceptor {
 public:
  void Intercept(grpc::experimental::InterceptorBatchMethods* m) override {
    if (m->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::
                PRE_SEND_INITIAL_METADATA)) {
      m->GetSendInitialMetadata()->insert({"authorization", "Bearer t0ken"});
    }
    m->Proceed();
  }
};
class AuthFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new AuthInterceptor;
  }
};

tether::ConnectionPoolOptions InterceptedPool() {
  tether::ConnectionPoolOptions pool_options;
  pool_options.target = "ledger.internal:443";
  pool_options.interceptor_factories.push_back(
      std::make_shared<AuthFactory>());  // on every connection, every call
  return pool_options;
}

// --- README: "Per-attempt context" and generated-method glue --------------
tether::StreamSpec<WatchAccountRequest, AccountEvent> WatchSpec() {
  tether::StreamSpec<WatchAccountRequest, AccountEvent> spec;
  spec.start = tether::StartWith<Ledger>(&Ledger::Stub::async::WatchAccount);
  spec.request.set_account("alice");
  spec.sequence_of = [](const AccountEvent& e) { return e.seq(); };
  spec.resume_after = [](WatchAccountRequest& r, std::uint64_t seq) {
    r.set_after_seq(seq);
  };
  spec.configure_attempt = [](grpc::ClientContext& context,
                              const tether::AttemptInfo& info) {
    context.AddMetadata("x-attempt", std::to_string(info.attempt));
    context.AddMetadata("x-reason",
                        std::string(tether::AttemptReasonName(info.reason)));
    if (info.resumed) {
      context.AddMetadata("x-resume-after",
                          std::to_string(info.resume_after_seq));
    }
  };
  return spec;
}

// --- README: "The full end of an attempt" ---------------------------------
tether::EndClass Classify(const tether::AttemptEnd& end) {
  // A quota the server says will not reset soon: stop instead of retrying.
  auto quota = end.trailing_metadata.find("x-quota-reset");
  if (end.status.code() == absl::StatusCode::kResourceExhausted &&
      quota != end.trailing_metadata.end() && quota->second == "never") {
    return tether::EndClass::kPermanent;
  }
  // end.error_details: the server's google.rpc.Status, serialized.
  // end.pushback: grpc-retry-pushback-ms, applied by tether after this.
  return tether::DefaultClassify(end);
}

// --- README: "Unary calls" -------------------------------------------------
absl::StatusOr<std::int64_t> BalanceOf(
    const std::shared_ptr<tether::ConnectionPool>& pool,
    const std::shared_ptr<tether::CircuitBreaker>& breaker) {
  tether::UnaryCallOptions options;
  options.breaker = breaker;  // the same one the streams use
  options.attempt_timeout = absl::Seconds(2);
  options.overall_timeout = absl::Seconds(10);
  auto caller = tether::UnaryCaller<GetBalanceRequest, Balance>::Create(
      pool, tether::StartWith<Ledger>(&Ledger::Stub::async::GetBalance),
      options);
  if (!caller.ok()) return caller.status();
  GetBalanceRequest request;
  request.set_account("alice");
  absl::StatusOr<Balance> balance = (*caller)->Call(request);  // blocking
  if (!balance.ok()) return balance.status();
  return balance->balance();
}

// --- README: "TLS" -----------------------------------------------------------
tether::ConnectionPoolOptions TlsPool(const std::string& ca_pem,
                                      const std::string& client_key_pem,
                                      const std::string& client_cert_pem) {
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = ca_pem;
  tls.pem_private_key = client_key_pem;  // both empty: TLS without mTLS
  tls.pem_cert_chain = client_cert_pem;
  tether::ConnectionPoolOptions pool_options;
  pool_options.addresses = {"10.0.0.7:443", "10.0.0.8:443"};
  pool_options.credentials = grpc::SslCredentials(tls);
  // The certificates name the service, not the addresses:
  pool_options.channel_args.SetSslTargetNameOverride("ledger.internal");
  return pool_options;
}

}  // namespace readme

TEST(ReadmeContextExamples, BuildAndValidate) {
  EXPECT_TRUE(tether::ConnectionPool::Create(readme::InterceptedPool()).ok());
  EXPECT_TRUE(
      tether::ConnectionPool::Create(readme::TlsPool("", "", "")).ok());
  auto spec = readme::WatchSpec();
  EXPECT_TRUE(spec.start && spec.sequence_of && spec.configure_attempt);
  tether::AttemptEnd end;
  end.status = absl::ResourceExhaustedError("quota");
  end.trailing_metadata = {{"x-quota-reset", "never"}};
  EXPECT_EQ(readme::Classify(end), tether::EndClass::kPermanent);
  // BalanceOf needs a server; it is compiled, not run.
  EXPECT_NE(&readme::BalanceOf, nullptr);
}
