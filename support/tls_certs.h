// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_SUPPORT_TLS_CERTS_H_
#define TETHER_SUPPORT_TLS_CERTS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace tether {
namespace support {

// Certificates made at test time with the `openssl` command line (EC P-256,
// valid for 2 days), in a temporary directory removed by the destructor:
// a CA, a server certificate for `server_name` signed by it, a client
// certificate signed by it, a second CA that signed nothing the server
// uses, and an expired server certificate (signed by the CA). PEM text.
struct TestCertificates {
  TestCertificates() = default;
  TestCertificates(const TestCertificates&) = delete;
  TestCertificates& operator=(const TestCertificates&) = delete;
  ~TestCertificates();

  std::string dir;
  std::string server_name;
  std::string ca;
  std::string other_ca;
  std::string server_key;
  std::string server_cert;
  std::string expired_server_cert;
  std::string client_key;
  std::string client_cert;

  // TLS (or, with `require_client_cert`, mutual TLS) server credentials
  // with the server certificate (or the expired one).
  std::shared_ptr<grpc::ServerCredentials> ServerCredentials(
      bool require_client_cert, bool expired = false) const;
  // Client credentials trusting `root` (default `ca`), with the client
  // certificate when `with_client_cert`.
  std::shared_ptr<grpc::ChannelCredentials> ClientCredentials(
      bool with_client_cert, const std::string* root = nullptr) const;
};

// Makes the certificates, or says which openssl step failed.
absl::StatusOr<std::unique_ptr<TestCertificates>> MakeTestCertificates(
    const std::string& server_name);

}  // namespace support
}  // namespace tether

#endif  // TETHER_SUPPORT_TLS_CERTS_H_
