// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/classification.h"

#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/types/optional.h"
#include "tether/observer.h"

namespace tether {

absl::string_view EndClassName(EndClass c) {
  switch (c) {
    case EndClass::kOk:
      return "ok";
    case EndClass::kDrain:
      return "drain";
    case EndClass::kTransient:
      return "transient";
    case EndClass::kPermanent:
      return "permanent";
    case EndClass::kResync:
      return "resync";
  }
  return "unknown";
}

absl::string_view AttemptReasonName(AttemptReason r) {
  switch (r) {
    case AttemptReason::kFirst:
      return "first";
    case AttemptReason::kReopen:
      return "reopen";
    case AttemptReason::kMigration:
      return "migration";
    case AttemptReason::kResync:
      return "resync";
    case AttemptReason::kDrainNotice:
      return "drain_notice";
  }
  return "unknown";
}

absl::string_view StreamKindName(StreamKind k) {
  switch (k) {
    case StreamKind::kServerStream:
      return "server_stream";
    case StreamKind::kBidi:
      return "bidi";
  }
  return "unknown";
}

absl::string_view StreamEndName(StreamEnd e) {
  switch (e) {
    case StreamEnd::kFinished:
      return "finished";
    case StreamEnd::kCancelled:
      return "cancelled";
    case StreamEnd::kGaveUp:
      return "gave_up";
    case StreamEnd::kFailed:
      return "failed";
  }
  return "unknown";
}

bool IsReceiveLimit(const absl::Status& status) {
  return status.code() == absl::StatusCode::kResourceExhausted &&
         absl::StrContains(status.message(), "larger than max");
}

bool IsCertificateFailure(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kUnavailable) return false;
  // BoringSSL/OpenSSL reason names as gRPC 1.51 puts them in the message of
  // a call that could not connect ("Ssl handshake failed: SSL_ERROR_SSL:
  // error:1000007d:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED"),
  // and its own message for a name that the certificate does not cover.
  const absl::string_view m = status.message();
  for (absl::string_view needle :
       {"CERTIFICATE_VERIFY_FAILED", "certificate verify failed",
        "SSLV3_ALERT_CERTIFICATE_EXPIRED", "SSLV3_ALERT_BAD_CERTIFICATE",
        "TLSV1_ALERT_UNKNOWN_CA", "certificate unknown",
        "is not in peer certificate"}) {
    if (absl::StrContains(m, needle)) return true;
  }
  return false;
}

RetryPushback ParseRetryPushback(const Metadata& trailers) {
  RetryPushback out;
  auto range = trailers.equal_range("grpc-retry-pushback-ms");
  for (auto it = range.first; it != range.second; ++it) {
    std::int64_t ms = 0;
    const absl::string_view text = absl::StripAsciiWhitespace(it->second);
    const bool digits_only =
        !text.empty() &&
        text.find_first_not_of("-0123456789") == absl::string_view::npos;
    const bool parsed = digits_only && absl::SimpleAtoi(text, &ms);
    const absl::Duration d = absl::Milliseconds(ms);
    if (!parsed || ms < 0 || (out.present && d != out.delay)) {
      out.present = true;
      out.stop = true;
      out.delay = absl::ZeroDuration();
      return out;
    }
    out.present = true;
    out.delay = d;
  }
  return out;
}

AttemptEnd MakeAttemptEnd(const absl::Status& status,
                          const Metadata& trailing_metadata) {
  AttemptEnd end;
  end.status = status;
  end.trailing_metadata = trailing_metadata;
  if (absl::optional<absl::Cord> details =
          status.GetPayload(kStatusDetailsPayloadUrl)) {
    end.error_details = std::string(*details);
  }
  end.pushback = ParseRetryPushback(trailing_metadata);
  return end;
}

EndClass DefaultClassify(const AttemptEnd& end) {
  switch (end.status.code()) {
    case absl::StatusCode::kOk:
      return EndClass::kOk;
    case absl::StatusCode::kUnavailable:
      // A certificate the handshake refuses is refused again on every
      // reconnect: a configuration error, not a server going away.
      if (IsCertificateFailure(end.status)) return EndClass::kPermanent;
      return EndClass::kDrain;
    case absl::StatusCode::kCancelled:
      // Cancelled by the client never reaches a classifier; a CANCELLED that
      // the server or a proxy produced is how a C++ server between its two
      // GOAWAYs ends a stream.
      return end.cancelled_by_client ? EndClass::kOk : EndClass::kDrain;
    case absl::StatusCode::kResourceExhausted:
      // The client's own receive limit: the same message would arrive again
      // on every reopen, so retrying cannot help.
      if (IsReceiveLimit(end.status)) return EndClass::kPermanent;
      return EndClass::kTransient;
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kDataLoss:
      return EndClass::kTransient;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kUnimplemented:
      return EndClass::kPermanent;
    default:
      return EndClass::kTransient;
  }
}

}  // namespace tether
