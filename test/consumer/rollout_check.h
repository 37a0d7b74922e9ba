// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// What a new project gets from the README's example and one tether::Client:
// a server stream and a bidi stream through graceful and abrupt restarts of
// the servers under them.
#ifndef TETHER_CONSUMER_ROLLOUT_CHECK_H_
#define TETHER_CONSUMER_ROLLOUT_CHECK_H_

#include <string>

namespace consumer {

// Two Feed servers on 127.0.0.1 behind one `tether::Client` (an address
// list); a `Watch` server stream and a `Place` bidi stream (orders with
// idempotency keys, acknowledged with dense ids) run while each server stops
// gracefully (GOAWAY) and then abruptly, and restarts. "" when every event
// and every acknowledgement reached the app once and in order, every order
// was executed once, and no stream ended; else what went wrong.
std::string RolloutWithOneClient();

}  // namespace consumer

#endif  // TETHER_CONSUMER_ROLLOUT_CHECK_H_
