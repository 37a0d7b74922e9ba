// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "support/tls_certs.h"

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/security/server_credentials.h"

namespace tether {
namespace support {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::Status Run(const std::string& dir, const std::string& command) {
  const std::string full = absl::StrCat("cd '", dir, "' && ", command,
                                        " >>openssl.log 2>&1");
  const int rc = std::system(full.c_str());
  if (rc != 0) {
    std::string log = ReadFile(dir + "/openssl.log").value_or("");
    return absl::InternalError(
        absl::StrCat("openssl step failed (", rc, "): ", command, "\n", log));
  }
  return absl::OkStatus();
}

constexpr char kNewKey[] =
    "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";

}  // namespace

TestCertificates::~TestCertificates() {
  if (!dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
}

std::shared_ptr<grpc::ServerCredentials> TestCertificates::ServerCredentials(
    bool require_client_cert, bool expired) const {
  grpc::SslServerCredentialsOptions options(
      require_client_cert
          ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
          : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  if (require_client_cert) options.pem_root_certs = ca;
  options.pem_key_cert_pairs.push_back(
      {server_key, expired ? expired_server_cert : server_cert});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> TestCertificates::ClientCredentials(
    bool with_client_cert, const std::string* root) const {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = root != nullptr ? *root : ca;
  if (with_client_cert) {
    options.pem_private_key = client_key;
    options.pem_cert_chain = client_cert;
  }
  return grpc::SslCredentials(options);
}

absl::StatusOr<std::unique_ptr<TestCertificates>> MakeTestCertificates(
    const std::string& server_name) {
  auto certs = std::make_unique<TestCertificates>();
  std::string tmpl =
      (std::filesystem::temp_directory_path() / "tether-tls-XXXXXX").string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    return absl::InternalError("mkdtemp failed");
  }
  certs->dir = buf.data();
  certs->server_name = server_name;
  const std::string& d = certs->dir;
  const std::vector<std::string> steps = {
      absl::StrCat("openssl req -x509 ", kNewKey,
                   " -keyout ca.key -out ca.pem -days 2 -subj /CN=tether-ca"),
      absl::StrCat("openssl req -x509 ", kNewKey,
                   " -keyout other.key -out other.pem -days 2"
                   " -subj /CN=tether-other-ca"),
      absl::StrCat("printf 'subjectAltName=DNS:", server_name,
                   "\\n' > server.ext"),
      absl::StrCat("openssl req ", kNewKey,
                   " -keyout server.key -out server.csr -subj /CN=",
                   server_name),
      "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key"
      " -CAcreateserial -out server.pem -days 2 -extfile server.ext",
      // -days -1: notAfter is a day before notBefore, so already past.
      "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key"
      " -CAcreateserial -out expired.pem -days -1 -extfile server.ext",
      absl::StrCat("openssl req ", kNewKey,
                   " -keyout client.key -out client.csr -subj /CN=tether-client"),
      "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key"
      " -CAcreateserial -out client.pem -days 2",
  };
  for (const std::string& step : steps) {
    absl::Status s = Run(d, step);
    if (!s.ok()) return s;
  }
  struct Slot {
    const char* file;
    std::string* into;
  };
  for (const Slot& slot : {Slot{"ca.pem", &certs->ca},
                           Slot{"other.pem", &certs->other_ca},
                           Slot{"server.key", &certs->server_key},
                           Slot{"server.pem", &certs->server_cert},
                           Slot{"expired.pem", &certs->expired_server_cert},
                           Slot{"client.key", &certs->client_key},
                           Slot{"client.pem", &certs->client_cert}}) {
    absl::StatusOr<std::string> text = ReadFile(d + "/" + slot.file);
    if (!text.ok()) return text.status();
    *slot.into = *std::move(text);
  }
  return certs;
}

}  // namespace support
}  // namespace tether
