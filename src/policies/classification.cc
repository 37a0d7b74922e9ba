// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/classification.h"

#include "absl/strings/match.h"
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
  }
  return "unknown";
}

bool IsReceiveLimit(const absl::Status& status) {
  return status.code() == absl::StatusCode::kResourceExhausted &&
         absl::StrContains(status.message(), "larger than max");
}

EndClass DefaultClassify(const AttemptEnd& end) {
  switch (end.status.code()) {
    case absl::StatusCode::kOk:
      return EndClass::kOk;
    case absl::StatusCode::kUnavailable:
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
