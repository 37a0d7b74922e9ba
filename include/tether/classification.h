// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_CLASSIFICATION_H_
#define TETHER_CLASSIFICATION_H_

#include <functional>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace tether {

// What the end of one attempt means for the stream. Answers one question:
// what does this status say about the server?
enum class EndClass {
  kOk,         // the server finished the stream: the stream ends OK
  kDrain,      // the server (or its connection) is going away: reopen elsewhere
  kTransient,  // a passing failure: reopen after backoff, within the budget
  kPermanent,  // retrying cannot help: the stream ends with this status
  // Reported only, never asked of a classifier: the end asked the stream to
  // resync (`resync_on_end`), so it was not classified; the stream resyncs.
  // A classifier that returns it is taken as kTransient.
  kResync,
};

absl::string_view EndClassName(EndClass c);

// Metadata as a gRPC client receives it: lower-case keys, binary values for
// keys ending in "-bin", a key may repeat.
using Metadata = std::multimap<std::string, std::string>;

// The `absl::Status` payload under which tether keeps a call's error details
// (gRPC's `grpc-status-details-bin`, a serialized `google.rpc.Status`):
// `status.GetPayload(kStatusDetailsPayloadUrl)`.
inline constexpr absl::string_view kStatusDetailsPayloadUrl =
    "type.googleapis.com/google.rpc.Status";

// A server's retry pushback (gRFC A6): the trailer `grpc-retry-pushback-ms`.
struct RetryPushback {
  // The trailer was present.
  bool present = false;
  // Negative or malformed: the server asks the client not to retry at all.
  bool stop = false;
  // The delay the server asks for, when `present && !stop`. It replaces the
  // backoff delay before the next attempt.
  absl::Duration delay = absl::ZeroDuration();
};

// Reads `grpc-retry-pushback-ms` from trailing metadata. A value that is not
// a decimal integer (including an empty one, or one past int64), a negative
// value, or several values that disagree all mean `stop`.
RetryPushback ParseRetryPushback(const Metadata& trailers);

// Facts about an ended attempt that a classifier may use. Successor of the
// old input (status, cancelled_by_client, received_messages): the fields
// below them were added, so classifiers written for the old fields work
// unchanged.
struct AttemptEnd {
  absl::Status status;
  // True when tether (for a migration) or the application cancelled this
  // attempt. Such an attempt is never classified; this is always false for
  // the statuses a classifier sees.
  bool cancelled_by_client = false;
  // True when the attempt received at least one message.
  bool received_messages = false;
  // The server's trailing metadata (empty when the end did not come from a
  // server: a failure to connect, a fake that sends none).
  Metadata trailing_metadata;
  // The serialized `google.rpc.Status` the server attached
  // (`grpc-status-details-bin`), empty if none. `status` carries it too, as
  // the payload `kStatusDetailsPayloadUrl`.
  std::string error_details;
  // `ParseRetryPushback(trailing_metadata)`. Whatever the classifier says,
  // a retryable end (drain, transient) with `pushback.stop` ends the stream
  // with `status`, and one with a delay waits that delay instead of the
  // backoff's.
  RetryPushback pushback;
};

// An `AttemptEnd` for `status` and `trailing_metadata`: fills in
// `error_details` (from the status payload) and `pushback`.
AttemptEnd MakeAttemptEnd(const absl::Status& status,
                          const Metadata& trailing_metadata);

// A classifier maps an attempt's end to an `EndClass`. It must be pure and
// thread-safe: it is called from gRPC threads concurrently.
using Classifier = std::function<EndClass(const AttemptEnd&)>;

// The default table:
//   OK                                                    -> kOk
//   UNAVAILABLE, CANCELLED (not by the client)            -> kDrain
//   RESOURCE_EXHAUSTED from the client's own receive limit
//   ("Received message larger than max"): the same message
//   would come again on every reopen                       -> kPermanent
//   RESOURCE_EXHAUSTED (other), ABORTED, INTERNAL, UNKNOWN,
//   DEADLINE_EXCEEDED (of one attempt), DATA_LOSS         -> kTransient
//   INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS,
//   PERMISSION_DENIED, UNAUTHENTICATED, FAILED_PRECONDITION,
//   OUT_OF_RANGE, UNIMPLEMENTED                           -> kPermanent
EndClass DefaultClassify(const AttemptEnd& end);

// RESOURCE_EXHAUSTED because a message exceeded the client's receive limit
// (`GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH`), as gRPC reports it.
bool IsReceiveLimit(const absl::Status& status);

// UNAVAILABLE because the TLS handshake refused the peer's certificate (an
// unknown CA, an expired or not yet valid certificate, a name mismatch), as
// gRPC 1.51 reports it ("Ssl handshake failed: ... CERTIFICATE_VERIFY_FAILED"
// and the like). A configuration error: the default classifier treats it as
// permanent instead of reconnecting for ever.
bool IsCertificateFailure(const absl::Status& status);

}  // namespace tether

#endif  // TETHER_CLASSIFICATION_H_
