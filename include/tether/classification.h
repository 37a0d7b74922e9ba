// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_CLASSIFICATION_H_
#define TETHER_CLASSIFICATION_H_

#include <functional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tether {

// What the end of one attempt means for the stream. Answers one question:
// what does this status say about the server?
enum class EndClass {
  kOk,         // the server finished the stream: the stream ends OK
  kDrain,      // the server (or its connection) is going away: reopen elsewhere
  kTransient,  // a passing failure: reopen after backoff, within the budget
  kPermanent,  // retrying cannot help: the stream ends with this status
};

absl::string_view EndClassName(EndClass c);

// Facts about an ended attempt that a classifier may use.
struct AttemptEnd {
  absl::Status status;
  // True when tether (for a migration) or the application cancelled this
  // attempt. Such an attempt is never classified; this is always false for
  // the statuses a classifier sees.
  bool cancelled_by_client = false;
  // True when the attempt received at least one message.
  bool received_messages = false;
};

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

}  // namespace tether

#endif  // TETHER_CLASSIFICATION_H_
