// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: how the stream core asks a bidi stream's outbox which write a
// response acknowledges, and tells it when one reaches the app.
#ifndef TETHER_INTERNAL_ACK_LEDGER_H_
#define TETHER_INTERNAL_ACK_LEDGER_H_

#include <cstdint>

#include "tether/internal/deferred.h"

namespace tether {
namespace internal {

// What a response acknowledges, found when it arrives.
struct AckMatch {
  enum class Kind : std::uint8_t {
    kNone,    // no write: an ordinary response
    kWrite,   // a write still waiting for its acknowledgement
    kRepeat,  // a write already acknowledged to the app
  };
  Kind kind = Kind::kNone;
  std::uint64_t write = 0;  // the ledger's id of the write
};

// The writes of a bidi stream that wait for acknowledgements.
//
// Rule: a write counts as acknowledged when a response that acknowledges it
// is admitted for the app (it will reach `on_message` or `Read`), not when
// the response arrives. A response that arrives and is then dropped (a
// duplicate position, the held message of an attempt a move leaves, an
// attempt cancelled meanwhile) acknowledges nothing: its write stays and
// the next attempt replays it. A response that acknowledges a write the app
// already had acknowledged is not admitted at all.
//
// The stream core calls `Match` for each response on the attempt's thread,
// with no lock held (it runs the app's `acknowledges`; what that throws
// propagates), and `Admit` under its own lock when the response is about to
// be queued for the app. `Admit` takes only the ledger's lock (a leaf) and
// calls nothing: what must follow (on_writable, observer calls) goes into
// `later`.
class AckLedger {
 public:
  virtual AckMatch Match(const void* response) = 0;
  // Whether the response matched as `match` may reach the app; if it
  // acknowledges a write still waiting, that write is done.
  virtual bool Admit(const AckMatch& match, Deferred& later) = 0;

 protected:
  ~AckLedger() = default;
};

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_ACK_LEDGER_H_
